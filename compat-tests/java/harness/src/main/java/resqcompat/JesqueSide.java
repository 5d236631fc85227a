package resqcompat;

import net.greghaines.jesque.Config;
import net.greghaines.jesque.ConfigBuilder;
import net.greghaines.jesque.worker.JobFactory;
import net.greghaines.jesque.worker.WorkerImpl;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * Starting and stopping real Jesque workers. Uses only API present in every Jesque 2.x release
 * (ConfigBuilder, WorkerImpl(Config, queues, JobFactory), end/join), so the same source compiles
 * against each module's Jesque jar.
 */
public final class JesqueSide {
    private JesqueSide() {
    }

    /** Jesque's Config for the Redis under test and the given namespace. */
    public static Config config(Env env, String ns) {
        return new ConfigBuilder().withHost(env.host).withPort(env.port).withNamespace(ns).build();
    }

    /** Worker threads started by {@link #start}, stopped together by {@link #close}. */
    public static final class Fleet implements AutoCloseable {
        public final List<WorkerImpl> workers = new ArrayList<>();
        private final List<Thread> threads = new ArrayList<>();

        /** Worker names as registered in {@code <ns>:workers}. */
        public List<String> names() {
            List<String> out = new ArrayList<>();
            for (WorkerImpl w : workers) {
                out.add(w.getName());
            }
            return out;
        }

        /** Graceful stop: {@code end(false)} lets the current job finish, then joins (max 10 s). */
        @Override
        public void close() throws InterruptedException {
            for (WorkerImpl w : workers) {
                w.end(false);
            }
            for (Thread t : threads) {
                t.join(10_000);
            }
        }
    }

    /** Starts {@code n} WorkerImpl threads polling {@code queues} with the given job factory. */
    public static Fleet start(Config config, Collection<String> queues, JobFactory factory, int n) {
        Fleet fleet = new Fleet();
        for (int i = 0; i < n; i++) {
            WorkerImpl w = new WorkerImpl(config, queues, factory);
            Thread t = new Thread(w, "jesque-worker-" + i);
            t.setDaemon(true);
            fleet.workers.add(w);
            fleet.threads.add(t);
            t.start();
        }
        return fleet;
    }
}
