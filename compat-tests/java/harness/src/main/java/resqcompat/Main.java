package resqcompat;

import net.greghaines.jesque.utils.VersionUtils;
import redis.clients.jedis.Jedis;
import resqcompat.scenarios.AdminReadsResq;
import resqcompat.scenarios.ClientToResq;
import resqcompat.scenarios.MixedFleet;
import resqcompat.scenarios.ResqIdToJesque;
import resqcompat.scenarios.ResqToJesque;
import resqcompat.scenarios.TraceContextToJesque;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs every scenario against one Jesque version and prints one RESULT line per scenario.
 *
 * <p>Exit status: 0 when every scenario produced its line (PASS or FAIL — the runner judges);
 * 2 when the harness itself could not run (environment, Redis unreachable).
 * {@code -Dscenarios=a,c} limits the run (for development).
 */
public final class Main {
    private interface Scenario {
        void run(Env env, List<Check> checks) throws Exception;
    }

    private Main() {
    }

    public static void main(String[] argv) {
        Env env;
        try {
            env = Env.load();
            try (Jedis j = new Jedis(env.host, env.port)) {
                j.ping();
            }
        } catch (Exception e) {
            System.err.println("java compat harness cannot start: " + e);
            System.exit(2);
            return;
        }
        System.err.println(env.label + ": Jesque jar reports version " + VersionUtils.getVersion());
        Map<String, List<String>> names = new LinkedHashMap<>();
        Map<String, Scenario> scenarios = new LinkedHashMap<>();
        add(names, scenarios, "a", ClientToResq.NAMES, ClientToResq::run);
        add(names, scenarios, "b", ResqToJesque.NAMES, ResqToJesque::run);
        add(names, scenarios, "c", AdminReadsResq.NAMES, AdminReadsResq::run);
        add(names, scenarios, "d", MixedFleet.NAMES, MixedFleet::run);
        add(names, scenarios, "e", ResqIdToJesque.NAMES, ResqIdToJesque::run);
        add(names, scenarios, "f", TraceContextToJesque.NAMES, TraceContextToJesque::run);
        String only = System.getProperty("scenarios", "");
        for (String key : scenarios.keySet()) {
            if (!only.isEmpty() && !List.of(only.split(",")).contains(key)) {
                continue;
            }
            List<Check> checks = new ArrayList<>();
            for (String n : names.get(key)) {
                checks.add(new Check(n));
            }
            long t0 = System.currentTimeMillis();
            try {
                scenarios.get(key).run(env, checks);
            } catch (Throwable t) {
                // A scenario that could not finish fails all its lines, with the reason.
                for (Check c : checks) {
                    c.error("scenario " + key, t);
                }
                t.printStackTrace();
            }
            System.err.printf("%s scenario %s took %d ms%n", env.label, key, System.currentTimeMillis() - t0);
            for (Check c : checks) {
                System.out.println(c.line(env.label));
                for (String f : c.failures()) {
                    System.err.println("  " + c.name() + " FAILED: " + f);
                }
            }
            System.out.flush();
        }
        System.exit(0);
    }

    private static void add(Map<String, List<String>> names, Map<String, Scenario> scenarios, String key,
                            List<String> lineNames, Scenario s) {
        names.put(key, lineNames);
        scenarios.put(key, s);
    }
}
