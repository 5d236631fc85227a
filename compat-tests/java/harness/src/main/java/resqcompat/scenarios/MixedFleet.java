package resqcompat.scenarios;

import net.greghaines.jesque.Job;
import net.greghaines.jesque.client.ClientImpl;
import net.greghaines.jesque.worker.MapBasedJobFactory;
import resqcompat.Check;
import resqcompat.Env;
import resqcompat.JesqueSide;
import resqcompat.Json;
import resqcompat.Redis;
import resqcompat.ResqWorker;
import resqcompat.jobs.EchoJob;
import resqcompat.jobs.JobSink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Scenario d: resq (8 slots) and 4 Jesque WorkerImpl threads drain one queue together.
 *
 * <p>5,000 {@code Echo} jobs, each with a unique id, are batch-enqueued by Jesque's Client. The
 * Jesque fleet starts first and resq joins as soon as Jesque has run its first job: resq alone
 * drains 5,000 jobs in well under Jesque's 500 ms idle poll, so starting both on an empty queue
 * leaves Jesque nothing to do. Both sides' Echo appends {@code ["<id>"]} to {@code <ns>:compat:echo},
 * so the list must end up holding every id exactly once. Who ran what comes from Jesque's
 * in-process counter and resq's per-slot {@code stat:processed:<id>} (read before resq exits,
 * since unregistering deletes them).
 */
public final class MixedFleet {
    private static final String Q = "jq-d";
    private static final int JOBS = 5000;
    private static final int BATCH = 250;

    private MixedFleet() {
    }

    public static final List<String> NAMES = List.of("d-mixed");

    /** Fills the check named in {@link #NAMES}. */
    public static void run(Env env, List<Check> checks) throws Exception {
        Check c = checks.get(0);
        String ns = env.namespace("d");
        try (Redis r = new Redis(env, ns)) {
            r.wipe();
            JobSink.reset(env.host, env.port, ns);
            Map<String, Class<?>> types = new HashMap<>();
            types.put("Echo", EchoJob.class);
            enqueue(env, ns);
            c.eq("jobs queued", (long) JOBS, r.llen("queue", Q));
            long t0 = System.currentTimeMillis();
            ResqWorker resq = null;
            try (JesqueSide.Fleet java = JesqueSide.start(JesqueSide.config(env, ns), List.of(Q),
                    new MapBasedJobFactory(types), 4)) {
                Redis.waitFor(() -> JobSink.JAVA_ECHOES.get() > 0, 10_000, 1);
                resq = ResqWorker.start(env, ns, Q, 8, null, env.label + "-d-resq");
                c.eq("registered workers (8 resq slots + 4 Jesque)", 12L, r.jedis.scard(r.key("workers")));
                boolean done = r.waitLlen(JOBS, 60_000, "compat", "echo");
                long took = System.currentTimeMillis() - t0;
                c.that("all " + JOBS + " jobs echoed within 60 s", done, r.llen("compat", "echo") + " echoed");
                ClientToResq.waitIdle(r);
                long resqRan = 0;
                for (String id : resq.ids()) {
                    resqRan += r.counter("stat", "processed", id);
                }
                int javaRan = JobSink.JAVA_ECHOES.get();
                verify(r, c, resqRan, javaRan);
                c.note("resq ran " + resqRan + ", Jesque ran " + javaRan + ", " + JOBS + " jobs in " + took + " ms");
            } finally {
                if (resq != null) {
                    c.eq("compat_worker exit code after SIGTERM", 0, resq.stop());
                }
                JobSink.close();
            }
            // Nothing may arrive late either (a duplicate after the count was reached).
            c.eq("echo list length after both fleets stopped", (long) JOBS, r.llen("compat", "echo"));
            c.eq("Jesque in-flight lists left behind", Set.of(), r.jedis.keys(r.key("inflight", "*")));
        }
        c.items(JOBS);
    }

    /** Jesque's Client enqueues ids d-00000..d-04999 in batches, while both fleets poll. */
    private static void enqueue(Env env, String ns) {
        ClientImpl client = new ClientImpl(JesqueSide.config(env, ns));
        try {
            for (int start = 0; start < JOBS; start += BATCH) {
                List<Job> batch = new ArrayList<>();
                for (int i = start; i < Math.min(JOBS, start + BATCH); i++) {
                    batch.add(new Job("Echo", id(i)));
                }
                client.batchEnqueue(Q, batch);
            }
        } finally {
            client.end();
        }
    }

    private static void verify(Redis r, Check c, long resqRan, int javaRan) {
        List<String> echoed = r.jedis.lrange(r.key("compat", "echo"), 0, -1);
        Set<String> seen = new HashSet<>();
        List<String> dups = new ArrayList<>();
        for (String e : echoed) {
            Object v = Json.parse(e);
            String id = v instanceof List && ((List<?>) v).size() == 1 ? String.valueOf(((List<?>) v).get(0)) : e;
            if (!seen.add(id)) {
                dups.add(id);
            }
        }
        List<String> missing = new ArrayList<>();
        for (int i = 0; i < JOBS; i++) {
            if (!seen.contains(id(i))) {
                missing.add(id(i));
            }
        }
        c.eq("duplicates", List.of(), dups.subList(0, Math.min(5, dups.size())));
        c.eq("missing ids", List.of(), missing.subList(0, Math.min(5, missing.size())));
        c.eq("distinct ids echoed", JOBS, seen.size());
        c.eq("resq + Jesque run counts", (long) JOBS, resqRan + javaRan);
        c.eq("stat:processed (both sides count successes)", (long) JOBS, r.counter("stat", "processed"));
        c.eq("failed list", 0L, r.llen("failed"));
        c.eq("queue left empty", 0L, r.llen("queue", Q));
        c.that("both fleets took part", resqRan > 0 && javaRan > 0,
                "resq ran " + resqRan + ", Jesque ran " + javaRan);
    }

    private static String id(int i) {
        return String.format("d-%05d", i);
    }
}
