package resqcompat;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The argument values both directions push through the wire: every JSON type, the number
 * ranges where Java and Rust representations part ways, and strings that need escaping.
 */
public final class Values {
    private Values() {
    }

    public static Object[] ints() {
        return new Object[] {"ints", 0, -1, Integer.MAX_VALUE, Integer.MIN_VALUE, 2147483648L,
            Long.MAX_VALUE, Long.MIN_VALUE, new BigInteger("18446744073709551616"),
            new BigInteger("-18446744073709551617")};
    }

    public static Object[] doubles() {
        return new Object[] {"doubles", 1.0, 1.5, -0.0, 1.0E20, 1.5E-7, 0.30000000000000004,
            1.2345678912345679E8, 4.9E-324, 1.7976931348623157E308};
    }

    public static Object[] strings() {
        return new Object[] {"strings", "", "héllo wörld", "日本語テキスト", "emoji 😀🎉",
            "quote \" backslash \\ slash / </script>", "ctrl \u0001\u001f tab\t nl\n cr\r",
            "del \u007f nul \u0000", "\u2028\u2029 line separators"};
    }

    public static Object[] nested() {
        return new Object[] {"nested",
            map("a", 1, "b", list(1, 2, map("c", null)), "d", map("e", map("f", "g"))),
            list(1, "two", list(3, list(4, list())), map()), null, true, false, map(), list()};
    }

    /** An insertion-ordered map from alternating keys and values. */
    public static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    public static List<Object> list(Object... items) {
        return new ArrayList<>(Arrays.asList(items));
    }
}
