package resqcompat.jobs;

import redis.clients.jedis.JedisPool;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Where the Java job classes report what they received. Jesque builds job instances by
 * reflection, so the scenario hands them their outputs through these static fields; each
 * scenario calls {@link #reset} before it starts Jesque workers.
 */
public final class JobSink {
    /** What {@link RecordJob} instances received, in run order. */
    public static final ConcurrentLinkedQueue<RecordJob> RECORDED = new ConcurrentLinkedQueue<>();
    /** How many jobs {@link EchoJob} ran on the Java side. */
    public static final AtomicInteger JAVA_ECHOES = new AtomicInteger();
    /** Connections for {@link EchoJob}'s RPUSH. */
    static volatile JedisPool pool;
    /** The list EchoJob appends to: {@code <ns>:compat:echo}, same as resq's Echo handler. */
    static volatile String echoKey;

    private JobSink() {
    }

    /** Clears the records and points EchoJob at {@code <ns>:compat:echo} on the given Redis. */
    public static void reset(String host, int port, String ns) {
        RECORDED.clear();
        JAVA_ECHOES.set(0);
        close();
        pool = new JedisPool(host, port);
        echoKey = ns + ":compat:echo";
    }

    public static void close() {
        JedisPool p = pool;
        pool = null;
        if (p != null) {
            p.close();
        }
    }
}
