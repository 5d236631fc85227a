package resqcompat;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Collects the value assertions of one scenario and turns them into its RESULT line.
 *
 * <p>A scenario never stops at the first mismatch: every check runs, so one RESULT line reports
 * all that went wrong (the first few in full).
 */
public final class Check {
    private final String scenario;
    private int passed;
    private final List<String> failures = new ArrayList<>();
    private final List<String> notes = new ArrayList<>();
    private long items;

    public Check(String scenario) {
        this.scenario = scenario;
    }

    /** Asserts equality; on mismatch records both values. Returns whether it held. */
    public boolean eq(String what, Object expected, Object actual) {
        return that(what, Objects.equals(expected, actual),
                "expected " + show(expected) + " got " + show(actual));
    }

    /** Asserts a condition; {@code whyNot} explains the failure. Returns the condition. */
    public boolean that(String what, boolean ok, String whyNot) {
        if (ok) {
            passed++;
        } else {
            failures.add(clip(what + ": " + whyNot));
        }
        return ok;
    }

    /** Asserts lo <= value <= hi (times in ms, sizes, ...). */
    public boolean within(String what, long value, long lo, long hi) {
        return that(what, value >= lo && value <= hi, value + " not in [" + lo + ", " + hi + "]");
    }

    /** Records an unexpected exception as a failure (the scenario goes on where it can). */
    public void error(String what, Throwable t) {
        failures.add(clip(what + " threw " + t.getClass().getName() + ": " + t.getMessage()));
    }

    /** Adds a fact to the detail field (timings, who ran what); not an assertion. */
    public void note(String fact) {
        notes.add(fact);
    }

    /** The count field: how many jobs/records this scenario verified. */
    public void items(long n) {
        items = n;
    }

    /** The scenario name of the RESULT line, e.g. "a-enqueue". */
    public String name() {
        return scenario;
    }

    public boolean ok() {
        return failures.isEmpty() && passed > 0;
    }

    /** The RESULT line: {@code RESULT <peer> <scenario> <PASS|FAIL> <count> <detail>}. */
    public String line(String peer) {
        StringBuilder d = new StringBuilder();
        if (!failures.isEmpty()) {
            d.append(failures.size()).append(" failed check(s): ");
            d.append(String.join(" | ", failures.subList(0, Math.min(4, failures.size()))));
            if (failures.size() > 4) {
                d.append(" | ...");
            }
            d.append("; ");
        } else if (passed == 0) {
            d.append("no check ran; ");
        }
        d.append(passed).append(" checks passed");
        if (!notes.isEmpty()) {
            d.append("; ").append(String.join("; ", notes));
        }
        String detail = oneLine(d.toString());
        if (detail.length() > 1500) {
            detail = detail.substring(0, 1500) + "...";
        }
        return "RESULT " + peer + " " + scenario + " " + (ok() ? "PASS" : "FAIL") + " " + items + " " + detail;
    }

    /** All failures, for the log file. */
    public List<String> failures() {
        return failures;
    }

    private static String clip(String s) {
        return s.length() > 500 ? s.substring(0, 500) + "..." : s;
    }

    static String show(Object o) {
        String s = String.valueOf(o);
        return s.length() > 300 ? s.substring(0, 300) + "..." : s;
    }

    private static String oneLine(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (char c : s.toCharArray()) {
            if (c == '\n') {
                b.append("\\n");
            } else if (c == '\r') {
                b.append("\\r");
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }
}
