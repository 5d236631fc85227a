package resqcompat.scenarios;

import net.greghaines.jesque.Job;
import net.greghaines.jesque.client.ClientImpl;
import resqcompat.Check;
import resqcompat.Env;
import resqcompat.JesqueSide;
import resqcompat.Json;
import resqcompat.Redis;
import resqcompat.ResqWorker;
import resqcompat.Values;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * Scenario a: Jesque's Client produces, resq's compat_worker consumes.
 *
 * <ul>
 *   <li>a-enqueue: enqueue / named vars / args+vars / extra fields / batchEnqueue /
 *       priorityEnqueue, all queued before resq starts with one slot, so the run order must be
 *       the queue order (priority job first). EchoPayload must hand back the exact bytes Jesque
 *       wrote; Echo must hand back args equal as JSON values.</li>
 *   <li>a-delayed: delayedEnqueue 2 s ahead runs no earlier than due and at most 1.5 s late; a
 *       delayed job Jesque removes again (removeDelayedEnqueue) never runs.</li>
 *   <li>a-recurring: recurringEnqueue with a 1 s period fires on schedule (the zset score moves by
 *       exactly the period), and stops for good after removeRecurringEnqueue.</li>
 * </ul>
 */
public final class ClientToResq {
    private static final String Q = "jq-list";
    private static final String QD = "jq-delayed";
    private static final String QR = "jq-recurring";
    /** Allowed lateness of delayed/recurring runs, and of our 10 ms polling on top. */
    private static final long LATE_MS = 1500;

    private ClientToResq() {
    }

    public static final List<String> NAMES = List.of("a-enqueue", "a-delayed", "a-recurring");

    /** Fills the checks named in {@link #NAMES}, in that order. */
    public static void run(Env env, List<Check> checks) throws Exception {
        Check enq = checks.get(0);
        Check del = checks.get(1);
        Check rec = checks.get(2);
        String ns = env.namespace("a");
        try (Redis r = new Redis(env, ns)) {
            r.wipe();
            ClientImpl client = new ClientImpl(JesqueSide.config(env, ns));
            try {
                List<Job> jobs = enqueueAll(client);
                List<String> queued = r.jedis.lrange(r.key("queue", Q), 0, -1);
                ResqWorker w = ResqWorker.start(env, ns, Q + "," + QD + "," + QR, 1, QD + "," + QR,
                        env.label + "-a-resq");
                try {
                    checkImmediate(r, jobs, queued, enq);
                    String removedMarker = delayed(r, client, del);
                    recurring(r, client, rec);
                    // The delayed job removed in delayed() was due > 3 s ago by now.
                    del.that("removed delayed job never ran", !echoes(r).stream()
                            .anyMatch(s -> s.contains(removedMarker)), "it ran after removeDelayedEnqueue");
                } finally {
                    enq.eq("compat_worker exit code after SIGTERM", 0, w.stop());
                }
            } finally {
                client.end();
            }
        }
    }

    /** Enqueues every immediate job; returns them in the order resq must run them. */
    private static List<Job> enqueueAll(ClientImpl client) {
        List<Job> order = new ArrayList<>();
        for (Object[] args : List.of(Values.ints(), Values.doubles(), Values.strings(), Values.nested())) {
            order.add(new Job("EchoPayload", args));
        }
        // Echo makes resq decode and re-encode the args: number widths and escapes must survive.
        for (Object[] args : List.of(Values.ints(), Values.doubles(), Values.strings(), Values.nested())) {
            order.add(new Job("Echo", args));
        }
        order.add(new Job("EchoPayload", Values.map("name", "v1", "count", 3,
                "nested", Values.map("x", Values.list(1, 2.5)), "nil", null)));
        order.add(new Job("EchoPayload", new Object[] {"both", 1}, Values.map("k", "v")));
        order.add(new Job("Echo", Values.map("only", "vars"))); // args null: Echo must give []
        Job extra = new Job("EchoPayload", "extra-field");
        extra.setUnknownField("trace_id", "abc-123");
        order.add(extra);
        order.add(new Job("EchoPayload")); // "args":[]
        for (Job j : order) {
            client.enqueue(Q, j);
        }
        List<Job> batch = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            batch.add(new Job("EchoPayload", "batch", i));
        }
        client.batchEnqueue(Q, batch);
        order.addAll(batch);
        Job prio = new Job("EchoPayload", "priority");
        client.priorityEnqueue(Q, prio);
        order.add(0, prio);
        return order;
    }

    private static void checkImmediate(Redis r, List<Job> jobs, List<String> queued, Check c) {
        c.eq("jobs Jesque queued", jobs.size(), queued.size());
        c.that("priorityEnqueue put its job at the head", !queued.isEmpty() && queued.get(0).contains("priority"),
                "head is " + (queued.isEmpty() ? "nothing" : queued.get(0)));
        boolean done = r.waitLlen(jobs.size(), 30_000, "compat", "echo");
        c.that("all jobs ran within 30 s", done, r.llen("compat", "echo") + " of " + jobs.size() + " echoed");
        List<String> echoed = echoes(r);
        int byteExact = 0;
        int valueEqual = 0;
        for (int i = 0; i < Math.min(jobs.size(), Math.min(queued.size(), echoed.size())); i++) {
            Job job = jobs.get(i);
            String got = echoed.get(i);
            if (job.getClassName().equals("EchoPayload")) {
                if (c.eq("job " + i + " payload bytes as Jesque wrote them", queued.get(i), got)) {
                    byteExact++;
                }
            } else {
                Object expected = Json.canon(job.getArgs() == null ? Collections.emptyList()
                        : Arrays.asList(job.getArgs()));
                if (c.eq("job " + i + " Echo args as JSON values", expected, Json.canon(Json.parse(got)))) {
                    valueEqual++;
                }
            }
        }
        c.eq("echo list length (each job exactly once)", jobs.size(), echoed.size());
        waitIdle(r);
        c.eq("stat:processed", (long) jobs.size(), r.counter("stat", "processed"));
        c.eq("stat:failed", 0L, r.counter("stat", "failed"));
        c.eq("failed list length", 0L, r.llen("failed"));
        c.eq("queue left empty", 0L, r.llen("queue", Q));
        c.items(jobs.size());
        c.note(byteExact + " payloads byte-identical, " + valueEqual + " Echo arg lists equal, run in queue order");
    }

    /** Returns a marker of the delayed job that was removed again (checked at the end). */
    private static String delayed(Redis r, ClientImpl client, Check c) {
        long before = r.llen("compat", "echo");
        long due = System.currentTimeMillis() + 2000;
        Job job = new Job("EchoPayload", "delayed", 42);
        client.delayedEnqueue(QD, job, due);
        String member = r.jedis.zrange(r.key("queue", QD), 0, 0).iterator().next();
        c.eq("zset score is the due time in ms", (double) due, r.jedis.zscore(r.key("queue", QD), member));
        Job removed = new Job("EchoPayload", "removed-delayed", 43);
        client.delayedEnqueue(QD, removed, due);
        client.removeDelayedEnqueue(QD, removed);
        c.eq("zset holds only the kept job after removeDelayedEnqueue", 1L, r.jedis.zcard(r.key("queue", QD)));

        boolean ran = Redis.waitFor(() -> r.llen("compat", "echo") > before, 2000 + LATE_MS + 3000, 5);
        long seen = System.currentTimeMillis();
        if (c.that("delayed job ran", ran, "not run " + (seen - due) + " ms after due")) {
            c.within("ms after due when seen", seen - due, 0, LATE_MS);
            c.note("ran " + (seen - due) + " ms after due (tolerance 0.." + LATE_MS + ")");
            List<String> echoed = echoes(r);
            c.eq("delayed payload bytes as Jesque wrote them", member, echoed.get(echoed.size() - 1));
        }
        c.eq("due member removed from the zset", 0L, r.jedis.zcard(r.key("queue", QD)));
        c.items(1);
        return "removed-delayed";
    }

    private static void recurring(Redis r, ClientImpl client, Check c) throws InterruptedException {
        long start = System.currentTimeMillis() + 1000;
        Job job = new Job("EchoPayload", "recurring", 7);
        client.recurringEnqueue(QR, job, start, 1000);
        String member = r.jedis.zrange(r.key("queue", QR), 0, 0).iterator().next();
        List<Long> fires = new ArrayList<>();
        Double scoreAfterFirst = null;
        long deadline = start + 1000 + 2 * LATE_MS + 1000;
        while (fires.size() < 2 && System.currentTimeMillis() < deadline) {
            long n = echoes(r).stream().filter(member::equals).count();
            while (fires.size() < n) {
                fires.add(System.currentTimeMillis());
                if (fires.size() == 1) {
                    scoreAfterFirst = r.jedis.zscore(r.key("queue", QR), member);
                }
            }
            Thread.sleep(5);
        }
        client.removeRecurringEnqueue(QR, job);
        c.eq("fires observed before removal", 2, fires.size());
        if (fires.size() >= 1) {
            c.within("first fire, ms after start", fires.get(0) - start, 0, LATE_MS);
            c.eq("score after first fire = start + period (Jesque: previous score + frequency)",
                    (double) (start + 1000), scoreAfterFirst);
        }
        if (fires.size() >= 2) {
            c.within("second fire, ms after start", fires.get(1) - start, 1000, 1000 + LATE_MS);
            c.note("fires at +" + (fires.get(0) - start) + " and +" + (fires.get(1) - start) + " ms after start");
        }
        c.eq("zset empty after removeRecurringEnqueue", 0L, r.jedis.zcard(r.key("queue", QR)));
        c.eq("frequency hash empty after removeRecurringEnqueue", 0L, r.jedis.hlen(r.key("queue", QR, "frequency")));
        // Absence check, not synchronisation: over 2.5 periods no further fire may appear.
        Thread.sleep(2500);
        long total = echoes(r).stream().filter(member::equals).count();
        c.eq("fires after removal", (long) fires.size(), total);
        c.items(total);
    }

    private static List<String> echoes(Redis r) {
        return r.jedis.lrange(r.key("compat", "echo"), 0, -1);
    }

    /** Waits (max 5 s) until no resq slot holds a job, so counters are final. */
    static void waitIdle(Redis r) {
        Redis.waitFor(() -> r.jedis.smembers(r.key("workers")).stream()
                .noneMatch(id -> r.jedis.exists(r.key("worker", id))), 5000, 10);
    }
}
