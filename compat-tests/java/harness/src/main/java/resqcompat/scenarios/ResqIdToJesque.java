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
 *       {@code queued} (only resq's and resque-status's workers move records); noted.</li>
 * </ul>
 */
public final class ResqIdToJesque {
    private static final String Q = "jq-e";

    private ResqIdToJesque() {
    }

    public static final List<String> NAMES = List.of("e-resq-id");

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
            String record = ids.isEmpty() ? null : r.jedis.get(r.key("status", ids.get(0)));
            c.note("Jesque ignored resq_id; resq's record of a job Jesque ran stays "
                    + (record == null ? "absent" : Json.parse(record) instanceof Map<?, ?> m ? m.get("status") : "?"));
            c.items(got.size());
        }
    }
}
