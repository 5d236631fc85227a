package resqcompat;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One resq {@code compat_worker} subprocess (CONTRACT.md): configured only by environment, it
 * prints {@code worker <id>} per slot on stdout and exits 0 after unregistering on TERM.
 */
public final class ResqWorker implements AutoCloseable {
    private final Process process;
    private final List<String> ids = Collections.synchronizedList(new ArrayList<>());
    /** Wall-clock time just before the process was started (for "started" tolerances). */
    public final long startedAtMs;

    private ResqWorker(Process process, long startedAtMs) {
        this.process = process;
        this.startedAtMs = startedAtMs;
    }

    /**
     * Starts the worker and waits (max 15 s) until it has printed one id per slot.
     *
     * @param queues        QUEUES, Ruby syntax
     * @param concurrency   CONCURRENCY
     * @param jesqueDelayed JESQUE_DELAYED_QUEUES (comma list) or null
     * @param logName       stderr goes to logs/<logName>.log
     */
    public static ResqWorker start(Env env, String ns, String queues, int concurrency,
                                   String jesqueDelayed, String logName) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(env.workerBin);
        Map<String, String> e = pb.environment();
        e.put("REDIS_URL", env.redisUrl);
        e.put("RESQUE_NAMESPACE", ns);
        e.put("QUEUES", queues);
        e.put("CONCURRENCY", Integer.toString(concurrency));
        // Zset (delayed/recurring) queues are polled, not notified; 1 s keeps the delayed-job
        // tolerances of scenario a meaningful whatever resq's default INTERVAL is.
        e.put("INTERVAL", "1");
        if (jesqueDelayed != null) {
            e.put("JESQUE_DELAYED_QUEUES", jesqueDelayed);
        }
        e.remove("QUEUE");
        pb.redirectError(ProcessBuilder.Redirect.appendTo(new File(env.logDir.toFile(), logName + ".log")));
        long t0 = System.currentTimeMillis();
        ResqWorker w = new ResqWorker(pb.start(), t0);
        Processes.track(w.process);
        Thread reader = new Thread(w::readStdout, "resq-stdout-" + logName);
        reader.setDaemon(true);
        reader.start();
        if (!Redis.waitFor(() -> w.ids.size() >= concurrency || !w.process.isAlive(), 15_000, 10)
                || w.ids.size() < concurrency) {
            w.close();
            throw new IllegalStateException("compat_worker printed " + w.ids.size() + " of " + concurrency
                    + " worker ids (alive=" + w.process.isAlive() + "); see logs/" + logName + ".log");
        }
        return w;
    }

    private void readStdout() {
        try (BufferedReader r = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                if (line.startsWith("worker ")) {
                    ids.add(line.substring("worker ".length()).trim());
                }
            }
        } catch (Exception ignored) {
            // the process went away; stop() reports its exit code
        }
    }

    /** The slot ids it printed, in order. */
    public List<String> ids() {
        synchronized (ids) {
            return new ArrayList<>(ids);
        }
    }

    public long pid() {
        return process.pid();
    }

    /** Sends SIGTERM and waits (max 15 s); returns the exit code, or -1 if it had to be killed. */
    public int stop() throws InterruptedException {
        process.destroy(); // SIGTERM on Linux
        if (!process.waitFor(15, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            return -1;
        }
        return process.exitValue();
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            stop();
        }
    }
}
