package resqcompat;

import com.fasterxml.jackson.databind.ObjectMapper;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * JSON parsing and value comparison independent of formatting.
 *
 * <p>"Equal" here means: same structure, same strings, integers equal as integers (whatever Java
 * width they landed in), floats equal as doubles (so {@code -0.0 != 0.0}), and an integer never
 * equal to a float — Jesque picks job constructors by Java type, so {@code 3} vs {@code 3.0}
 * matters. Object key order is ignored by {@link #canon}; {@link #keys} exposes it where the
 * order itself is the thing under test.
 */
public final class Json {
    /** A plain Jackson 2 mapper (the one both Jesque 2.x versions ship with). */
    public static final ObjectMapper MAPPER = new ObjectMapper();

    private Json() {
    }

    /** Parses any JSON text into Maps (insertion ordered), Lists, numbers, strings, booleans, null. */
    public static Object parse(String text) {
        try {
            return MAPPER.readValue(text, Object.class);
        } catch (Exception e) {
            throw new IllegalArgumentException("not JSON: " + text, e);
        }
    }

    /** Java value -> canonical form used for comparison (see class doc). */
    public static Object canon(Object v) {
        if (v == null || v instanceof String || v instanceof Boolean) {
            return v;
        }
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            return BigInteger.valueOf(((Number) v).longValue());
        }
        if (v instanceof BigInteger) {
            return v;
        }
        if (v instanceof Double || v instanceof Float || v instanceof BigDecimal) {
            return ((Number) v).doubleValue();
        }
        if (v instanceof Map) {
            Map<String, Object> out = new LinkedHashMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                out.put(String.valueOf(e.getKey()), canon(e.getValue()));
            }
            return out;
        }
        if (v instanceof Object[]) {
            return canon(Arrays.asList((Object[]) v));
        }
        if (v instanceof List) {
            List<Object> out = new ArrayList<>();
            for (Object o : (List<?>) v) {
                out.add(canon(o));
            }
            return out;
        }
        throw new IllegalArgumentException("not a JSON value: " + v.getClass());
    }

    /** Top-level key order of a JSON object text, e.g. [class, args, vars]. */
    public static List<String> keys(String objectText) {
        Object o = parse(objectText);
        if (!(o instanceof Map)) {
            throw new IllegalArgumentException("not a JSON object: " + objectText);
        }
        List<String> keys = new ArrayList<>();
        for (Object k : ((Map<?, ?>) o).keySet()) {
            keys.add(String.valueOf(k));
        }
        return keys;
    }

    /** Compact JSON of a Java value, as Jackson writes it. */
    public static String write(Object v) {
        try {
            return MAPPER.writeValueAsString(v);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
