package resqcompat.jobs;

import redis.clients.jedis.Jedis;
import resqcompat.Json;

import java.util.Collections;

/**
 * The Java twin of resq's {@code Echo} handler for the mixed-fleet scenario: RPUSHes the compact
 * JSON array of its arguments to {@code <ns>:compat:echo}, so both sides write the same list and
 * a duplicate or a gap shows up there whichever side ran the job.
 */
public class EchoJob implements Runnable {
    private final Object id;

    public EchoJob(Object id) {
        this.id = id;
    }

    @Override
    public void run() {
        try (Jedis jedis = JobSink.pool.getResource()) {
            jedis.rpush(JobSink.echoKey, Json.write(Collections.singletonList(id)));
        }
        JobSink.JAVA_ECHOES.incrementAndGet();
    }
}
