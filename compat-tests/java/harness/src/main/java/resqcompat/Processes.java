package resqcompat;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** Kills every subprocess the harness started if the JVM exits early (never anything else). */
final class Processes {
    private static final List<Process> STARTED = new CopyOnWriteArrayList<>();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (Process p : STARTED) {
                if (p.isAlive()) {
                    p.destroyForcibly();
                }
            }
        }));
    }

    private Processes() {
    }

    static void track(Process p) {
        STARTED.add(p);
    }
}
