package resqcompat.jobs;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A Jesque job that records the arguments Jesque gave it.
 *
 * <p>Jesque picks a public constructor whose arity equals {@code args.length} and whose parameter
 * types accept the decoded values; with only {@code Object} parameters there is exactly one match
 * per arity (0..6 here). Named {@code vars} arrive through {@code setXxx} setters, one per var
 * name the scenarios use.
 */
public class RecordJob implements Runnable {
    private final List<Object> args;
    private final Map<String, Object> vars = Collections.synchronizedMap(new LinkedHashMap<>());
    private volatile long ranAtMs;

    public RecordJob() {
        this(new Object[0]);
    }

    public RecordJob(Object a) {
        this(new Object[] {a});
    }

    public RecordJob(Object a, Object b) {
        this(new Object[] {a, b});
    }

    public RecordJob(Object a, Object b, Object c) {
        this(new Object[] {a, b, c});
    }

    public RecordJob(Object a, Object b, Object c, Object d) {
        this(new Object[] {a, b, c, d});
    }

    public RecordJob(Object a, Object b, Object c, Object d, Object e) {
        this(new Object[] {a, b, c, d, e});
    }

    public RecordJob(Object a, Object b, Object c, Object d, Object e, Object f) {
        this(new Object[] {a, b, c, d, e, f});
    }

    private RecordJob(Object[] args) {
        this.args = new ArrayList<>(Arrays.asList(args));
    }

    public void setName(Object v) {
        vars.put("name", v);
    }

    public void setCount(Object v) {
        vars.put("count", v);
    }

    public void setTags(Object v) {
        vars.put("tags", v);
    }

    public void setMeta(Object v) {
        vars.put("meta", v);
    }

    @Override
    public void run() {
        ranAtMs = System.currentTimeMillis();
        JobSink.RECORDED.add(this);
    }

    /** The positional arguments exactly as Jesque decoded them (Java types kept). */
    public List<Object> args() {
        return args;
    }

    /** The vars Jesque set, by name, in the order it called the setters. */
    public Map<String, Object> vars() {
        return vars;
    }

    public long ranAtMs() {
        return ranAtMs;
    }
}
