package resqcompat.scenarios;

import com.sun.net.httpserver.HttpServer;
import net.greghaines.jesque.worker.MapBasedJobFactory;
import resqcompat.Check;
import resqcompat.Env;
import resqcompat.JesqueSide;
import resqcompat.Json;
import resqcompat.Redis;
import resqcompat.ResqCli;
import resqcompat.jobs.JobSink;
import resqcompat.jobs.RecordJob;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Scenario f: jobs resq enqueued with OpenTelemetry on (the {@code OTEL_*} variables set: the
 * Resque form plus the W3C context as top-level {@code traceparent}, the form Ruby's
 * opentelemetry-instrumentation-resque writes) are run by a real Jesque WorkerImpl.
 *
 * <ul>
 *   <li>f-trace-context: each payload is {@code {"class","args","traceparent"}}; Jesque ignores
 *       the extra member: every job runs once, in order, with exactly the args given, and Jesque
 *       records no failure. resq exported its send spans to an OTLP/HTTP endpoint (a sink that
 *       counts the POSTs to {@code /v1/traces}).</li>
 * </ul>
 */
public final class TraceContextToJesque {
    private static final String Q = "jq-f";

    private TraceContextToJesque() {
    }

    public static final List<String> NAMES = List.of("f-trace-context");

    /** Fills the check named in {@link #NAMES}. */
    public static void run(Env env, List<Check> checks) throws Exception {
        Check c = checks.get(0);
        String ns = env.namespace("f");
        List<List<String>> sent = List.of(
                List.of(),
                List.of("1", "-5", "\"héllo 😀\""),
                List.of("{\"a\":[1,{\"b\":null}]}", "null", "true"));
        AtomicInteger posts = new AtomicInteger();
        HttpServer sink = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        sink.createContext("/v1/traces", ex -> {
            ex.getRequestBody().readAllBytes();
            posts.incrementAndGet();
            ex.sendResponseHeaders(200, -1);
            ex.close();
        });
        sink.start();
        try (Redis r = new Redis(env, ns)) {
            r.wipe();
            ResqCli cli = new ResqCli(env, ns);
            Map<String, String> otel = Map.of(
                    "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:" + sink.getAddress().getPort(),
                    "OTEL_SERVICE_NAME", "resq-compat");
            for (List<String> args : sent) {
                cli.enqueueWithEnv(otel, Q, List.of(), "Record", args.toArray(new String[0]));
            }
            List<String> queued = r.jedis.lrange(r.key("queue", Q), 0, -1);
            c.eq("jobs queued", sent.size(), queued.size());
            for (int i = 0; i < queued.size(); i++) {
                c.eq("job " + i + " top-level keys", List.of("class", "args", "traceparent"), Json.keys(queued.get(i)));
                c.that("job " + i + " traceparent is W3C's",
                        queued.get(i).matches(".*\"traceparent\":\"00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]\".*"), queued.get(i));
            }
            c.that("resq exported its spans over OTLP/HTTP", posts.get() >= sent.size(),
                    posts.get() + " POSTs to /v1/traces");

            JobSink.reset(env.host, env.port, ns);
            Map<String, Class<?>> types = new HashMap<>();
            types.put("Record", RecordJob.class);
            try (JesqueSide.Fleet fleet = JesqueSide.start(JesqueSide.config(env, ns), List.of(Q),
                    new MapBasedJobFactory(types), 1)) {
                boolean done = Redis.waitFor(() -> JobSink.RECORDED.size() >= sent.size(), 30_000, 10);
                c.that("all traced jobs ran within 30 s", done, JobSink.RECORDED.size() + " of " + sent.size() + " ran");
            } finally {
                JobSink.close();
            }
            List<RecordJob> got = new ArrayList<>(JobSink.RECORDED);
            for (int i = 0; i < Math.min(sent.size(), got.size()); i++) {
                List<Object> want = new ArrayList<>();
                for (String a : sent.get(i)) {
                    want.add(Json.parse(a));
                }
                c.eq("job " + i + " args", Json.canon(want), Json.canon(got.get(i).args()));
            }
            c.eq("Jesque recorded no failure", 0L, r.llen("failed"));
            if (r.llen("failed") > 0) {
                c.note("first failure: " + r.jedis.lindex(r.key("failed"), 0));
            }
            c.items(got.size());
        } finally {
            sink.stop(0);
        }
    }
}
