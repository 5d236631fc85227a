package resqcompat;

import redis.clients.jedis.Jedis;

import java.util.Set;
import java.util.function.BooleanSupplier;

/**
 * The harness's own Redis connection (one per scenario, used from the scenario thread only) and
 * the polling helpers every scenario waits with. Nothing here synchronises by sleeping a fixed
 * time: waits poll a condition until a deadline.
 */
public final class Redis implements AutoCloseable {
    /** Raw Jedis, for reads the helpers below do not cover. */
    public final Jedis jedis;
    /** The namespace this scenario owns. */
    public final String ns;

    public Redis(Env env, String ns) {
        this.jedis = new Jedis(env.host, env.port);
        this.ns = ns;
    }

    /** {@code <ns>:a:b}: the physical key, built the way both Resque and Jesque build it. */
    public String key(String... parts) {
        return ns + ":" + String.join(":", parts);
    }

    /** Deletes every key of this namespace, so a rerun against the same Redis starts clean. */
    public void wipe() {
        Set<String> keys = jedis.keys(ns + ":*");
        if (!keys.isEmpty()) {
            jedis.del(keys.toArray(new String[0]));
        }
    }

    public long llen(String... parts) {
        Long n = jedis.llen(key(parts));
        return n == null ? 0 : n;
    }

    /** GET of a counter key as a number (0 when absent). */
    public long counter(String... parts) {
        String v = jedis.get(key(parts));
        return v == null ? 0 : Long.parseLong(v);
    }

    /** Polls {@code cond} every {@code pollMs} until it holds or {@code timeoutMs} passed. */
    public static boolean waitFor(BooleanSupplier cond, long timeoutMs, long pollMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            if (cond.getAsBoolean()) {
                return true;
            }
            if (System.currentTimeMillis() >= deadline) {
                return false;
            }
            try {
                Thread.sleep(pollMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
    }

    /** Waits until LLEN of the list reaches at least {@code n}; returns whether it did. */
    public boolean waitLlen(long n, long timeoutMs, String... parts) {
        return waitFor(() -> llen(parts) >= n, timeoutMs, 10);
    }

    @Override
    public void close() {
        jedis.close();
    }
}
