// How a failed check is worded: exactly as `fairdeck verify` (Python) words it, so that a player
// who checks a hand on the page and on the command line reads the same sentence. The Python
// messages quote values with repr(); these functions write repr's text for the values a message
// can hold (strings, and the JSON values strictjson.js reads).
import { JNumber } from "./strictjson.js";

// What Python's str.isprintable() refuses: "Other" and "Separator" characters, but the space.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

const hex = (n, width) => n.toString(16).padStart(width, "0");

/** Python's repr() of a str. */
export function pyrepr(s) {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === quote || ch === "\\") out += `\\${ch}`;
    else if (ch === "\t") out += "\\t";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (c < 0x20 || c === 0x7f) out += `\\x${hex(c, 2)}`;
    else if (c < 0x7f || (ch !== " " && !UNPRINTABLE.test(ch))) out += ch;
    else if (c < 0x100) out += `\\x${hex(c, 2)}`;
    else if (c < 0x10000) out += `\\u${hex(c, 4)}`;
    else out += `\\U${hex(c, 8)}`;
  }
  return out + quote;
}

/** Python's repr() of a value as fairdeck.core.strictjson reads JSON (numbers as Number(text=...)). */
export function pyreprValue(v) {
  if (v === null) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "string") return pyrepr(v);
  if (v instanceof JNumber) return `Number(text=${pyrepr(v.text)})`;
  if (Array.isArray(v)) return `[${v.map(pyreprValue).join(", ")}]`;
  return `{${Object.keys(v)
    .map((k) => `${pyrepr(k)}: ${pyreprValue(v[k])}`)
    .join(", ")}}`;
}

/** Python's sorted() of strings: by code point (JavaScript's sort compares UTF-16 units). */
export function pysorted(names) {
  const cmp = (a, b) => {
    const x = Array.from(a, (c) => c.codePointAt(0));
    const y = Array.from(b, (c) => c.codePointAt(0));
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
    return x.length - y.length;
  };
  return [...names].sort(cmp);
}

/** Python's repr() of a list of strings, sorted: "['a', 'b']". */
export const pylist = (names) => `[${pysorted(names).map(pyrepr).join(", ")}]`;

/** The first `n` characters (code points, as Python slices a str). */
export const head = (s, n) => Array.from(s).slice(0, n).join("");

/** The length in characters (code points, as Python's len of a str). */
export const length = (s) => Array.from(s).length;
