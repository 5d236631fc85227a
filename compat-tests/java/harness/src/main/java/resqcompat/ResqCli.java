package resqcompat;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs {@code resq enqueue ...} and {@code compat_client enqueue-tracked ...} (CONTRACT.md). */
public final class ResqCli {
    private final Env env;
    private final String ns;

    public ResqCli(Env env, String ns) {
        this.env = env;
        this.ns = ns;
    }

    /**
     * {@code resq enqueue --url U --namespace NS --queue Q [options...] CLASS ARG_JSON...}.
     *
     * @param options e.g. "--jesque", "--vars", "{...}", "--in", "2"
     * @throws IllegalStateException with resq's stderr when it exits non-zero
     */
    public void enqueue(String queue, List<String> options, String cls, String... argJson) throws Exception {
        enqueueWithEnv(java.util.Map.of(), queue, options, cls, argJson);
    }

    /** {@link #enqueue} with {@code extraEnv} added to resq's environment (OTEL_*, …). */
    public void enqueueWithEnv(java.util.Map<String, String> extraEnv, String queue, List<String> options, String cls,
            String... argJson) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(env.resqBin, "enqueue", "--url", env.redisUrl,
                "--namespace", ns, "--queue", queue));
        cmd.addAll(options);
        // No "--" before CLASS: CONTRACT.md's form, so a negative ARG_JSON (-5) tests that too.
        cmd.add(cls);
        cmd.addAll(Arrays.asList(argJson));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().putAll(extraEnv);
        Process p = pb.start();
        Processes.track(p);
        p.getOutputStream().close();
        String out = readAll(p.getInputStream());
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IllegalStateException("resq enqueue timed out: " + cmd);
        }
        if (p.exitValue() != 0) {
            throw new IllegalStateException("resq enqueue exited " + p.exitValue() + ": " + out.trim()
                    + " (command: " + String.join(" ", cmd) + ")");
        }
    }

    /**
     * {@code compat_client enqueue-tracked QUEUE CLASS ARG_JSON...} (CONTRACT.md): resq's
     * {@code Client::enqueue_class_tracked}, whose payload carries the job's id in the extra field
     * {@code resq_id}. Returns the id.
     *
     * @throws IllegalStateException with the client's output when it exits non-zero
     */
    public String enqueueTracked(String queue, String cls, String... argJson) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(env.clientBin, "enqueue-tracked", queue, cls));
        cmd.addAll(Arrays.asList(argJson));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().put("REDIS_URL", env.redisUrl);
        pb.environment().put("RESQUE_NAMESPACE", ns);
        Process p = pb.start();
        Processes.track(p);
        p.getOutputStream().close();
        String out = readAll(p.getInputStream());
        String err = readAll(p.getErrorStream());
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IllegalStateException("compat_client timed out: " + cmd);
        }
        if (p.exitValue() != 0) {
            throw new IllegalStateException("compat_client exited " + p.exitValue() + ": " + err.trim()
                    + " (command: " + String.join(" ", cmd) + ")");
        }
        return out.trim();
    }

    /**
     * {@code resq prune --url U --namespace NS}: one prune round now (the lock any earlier round
     * took is dropped first, as an expired one would be).
     *
     * @throws IllegalStateException with resq's output when it exits non-zero
     */
    public void prune() throws Exception {
        try (redis.clients.jedis.Jedis j = new redis.clients.jedis.Jedis(env.host, env.port)) {
            j.del(ns + ":pruning_dead_workers_in_progress");
        }
        List<String> cmd = List.of(env.resqBin, "prune", "--url", env.redisUrl, "--namespace", ns);
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        Processes.track(p);
        p.getOutputStream().close();
        String out = readAll(p.getInputStream());
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IllegalStateException("resq prune timed out: " + cmd);
        }
        if (p.exitValue() != 0) {
            throw new IllegalStateException("resq prune exited " + p.exitValue() + ": " + out.trim());
        }
    }

    private static String readAll(InputStream in) throws Exception {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        in.transferTo(b);
        return b.toString(StandardCharsets.UTF_8);
    }
}
