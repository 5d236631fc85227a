package resqbench;

import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import net.greghaines.jesque.Config;
import net.greghaines.jesque.ConfigBuilder;
import net.greghaines.jesque.worker.MapBasedJobFactory;
import net.greghaines.jesque.worker.WorkerImpl;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;

/**
 * Runs N real Jesque {@link WorkerImpl}s (one thread each, as {@code WorkerPool} does) on one
 * queue until stdin closes, then ends them and exits.
 *
 * <p>Usage: {@code JesqueWorkers <host> <port> <namespace> <queue> <workers>}. Prints
 * {@code ready} once the workers are started. Jobs: {@code Noop} (nothing) and {@code Echo}
 * ({@code RPUSH <ns>:compat:echo "[]"}, the benchmark's pick-up signal).
 */
public final class JesqueWorkers {
    static JedisPool pool;
    static String echoKey;

    /** Does nothing. */
    public static final class Noop implements Runnable {
        @Override
        public void run() {}
    }

    /** Signals that it started. */
    public static final class Echo implements Runnable {
        @Override
        public void run() {
            try (Jedis j = pool.getResource()) {
                j.rpush(echoKey, "[]");
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        String ns = args[2];
        String queue = args[3];
        int n = Integer.parseInt(args[4]);
        pool = new JedisPool(host, port);
        echoKey = ns.isEmpty() ? "compat:echo" : ns + ":compat:echo";
        Config config = new ConfigBuilder().withHost(host).withPort(port).withNamespace(ns).build();
        MapBasedJobFactory jobs = new MapBasedJobFactory(Map.of("Noop", Noop.class, "Echo", Echo.class));
        List<WorkerImpl> workers = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            WorkerImpl w = new WorkerImpl(config, List.of(queue), jobs);
            Thread t = new Thread(w, "jesque-" + i);
            t.start();
            workers.add(w);
            threads.add(t);
        }
        System.out.println("ready");
        System.out.flush();
        InputStream in = System.in;
        while (in.read() >= 0) {
            // wait for EOF
        }
        for (WorkerImpl w : workers) {
            w.end(false);
        }
        for (Thread t : threads) {
            t.join(10_000);
        }
        pool.close();
        System.exit(0);
    }
}
