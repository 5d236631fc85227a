package resqcompat.scenarios;

import net.greghaines.jesque.Job;
import net.greghaines.jesque.client.ClientImpl;
import net.greghaines.jesque.json.ObjectMapperFactory;
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
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Scenario b: resq's CLI produces Jesque-form jobs, a real Jesque WorkerImpl consumes them.
 *
 * <ul>
 *   <li>b-worker: every job runs once, in order, and the Java job receives exactly the args and
 *       vars given on resq's command line (compared as JSON values; Java types follow).</li>
 *   <li>b-delayed: {@code --jesque --in 2} lands in Jesque's zset form and Jesque runs it when due
 *       (no earlier, at most 1.5 s late; Jesque polls every 0.5 s).</li>
 *   <li>b-bytes: each payload resq wrote is byte-identical to what Jesque writes for the same job,
 *       and Jesque's removeDelayedEnqueue (a byte-exact ZREM) removes a job resq delayed.</li>
 * </ul>
 */
public final class ResqToJesque {
    private static final String Q = "jq-b";
    private static final String QD = "jq-b-delayed";
    private static final String QR = "jq-b-removable";
    private static final long LATE_MS = 1500;

    private ResqToJesque() {
    }

    /** One resq enqueue: CLI args and the values the Java job must receive. */
    private record Sent(String varsJson, List<String> argJson) {
        Object expectedArgs() {
            List<Object> out = new ArrayList<>();
            for (String a : argJson) {
                out.add(Json.parse(a));
            }
            return Json.canon(out);
        }

        Object expectedVars() {
            return varsJson == null ? Collections.emptyMap() : Json.canon(Json.parse(varsJson));
        }
    }

    public static final List<String> NAMES = List.of("b-worker", "b-delayed", "b-bytes");

    /** Fills the checks named in {@link #NAMES}, in that order. */
    public static void run(Env env, List<Check> checks) throws Exception {
        Check work = checks.get(0);
        Check del = checks.get(1);
        Check bytes = checks.get(2);
        String ns = env.namespace("b");
        try (Redis r = new Redis(env, ns)) {
            r.wipe();
            ResqCli cli = new ResqCli(env, ns);
            List<Sent> sent = List.of(
                    new Sent(null, List.of("1", "-5", "2147483648", "9223372036854775807")),
                    new Sent(null, List.of("18446744073709551616", "1.5", "-0.0", "1e20", "0.1")),
                    // Java switches to E notation below 1e-3 and from 1e7 on; Ruby does not.
                    new Sent(null, List.of("12345678.9", "0.0001", "1.5e-7", "100.0", "1E2", "2.50")),
                    new Sent(null, List.of("\"héllo \\\"q\\\" \\\\ / 😀\"", "\"ctl \\u0001 \\n\\t\"", "\"\"")),
                    new Sent(null, List.of("{\"a\":[1,{\"b\":null}],\"c\":{}}", "[1,[2,[]]]", "null", "true",
                            "false")),
                    new Sent("{\"name\":\"n1\",\"count\":2,\"tags\":[\"x\",\"y\"],\"meta\":{\"k\":null}}", List.of()),
                    new Sent("{\"name\":\"both\"}", List.of("\"a\"", "2")));
            for (Sent s : sent) {
                List<String> opts = new ArrayList<>(List.of("--jesque"));
                if (s.varsJson != null) {
                    opts.addAll(List.of("--vars", s.varsJson));
                }
                cli.enqueue(Q, opts, "Record", s.argJson.toArray(new String[0]));
            }
            List<String> queued = r.jedis.lrange(r.key("queue", Q), 0, -1);
            checkShapes(queued, sent, bytes);
            try {
                removeDelayedFromJava(env, r, cli, bytes);
            } catch (Exception e) {
                bytes.error("delayed job removed by Jesque", e);
            }
            // Delayed enqueue is tried on its own: if it fails, b-worker still runs.
            long t0 = System.currentTimeMillis();
            boolean delayedQueued = false;
            try {
                cli.enqueue(QD, List.of("--jesque", "--in", "2"), "Record", "\"delayed\"");
                delayedQueued = true;
            } catch (Exception e) {
                del.error("resq enqueue --jesque --in 2", e);
            }
            long t1 = System.currentTimeMillis();

            JobSink.reset(env.host, env.port, ns);
            Map<String, Class<?>> types = new HashMap<>();
            types.put("Record", RecordJob.class);
            try (JesqueSide.Fleet fleet = JesqueSide.start(JesqueSide.config(env, ns), List.of(Q, QD),
                    new MapBasedJobFactory(types), 1)) {
                checkRuns(r, sent, work);
                if (delayedQueued) {
                    checkDelayed(r, t0, t1, del);
                }
            } finally {
                JobSink.close();
            }
        }
    }

    /** Key order class,args,vars and byte equality with Jesque's own serialisation. */
    private static void checkShapes(List<String> queued, List<Sent> sent, Check c) throws Exception {
        c.eq("jobs resq queued", sent.size(), queued.size());
        int identical = 0;
        for (int i = 0; i < queued.size(); i++) {
            String raw = queued.get(i);
            c.eq("job " + i + " top-level keys", List.of("class", "args", "vars"), Json.keys(raw));
            Job asJesqueReadsIt = ObjectMapperFactory.get().readValue(raw, Job.class);
            String jesqueBytes = ObjectMapperFactory.get().writeValueAsString(asJesqueReadsIt);
            if (c.eq("job " + i + " bytes == Jesque's serialisation of the same job", jesqueBytes, raw)) {
                identical++;
            }
        }
        c.items(queued.size());
        c.note(identical + "/" + queued.size() + " payloads byte-identical to Jesque's");
    }

    /** resq delays a job; Jesque's removeDelayedEnqueue of the equal Job must find it (ZREM). */
    private static void removeDelayedFromJava(Env env, Redis r, ResqCli cli, Check c) throws Exception {
        cli.enqueue(QR, List.of("--jesque", "--in", "600"), "Record", "\"remove-me\"", "7");
        String key = r.key("queue", QR);
        c.eq("resq delayed job stored as a Jesque zset", "zset", r.jedis.type(key));
        c.eq("zset members", 1L, r.jedis.zcard(key));
        ClientImpl client = new ClientImpl(JesqueSide.config(env, r.ns));
        try {
            client.removeDelayedEnqueue(QR, new Job("Record", "remove-me", 7));
        } finally {
            client.end();
        }
        c.eq("zset members after Jesque's removeDelayedEnqueue", 0L, r.jedis.zcard(key));
    }

    private static void checkRuns(Redis r, List<Sent> sent, Check c) {
        boolean done = Redis.waitFor(() -> JobSink.RECORDED.size() >= sent.size(), 30_000, 10);
        c.that("all jobs ran within 30 s", done, JobSink.RECORDED.size() + " of " + sent.size() + " ran");
        List<RecordJob> got = new ArrayList<>(JobSink.RECORDED);
        for (int i = 0; i < Math.min(sent.size(), got.size()); i++) {
            c.eq("job " + i + " args", sent.get(i).expectedArgs(), Json.canon(got.get(i).args()));
            c.eq("job " + i + " vars", sent.get(i).expectedVars(), Json.canon(got.get(i).vars()));
        }
        // Java types Jesque chose: these decide which constructor a real job class gets.
        if (!got.isEmpty()) {
            c.note("Java types of job 0 args: " + types(got.get(0).args()));
        }
        if (got.size() > 1) {
            c.note("job 1: " + types(got.get(1).args()));
        }
        c.eq("Jesque recorded no failure", 0L, r.llen("failed"));
        if (r.llen("failed") > 0) {
            c.note("first failure: " + r.jedis.lindex(r.key("failed"), 0));
        }
        c.items(got.size());
    }

    private static void checkDelayed(Redis r, long t0, long t1, Check c) {
        Double score = r.jedis.zscore(r.key("queue", QD),
                r.jedis.zrange(r.key("queue", QD), 0, 0).stream().findFirst().orElse(""));
        // The score may already be gone if the worker was quick; read it before the job is due.
        boolean ran = Redis.waitFor(() -> JobSink.RECORDED.stream()
                .anyMatch(j -> j.args().equals(List.of("delayed"))), 6000, 5);
        if (!c.that("delayed job ran", ran, "not run within 6 s")) {
            return;
        }
        RecordJob job = JobSink.RECORDED.stream().filter(j -> j.args().equals(List.of("delayed"))).findFirst().get();
        if (c.that("zset score present before due", score != null, "no member in the delayed zset")) {
            c.within("score is enqueue time + 2 s (ms)", score.longValue(), t0 + 2000 - 1000, t1 + 2000);
            c.within("ms after due when Jesque ran it", job.ranAtMs() - score.longValue(), 0, LATE_MS);
            c.note("ran " + (job.ranAtMs() - score.longValue()) + " ms after due");
        }
        c.eq("zset empty after run", 0L, r.jedis.zcard(r.key("queue", QD)));
        c.items(1);
    }

    private static String types(List<Object> args) {
        List<String> out = new ArrayList<>();
        for (Object a : args) {
            out.add(a == null ? "null" : a.getClass().getSimpleName());
        }
        return String.join(",", out);
    }
}
