// Job arguments that both directions send through Redis. Each entry is one job's args.
// They cover what a JavaScript producer can express: JSON numbers (ints, floats, exponents),
// strings needing escapes or multi-byte UTF-8, nested containers, null and booleans.
"use strict";

const ARG_CASES = [
  { name: "no-args", args: [] },
  { name: "integers", args: [1, -2, 0, 9007199254740991, -9007199254740991] },
  { name: "floats", args: [1.5, -0.25, 1e-7, 0.1 + 0.2, 1e21, 6.02214076e23, 123456.789] },
  { name: "strings", args: ["plain", "", "héllo wörld", "日本語テキスト", "emoji 🎉👍🏽", "quote \" backslash \\ slash /"] },
  { name: "escapes", args: ["ctl \n\t\r\b\f \u0001\u001f end", "nul \u0000 end", "seps \u2028\u2029", "del \u007f"] },
  { name: "nested", args: [{ a: { b: [1, { c: null }] }, "key with space": true, "ünï": "çødé" }, {}, [[]], [1, [2, [3, []]]]] },
  { name: "null", args: [null] },
  { name: "booleans", args: [true, false] },
  { name: "mixed", args: [null, true, 3, "mixed", { deep: { deeper: [false, 2.5] } }] },
];

module.exports = { ARG_CASES };
