package resqcompat;

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Everything the harness takes from its environment (set by run.sh), parsed once.
 *
 * <p>REDIS_URL, RESQ_BIN and COMPAT_WORKER_BIN are required; RESQUE_NAMESPACE is the prefix of
 * the fresh per-scenario namespaces; JESQUE_LABEL names the Jesque version under test.
 */
public final class Env {
    /** The redis:// URL handed to resq and parsed for Jesque. */
    public final String redisUrl;
    /** Redis host and port, as Jesque's Config wants them. */
    public final String host;
    public final int port;
    /** Prefix for the per-scenario namespaces, e.g. "compat" gives "compat-jesque-2.2.0-a". */
    public final String nsBase;
    /** Path of the resq CLI and of the compat_worker example. */
    public final String resqBin;
    public final String workerBin;
    /** Path of the compat_client example (tracked enqueue; COMPAT_CLIENT_BIN, else next to the worker). */
    public final String clientBin;
    /** "jesque-2.2.0": the first field of every RESULT line. */
    public final String label;
    /** Where subprocess and Jesque logs go. */
    public final Path logDir;

    private Env(String redisUrl, String host, int port, String nsBase, String resqBin,
                String workerBin, String clientBin, String label, Path logDir) {
        this.redisUrl = redisUrl;
        this.host = host;
        this.port = port;
        this.nsBase = nsBase;
        this.resqBin = resqBin;
        this.workerBin = workerBin;
        this.clientBin = clientBin;
        this.label = label;
        this.logDir = logDir;
    }

    /** Reads the environment; throws IllegalStateException saying what is missing or wrong. */
    public static Env load() throws Exception {
        String url = required("REDIS_URL");
        URI uri = URI.create(url);
        if (!"redis".equals(uri.getScheme()) || uri.getHost() == null) {
            throw new IllegalStateException("REDIS_URL=" + url + " is not a redis://HOST:PORT URL");
        }
        int port = uri.getPort() == -1 ? 6379 : uri.getPort();
        String ns = System.getenv().getOrDefault("RESQUE_NAMESPACE", "compat");
        if (ns.isEmpty()) {
            ns = "compat";
        }
        String resq = required("RESQ_BIN");
        String worker = required("COMPAT_WORKER_BIN");
        String client = System.getenv().getOrDefault("COMPAT_CLIENT_BIN", "");
        if (client.isEmpty()) {
            client = Path.of(worker).resolveSibling("compat_client").toString();
        }
        for (String bin : new String[] {resq, worker, client}) {
            if (!Files.isExecutable(Path.of(bin))) {
                throw new IllegalStateException(bin
                        + " is not an executable file (RESQ_BIN / COMPAT_WORKER_BIN / COMPAT_CLIENT_BIN)");
            }
        }
        String label = System.getProperty("jesque.label", "jesque-unknown");
        Path logs = Path.of(System.getProperty("compat.logdir", "logs"));
        Files.createDirectories(logs);
        return new Env(url, uri.getHost(), port, ns, resq, worker, client, label, logs);
    }

    /** The fresh namespace for one scenario: base, Jesque version and scenario letter. */
    public String namespace(String scenario) {
        return nsBase + "-" + label + "-" + scenario;
    }

    private static String required(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set (see compat-tests/java/README.md)");
        }
        return v;
    }
}
