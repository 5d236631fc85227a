package resqcompat.scenarios;

import net.greghaines.jesque.Config;
import net.greghaines.jesque.Job;
import net.greghaines.jesque.JobFailure;
import net.greghaines.jesque.WorkerStatus;
import net.greghaines.jesque.client.ClientImpl;
import net.greghaines.jesque.meta.QueueInfo;
import net.greghaines.jesque.meta.WorkerInfo;
import net.greghaines.jesque.meta.dao.FailureDAO;
import net.greghaines.jesque.meta.dao.QueueInfoDAO;
import net.greghaines.jesque.meta.dao.WorkerInfoDAO;
import net.greghaines.jesque.meta.dao.impl.FailureDAORedisImpl;
import net.greghaines.jesque.meta.dao.impl.QueueInfoDAORedisImpl;
import net.greghaines.jesque.meta.dao.impl.WorkerInfoDAORedisImpl;
import net.greghaines.jesque.utils.PoolUtils;
import resqcompat.Check;
import resqcompat.Env;
import resqcompat.JesqueSide;
import resqcompat.Json;
import resqcompat.Redis;
import resqcompat.ResqCli;
import resqcompat.ResqWorker;
import resqcompat.Values;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Scenario c: Jesque's admin DAOs read what resq writes, with the right values.
 *
 * <ul>
 *   <li>c-workers: WorkerInfoDAO on idle slots (host, pid, queues, started, zero counters),
 *       on a slot busy with {@code Sleep 3000} (queue, class, args, run_at), on processed
 *       counts afterwards, and on the empty registry after resq exits on SIGTERM.</li>
 *   <li>c-failures: FailureDAO lists the failures of {@code Fail} (Resque form, and Jesque form
 *       with vars and an extra field), {@code Panic}, an unknown class and two malformed payloads,
 *       with exception, error, queue, worker, payload and time; its requeue puts a job back that
 *       resq runs (and fails) again.</li>
 *   <li>c-queues: QueueInfoDAO reads resq-enqueued list queues (Resque and Jesque form) and a
 *       resq-delayed Jesque zset queue.</li>
 * </ul>
 */
public final class AdminReadsResq {
    private static final String Q = "jq-c";
    private static final String Q2 = "jq-c-other";
    private static final String QIDLE = "jq-c-idle";
    private static final String QLATER = "jq-c-later";

    private AdminReadsResq() {
    }

    public static final List<String> NAMES = List.of("c-workers", "c-failures", "c-queues");

    /** Fills the checks named in {@link #NAMES}, in that order. */
    public static void run(Env env, List<Check> checks) throws Exception {
        Check wc = checks.get(0);
        Check fc = checks.get(1);
        Check qc = checks.get(2);
        String ns = env.namespace("c");
        Config config = JesqueSide.config(env, ns);
        var pool = PoolUtils.createJedisPool(config); // Pool type differs by Jedis version
        try (Redis r = new Redis(env, ns)) {
            r.wipe();
            ResqCli cli = new ResqCli(env, ns);
            WorkerInfoDAO workers = new WorkerInfoDAORedisImpl(config, pool);
            ResqWorker w = ResqWorker.start(env, ns, Q + "," + Q2, 2, null, env.label + "-c-resq");
            try {
                Redis.waitFor(() -> r.jedis.smembers(r.key("workers")).containsAll(w.ids()), 5000, 10);
                guard(wc, "idle workers", () -> idle(workers, w, wc));
                guard(wc, "busy worker", () -> busy(r, cli, workers, wc));
                guard(fc, "failures", () -> failures(r, cli, config, new FailureDAORedisImpl(config, pool), workers, w,
                        fc));
                guard(qc, "queues", () -> queues(r, cli, new QueueInfoDAORedisImpl(config, pool), qc));
            } finally {
                wc.eq("compat_worker exit code after SIGTERM", 0, w.stop());
            }
            guard(wc, "after exit", () -> {
                wc.eq("getWorkerCount after resq exited", 0L, workers.getWorkerCount());
                wc.eq("getAllWorkers after resq exited", 0, workers.getAllWorkers().size());
            });
        } finally {
            pool.close();
        }
    }

    private interface Step {
        void run() throws Exception;
    }

    /** Runs one step; a DAO exception is a failed check (Jesque admin could not read resq). */
    private static void guard(Check c, String what, Step step) {
        try {
            step.run();
        } catch (Exception | AssertionError e) {
            c.error(what, e);
        }
    }

    private static void idle(WorkerInfoDAO dao, ResqWorker w, Check c) throws Exception {
        List<String> ids = w.ids();
        c.eq("getWorkerCount", 2L, dao.getWorkerCount());
        c.eq("getActiveWorkerCount while idle", 0L, dao.getActiveWorkerCount());
        List<WorkerInfo> all = dao.getAllWorkers();
        List<String> names = new ArrayList<>();
        String localHost = InetAddress.getLocalHost().getHostName().split("\\.")[0];
        for (WorkerInfo info : all) {
            names.add(info.getName());
            String[] parts = info.getName().split(":", 3);
            c.eq(info.getName() + " host", parts[0], info.getHost());
            c.that(info.getName() + " host names this machine", info.getHost().startsWith(localHost),
                    "host " + info.getHost() + " does not start with " + localHost);
            c.that(info.getName() + " pid field holds resq's pid",
                    info.getPid().equals(Long.toString(w.pid())) || info.getPid().startsWith(w.pid() + "-"),
                    "pid field " + info.getPid() + ", process pid " + w.pid());
            c.eq(info.getName() + " queues", List.of(Q, Q2), info.getQueues());
            c.eq(info.getName() + " state", WorkerInfo.State.IDLE, info.getState());
            c.eq(info.getName() + " processed", 0L, info.getProcessed());
            c.eq(info.getName() + " failed", 0L, info.getFailed());
            if (c.that(info.getName() + " started parsed", info.getStarted() != null, "null")) {
                // resq writes whole seconds: allow the truncation plus 1 s of clock slack.
                c.within(info.getName() + " started (ms since process start)",
                        info.getStarted().getTime() - w.startedAtMs, -2000, System.currentTimeMillis() - w.startedAtMs + 1000);
            }
        }
        c.eq("getAllWorkers names", new TreeSet<>(ids), new TreeSet<>(names));
        Map<String, List<WorkerInfo>> hosts = dao.getWorkerHostMap();
        c.eq("getWorkerHostMap workers", 2, hosts.values().stream().mapToInt(List::size).sum());
        c.note("ids " + ids);
    }

    private static void busy(Redis r, ResqCli cli, WorkerInfoDAO dao, Check c) throws Exception {
        long t0 = System.currentTimeMillis();
        cli.enqueue(Q, List.of(), "Sleep", "3000");
        boolean busy = Redis.waitFor(() -> r.jedis.smembers(r.key("workers")).stream()
                .anyMatch(id -> r.jedis.exists(r.key("worker", id))), 5000, 10);
        if (!c.that("a resq slot took the Sleep job", busy, "no worker record within 5 s")) {
            return;
        }
        c.eq("getActiveWorkerCount while busy", 1L, dao.getActiveWorkerCount());
        List<WorkerInfo> active = dao.getActiveWorkers();
        c.eq("getActiveWorkers size", 1, active.size());
        if (active.isEmpty()) {
            return;
        }
        WorkerInfo info = active.get(0);
        c.eq("busy state", WorkerInfo.State.WORKING, info.getState());
        WorkerStatus st = info.getStatus();
        c.eq("status queue", Q, st.getQueue());
        c.eq("status payload class", "Sleep", st.getPayload().getClassName());
        c.eq("status payload args", Json.canon(List.of(3000)), Json.canon(st.getPayload().getArgs()));
        c.eq("status paused", false, st.isPaused());
        c.within("status run_at (ms since enqueue)", st.getRunAt().getTime() - t0, -1000,
                System.currentTimeMillis() - t0 + 1000);
        c.eq("getAllWorkers while busy", 2, dao.getAllWorkers().size());
        c.eq("getWorker(busy) state", WorkerInfo.State.WORKING, dao.getWorker(info.getName()).getState());
        String busyName = info.getName();
        ClientToResq.waitIdle(r);
        for (WorkerInfo wi : dao.getAllWorkers()) {
            c.eq(wi.getName() + " processed after Sleep", wi.getName().equals(busyName) ? 1L : 0L, wi.getProcessed());
        }
        c.items(1);
    }

    private static void failures(Redis r, ResqCli cli, Config config, FailureDAO dao, WorkerInfoDAO workers,
                                 ResqWorker w, Check c) throws Exception {
        long t0 = System.currentTimeMillis();
        cli.enqueue(Q, List.of(), "Fail", "\"boom-1\"");
        // A Jesque-form job with vars and an extra field: both must survive into the failure.
        ClientImpl client = new ClientImpl(config);
        try {
            Job jf = new Job("Fail", new Object[] {"boom-j"}, Values.map("k", "v"));
            jf.setUnknownField("trace_id", "t-1");
            client.enqueue(Q, jf);
        } finally {
            client.end();
        }
        cli.enqueue(Q, List.of(), "Panic", "\"oops-2\"");
        cli.enqueue(Q, List.of(), "NoSuchJob", "1");
        r.jedis.rpush(r.key("queue", Q), "{\"class\":\"Broken\",\"args\":[");
        r.jedis.rpush(r.key("queue", Q), "not json at all");
        boolean all = r.waitLlen(6, 10_000, "failed");
        c.that("6 failure entries within 10 s", all, "failed list has " + r.llen("failed"));
        ClientToResq.waitIdle(r);
        List<JobFailure> list = dao.getFailures(0, 100);
        c.eq("getFailures size", 6, list.size());
        c.eq("FailureDAO.getCount", 6L, dao.getCount());
        c.eq("stat:failed", 6L, r.counter("stat", "failed"));
        long perWorker = workers.getAllWorkers().stream().mapToLong(WorkerInfo::getFailed).sum();
        c.eq("sum of per-worker failed counters", 6L, perWorker);
        List<String> ids = w.ids();
        long now = System.currentTimeMillis();
        List<String> malformed = new ArrayList<>();
        for (JobFailure f : list) {
            String cls = f.getPayload() == null ? null : f.getPayload().getClassName();
            String tag = "failure[" + cls + "]";
            c.eq(tag + " queue", Q, f.getQueue());
            c.that(tag + " worker is a resq slot", ids.contains(f.getWorker()), "worker " + f.getWorker());
            c.that(tag + " exception set", f.getThrowableString() != null && !f.getThrowableString().isEmpty(),
                    "empty exception");
            if (c.that(tag + " failed_at parsed", f.getFailedAt() != null, "null")) {
                c.within(tag + " failed_at (ms since enqueue)", f.getFailedAt().getTime() - t0, -2000, now - t0 + 1000);
            }
            if ("Fail".equals(cls) && "boom-j".equals(f.getError())) {
                c.eq("Jesque-form Fail args", Json.canon(List.of("boom-j")), Json.canon(f.getPayload().getArgs()));
                c.eq("Jesque-form Fail vars", Json.canon(Map.of("k", "v")), Json.canon(f.getPayload().getVars()));
                c.eq("Jesque-form Fail extra field", "t-1", f.getPayload().getUnknownField("trace_id"));
            } else if ("Fail".equals(cls)) {
                c.eq("Fail exception", "RuntimeError", f.getThrowableString());
                c.eq("Fail error", "boom-1", f.getError());
                c.eq("Fail payload args", Json.canon(List.of("boom-1")), Json.canon(f.getPayload().getArgs()));
                c.that("Fail backtrace is a list", f.getBacktrace() != null, "null backtrace");
            } else if ("Panic".equals(cls)) {
                c.eq("Panic exception", "Resq::Panic", f.getThrowableString());
                c.that("Panic error mentions the message", f.getError() != null && f.getError().contains("oops-2"),
                        "error " + f.getError());
            } else if ("NoSuchJob".equals(cls)) {
                c.eq("unknown-class payload args", Json.canon(List.of(1)), Json.canon(f.getPayload().getArgs()));
                c.note("unknown class: " + f.getThrowableString() + " / " + f.getError());
            } else {
                malformed.add(f.getThrowableString() + " / " + f.getError() + " / payload " + f.getPayload());
            }
        }
        c.eq("entries for the 2 malformed payloads", 2, malformed.size());
        c.note("malformed: " + malformed);
        requeue(r, dao, list, c);
        c.items(list.size());
    }

    /** Jesque's requeue of resq's Fail entry: resq must run the re-enqueued payload (and fail again). */
    private static void requeue(Redis r, FailureDAO dao, List<JobFailure> list, Check c) throws Exception {
        int idx = -1;
        for (int i = 0; i < list.size(); i++) {
            if ("boom-1".equals(list.get(i).getError())) {
                idx = i;
            }
        }
        if (!c.that("found the Fail entry to requeue", idx >= 0, "no Fail entry")) {
            return;
        }
        dao.requeue(idx);
        boolean again = r.waitLlen(7, 10_000, "failed");
        c.that("resq ran the requeued job (7th failure)", again, "failed list has " + r.llen("failed"));
        List<JobFailure> after = dao.getFailures(0, 100);
        c.eq("getFailures size after requeue", 7, after.size());
        c.that("requeued entry has retried_at", after.size() > idx && after.get(idx).getRetriedAt() != null,
                "retried_at missing");
        if (after.size() == 7) {
            JobFailure last = after.get(6);
            c.eq("re-run failure class", "Fail", last.getPayload() == null ? null : last.getPayload().getClassName());
            c.eq("re-run failure error", "boom-1", last.getError());
        }
    }

    private static void queues(Redis r, ResqCli cli, QueueInfoDAO dao, Check c) throws Exception {
        cli.enqueue(QIDLE, List.of(), "Noop", "1");
        cli.enqueue(QIDLE, List.of(), "Echo", "\"x\"", "{\"k\":[1]}");
        cli.enqueue(QIDLE, List.of("--jesque", "--vars", "{\"a\":1}"), "Noop");
        long t0 = System.currentTimeMillis();
        boolean laterQueued = false;
        try {
            cli.enqueue(QLATER, List.of("--jesque", "--in", "600"), "Noop", "\"later\"");
            laterQueued = true;
        } catch (Exception e) {
            c.error("resq enqueue --jesque --in 600 (the delayed queue part is skipped)", e);
        }
        c.eq("getQueueNames", new ArrayList<>(new TreeSet<>(r.jedis.smembers(r.key("queues")))), dao.getQueueNames());
        c.that("getQueueNames has the new queues", dao.getQueueNames().containsAll(
                laterQueued ? List.of(QIDLE, QLATER) : List.of(QIDLE)), "got " + dao.getQueueNames());

        QueueInfo idle = dao.getQueueInfo(QIDLE, 0, 10);
        c.eq(QIDLE + " size", 3L, idle.getSize());
        c.eq(QIDLE + " delayed", false, Boolean.TRUE.equals(idle.isDelayed()));
        List<Job> jobs = idle.getJobs();
        c.eq(QIDLE + " jobs", 3, jobs.size());
        if (jobs.size() == 3) {
            c.eq("job 0", Arrays.asList("Noop", Json.canon(List.of(1)), null), view(jobs.get(0)));
            c.eq("job 1", Arrays.asList("Echo", Json.canon(List.of("x", Map.of("k", List.of(1)))), null),
                    view(jobs.get(1)));
            c.eq("job 2", Arrays.asList("Noop", Json.canon(List.of()), Json.canon(Map.of("a", 1))), view(jobs.get(2)));
        }

        if (laterQueued) {
            laterQueue(dao, t0, c);
        }
        List<QueueInfo> infos = dao.getQueueInfos();
        c.eq("getQueueInfos count", dao.getQueueNames().size(), infos.size());
        long total = 0;
        for (QueueInfo qi : infos) {
            total += qi.getSize();
        }
        c.eq("getPendingCount", total, dao.getPendingCount());
        c.eq("getProcessedCount", r.counter("stat", "processed"), dao.getProcessedCount());
        c.items(laterQueued ? 4 : 3);
    }

    /** A Jesque zset queue resq wrote: delayed, not yet pending, runAt = enqueue time + 600 s. */
    private static void laterQueue(QueueInfoDAO dao, long t0, Check c) {
        QueueInfo later = dao.getQueueInfo(QLATER, 0, 10);
        c.eq(QLATER + " delayed", true, Boolean.TRUE.equals(later.isDelayed()));
        c.eq(QLATER + " size", 1L, later.getSize());
        c.eq(QLATER + " pending (due now)", 0L, later.getPending());
        if (c.eq(QLATER + " jobs", 1, later.getJobs().size())) {
            Job j = later.getJobs().get(0);
            c.eq(QLATER + " job", Arrays.asList("Noop", Json.canon(List.of("later")), null), view(j));
            c.within(QLATER + " runAt - enqueue time (ms)", j.getRunAt().longValue() - t0, 600_000 - 1000, 602_000);
        }
    }

    /**
     * [class, canonical args, canonical vars or null]: what a Jesque admin UI shows. Missing args
     * read as [] (Jesque treats null and [] alike: both pick the no-argument constructor).
     */
    private static List<Object> view(Job j) {
        return Arrays.asList(j.getClassName(),
                Json.canon(j.getArgs() == null ? new Object[0] : j.getArgs()),
                j.getVars() == null ? null : Json.canon(j.getVars()));
    }
}
