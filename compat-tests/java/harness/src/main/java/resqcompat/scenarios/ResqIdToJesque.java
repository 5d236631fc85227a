package resqcompat.scenarios;

import net.greghaines.jesque.worker.MapBasedJobFactory;
import resqcompat.Check;
import resqcompat.Env;
import resqcompat.JesqueSide;
import resqcompat.Json;
import resqcompat.Redis;
import resqcompat.ResqCli;
import resqcompat.jobs.JobSink;
import resqcompat.jobs.RecordJob;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Scenario e: jobs resq enqueued with tracking ({@code Client::enqueue_class_tracked}: the
 * Resque form plus the extra field {@code resq_id}, {@code {"class","args","resq_id"}}) are run
 * by a real Jesque WorkerImpl.
 *
 * <ul>
 *   <li>e-resq-id: Jesque ignores the extra field: every job runs once, in order, with exactly
 *       the args given, and Jesque records no failure. resq's record of such a job stays
 *       {@code queued} until resq's next prune round.</li>
 *   <li>e-settled: resq's prune round ({@code resq prune}) ends the records of the jobs Jesque
 *       ran {@code failed} (outcome unknown), and searches a queue that is a Jesque zset: of two
 *       tracked jobs moved into Jesque's delayed form of their queue (the exact bytes,
 *       {@code ZADD} scored in ms), the one a Jesque worker took when due is ended, the one not
 *       due yet (still in the zset) is kept {@code queued}.</li>
 * </ul>
 */
public final class ResqIdToJesque {
    private static final String Q = "jq-e";
    private static final String ZQ = "jz-e";

    private ResqIdToJesque() {
    }

    public static final List<String> NAMES = List.of("e-resq-id", "e-settled");

    /** Fills the check named in {@link #NAMES}. */
    public static void run(Env env, List<Check> checks) throws Exception {
        Check c = checks.get(0);
        String ns = env.namespace("e");
        List<List<String>> sent = List.of(
                List.of(),
                List.of("1", "-5", "9223372036854775807"),
                List.of("\"héllo \\\"q\\\" 😀\"", "1.5", "null", "true"),
                List.of("{\"a\":[1,{\"b\":null}],\"c\":{}}", "[1,[2,[]]]"));
        try (Redis r = new Redis(env, ns)) {
            r.wipe();
            ResqCli cli = new ResqCli(env, ns);
            List<String> ids = new ArrayList<>();
            for (List<String> args : sent) {
                ids.add(cli.enqueueTracked(Q, "Record", args.toArray(new String[0])));
            }
            List<String> queued = r.jedis.lrange(r.key("queue", Q), 0, -1);
            c.eq("jobs queued", sent.size(), queued.size());
            for (int i = 0; i < queued.size(); i++) {
                c.eq("job " + i + " top-level keys", List.of("class", "args", "resq_id"), Json.keys(queued.get(i)));
                c.that("job " + i + " carries its id", queued.get(i).contains("\"resq_id\":\"" + ids.get(i) + "\""),
                        queued.get(i));
            }

            JobSink.reset(env.host, env.port, ns);
            Map<String, Class<?>> types = new HashMap<>();
            types.put("Record", RecordJob.class);
            try (JesqueSide.Fleet fleet = JesqueSide.start(JesqueSide.config(env, ns), List.of(Q),
                    new MapBasedJobFactory(types), 1)) {
                boolean done = Redis.waitFor(() -> JobSink.RECORDED.size() >= sent.size(), 30_000, 10);
                c.that("all tracked jobs ran within 30 s", done, JobSink.RECORDED.size() + " of " + sent.size() + " ran");
            } finally {
                JobSink.close();
            }
            List<RecordJob> got = new ArrayList<>(JobSink.RECORDED);
            for (int i = 0; i < Math.min(sent.size(), got.size()); i++) {
                List<Object> want = new ArrayList<>();
                for (String a : sent.get(i)) {
                    want.add(Json.parse(a));
                }
                c.eq("job " + i + " args", Json.canon(want), Json.canon(got.get(i).args()));
            }
            c.eq("Jesque recorded no failure", 0L, r.llen("failed"));
            if (r.llen("failed") > 0) {
                c.note("first failure: " + r.jedis.lindex(r.key("failed"), 0));
            }
            c.items(got.size());
            settled(env, checks.get(1), r, cli, ids);
        }
    }

    /** e-settled (see the class comment). */
    private static void settled(Env env, Check c, Redis r, ResqCli cli, List<String> ran) throws Exception {
        String due = cli.enqueueTracked(ZQ, "Record", "1");
        String later = cli.enqueueTracked(ZQ, "Record", "2");
        List<String> raws = r.jedis.lrange(r.key("queue", ZQ), 0, -1);
        c.eq("zset jobs made", 2, raws.size());
        r.jedis.del(r.key("queue", ZQ));
        long now = System.currentTimeMillis();
        r.jedis.zadd(r.key("queue", ZQ), now - 1_000, raws.get(0));
        r.jedis.zadd(r.key("queue", ZQ), now + 3_600_000, raws.get(1));
        JobSink.reset(env.host, env.port, r.ns);
        Map<String, Class<?>> types = new HashMap<>();
        types.put("Record", RecordJob.class);
        try (JesqueSide.Fleet fleet = JesqueSide.start(JesqueSide.config(env, r.ns), List.of(ZQ),
                new MapBasedJobFactory(types), 1)) {
            boolean done = Redis.waitFor(() -> JobSink.RECORDED.size() >= 1
                    && r.jedis.zcard(r.key("queue", ZQ)) == 1, 30_000, 10);
            c.that("Jesque took the due job from the zset within 30 s", done,
                    JobSink.RECORDED.size() + " ran, zset " + r.jedis.zcard(r.key("queue", ZQ)));
        } finally {
            JobSink.close();
        }
        cli.prune();
        List<String> ended = new ArrayList<>(ran);
        ended.add(due);
        for (String id : ended) {
            c.eq("record of " + id + " (Jesque ran it)", "failed", r.jedis.hget(r.key("resq", "job", id), "state"));
            String error = r.jedis.hget(r.key("resq", "job", id), "error");
            c.that("its error says the outcome is unknown", error != null && error.contains("outcome is unknown"),
                    String.valueOf(error));
        }
        c.eq("record of the job still in the zset", "queued", r.jedis.hget(r.key("resq", "job", later), "state"));
        c.items(ended.size() + 1);
    }
}
