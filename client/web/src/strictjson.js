// Strict JSON text reading: docs/fairness-spec.md section 7.1, as fairdeck.core.strictjson does it.
//
// Two verifiers must reach the same verdict on the same bytes, so nothing is left to JSON.parse
// (which keeps the last of duplicate names and accepts lone surrogates). A text is at most
// 1 MiB (counted on the raw bytes first), has no byte order mark, is valid UTF-8, nests at most
// 32 deep, and is exactly one RFC 8259 value with no duplicate name in any object and no lone
// surrogate in any string. Numbers are never converted: each becomes a JNumber holding its text.
//
// A refusal is worded as the Python reader words it, which is CPython's json module for a syntax
// error ("Expecting ',' delimiter: line 3 column 5 (char 40)", positions in characters): the
// same rules checked in the same order, so both readers name the same first fault.

export const MAX_TEXT_BYTES = 1 << 20;
export const MAX_DEPTH = 32;

export class StrictJSONError extends Error {}

export class JNumber {
  constructor(text) {
    this.text = text;
  }
}

/** The offset of the first byte that is not well-formed UTF-8 (Unicode Table 3-7), or -1. */
export function firstBadUtf8(bytes) {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    let n;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) n = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      n = 2;
      if (b === 0xe0) lo = 0xa0; // no overlong form
      if (b === 0xed) hi = 0x9f; // no surrogate
    } else if (b >= 0xf0 && b <= 0xf4) {
      n = 3;
      if (b === 0xf0) lo = 0x90;
      if (b === 0xf4) hi = 0x8f; // nothing past U+10FFFF
    } else return i;
    for (let k = 1; k <= n; k++) {
      const c = bytes[i + k];
      if (c === undefined || c < (k === 1 ? lo : 0x80) || c > (k === 1 ? hi : 0xbf)) return i;
    }
    i += n + 1;
  }
  return -1;
}

/** The text of raw bytes, after the size, BOM and UTF-8 rules (7.1 items 1 and 2). */
export function decodeText(bytes) {
  if (bytes.length > MAX_TEXT_BYTES) throw new StrictJSONError(`the text is larger than ${MAX_TEXT_BYTES} bytes`);
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new StrictJSONError("the text starts with a byte order mark");
  }
  const bad = firstBadUtf8(bytes);
  if (bad >= 0) throw new StrictJSONError(`the text is not UTF-8 (byte ${bad})`);
  return new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes);
}

/** The JSON value of raw bytes (a Uint8Array), or StrictJSONError. */
export function loads(bytes) {
  return parseText(decodeText(bytes));
}

const WS = new Set([" ", "\t", "\n", "\r"]);
const HEX = /^[0-9a-fA-F]$/;
const ESCAPES = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Objects are null-prototype objects (so "__proto__" is an ordinary name), arrays are arrays. */
export function parseText(text) {
  checkDepth(text);
  // Positions count characters (code points), as Python's do.
  const s = Array.from(text);
  const end = s.length;
  const fail = (msg, pos) => {
    let line = 1;
    let lastNewline = -1;
    for (let i = 0; i < pos; i++) {
      if (s[i] === "\n") {
        line++;
        lastNewline = i;
      }
    }
    throw new StrictJSONError(`not JSON: ${msg}: line ${line} column ${pos - lastNewline} (char ${pos})`);
  };
  class Stop {
    constructor(pos) {
      this.pos = pos;
    }
  }
  const skip = (i) => {
    while (i < end && WS.has(s[i])) i++;
    return i;
  };
  // CPython's scanstring: `i` is just past the opening quote.
  const string = (i) => {
    const begin = i - 1;
    let out = "";
    for (;;) {
      let next = i;
      while (next < end && s[next] !== '"' && s[next] !== "\\") {
        if (s[next].codePointAt(0) <= 0x1f) fail("Invalid control character at", next);
        next++;
      }
      if (next >= end) fail("Unterminated string starting at", begin);
      out += s.slice(i, next).join("");
      const c = s[next];
      next++;
      if (c === '"') return [out, next];
      if (next === end) fail("Unterminated string starting at", begin);
      const e = s[next];
      if (e !== "u") {
        i = next + 1;
        if (!(e in ESCAPES)) fail("Invalid \\escape", i - 2);
        out += ESCAPES[e];
        continue;
      }
      next++;
      i = next + 4;
      if (i >= end) fail("Invalid \\uXXXX escape", next - 1);
      const digits = s.slice(next, i);
      if (!digits.every((d) => HEX.test(d))) fail("Invalid \\uXXXX escape", i - 5);
      let unit = parseInt(digits.join(""), 16);
      if (unit >= 0xd800 && unit <= 0xdbff && i + 6 < end && s[i] === "\\" && s[i + 1] === "u") {
        const low = s.slice(i + 2, i + 6);
        if (!low.every((d) => HEX.test(d))) fail("Invalid \\uXXXX escape", i + 1);
        const second = parseInt(low.join(""), 16);
        if (second >= 0xdc00 && second <= 0xdfff) {
          unit = 0x10000 + ((unit - 0xd800) << 10) + (second - 0xdc00);
          i += 6;
        }
      }
      out += String.fromCodePoint(unit);
    }
  };
  // CPython's scan_once: a value at `i`, or Stop(i) ("Expecting value").
  const value = (i) => {
    if (i >= end) throw new Stop(i);
    const c = s[i];
    if (c === '"') return string(i + 1);
    if (c === "{") return object(i + 1);
    if (c === "[") return array(i + 1);
    for (const [word, v] of [["null", null], ["true", true], ["false", false]]) {
      if (c === word[0] && s.slice(i, i + word.length).join("") === word) return [v, i + word.length];
    }
    for (const constant of ["NaN", "Infinity", "-Infinity"]) {
      if (c === constant[0] && s.slice(i, i + constant.length).join("") === constant) {
        throw new StrictJSONError(`not JSON: ${constant} is not JSON (RFC 8259 has no NaN or Infinity)`);
      }
    }
    return number(i);
  };
  // CPython's _match_number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?, or Stop(i).
  const digit = (j) => j < end && s[j] >= "0" && s[j] <= "9";
  const number = (i) => {
    let j = i;
    if (s[j] === "-" && ++j >= end) throw new Stop(i);
    if (s[j] >= "1" && s[j] <= "9") while (digit(++j));
    else if (s[j] === "0") j++;
    else throw new Stop(i);
    if (j < end - 1 && s[j] === "." && digit(j + 1)) {
      j += 2;
      while (digit(j)) j++;
    }
    if (j < end - 1 && (s[j] === "e" || s[j] === "E")) {
      const e = j++;
      if (j < end - 1 && (s[j] === "-" || s[j] === "+")) j++;
      while (digit(j)) j++;
      if (!digit(j - 1)) j = e;
    }
    return [new JNumber(s.slice(i, j).join("")), j];
  };
  const object = (i) => {
    const pairs = [];
    i = skip(i);
    if (i >= end || s[i] !== "}") {
      for (;;) {
        if (i >= end || s[i] !== '"') fail("Expecting property name enclosed in double quotes", i);
        let name;
        [name, i] = string(i + 1);
        i = skip(i);
        if (i >= end || s[i] !== ":") fail("Expecting ':' delimiter", i);
        let v;
        [v, i] = value(skip(i + 1));
        pairs.push([name, v]);
        i = skip(i);
        if (i < end && s[i] === "}") break;
        if (i >= end || s[i] !== ",") fail("Expecting ',' delimiter", i);
        i = skip(i + 1);
      }
    }
    // As Python's object_pairs_hook: duplicates are refused when the object closes.
    const obj = Object.create(null);
    for (const [name, v] of pairs) {
      if (Object.prototype.hasOwnProperty.call(obj, name)) throw new StrictJSONError("duplicate name in a JSON object");
      obj[name] = v;
    }
    return [obj, i + 1];
  };
  const array = (i) => {
    const arr = [];
    i = skip(i);
    if (i >= end || s[i] !== "]") {
      for (;;) {
        let v;
        [v, i] = value(i);
        arr.push(v);
        i = skip(i);
        if (i < end && s[i] === "]") break;
        if (i >= end || s[i] !== ",") fail("Expecting ',' delimiter", i);
        i = skip(i + 1);
      }
    }
    return [arr, i + 1];
  };
  let result;
  let at;
  try {
    [result, at] = value(skip(0));
  } catch (e) {
    if (e instanceof Stop) fail("Expecting value", e.pos);
    throw e;
  }
  at = skip(at);
  if (at !== end) fail("Extra data", at);
  checkStrings(result);
  return result;
}

/** Refuse nesting beyond MAX_DEPTH before parsing (the same scan as the Python reader). */
function checkDepth(text) {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") {
      depth++;
      if (depth > MAX_DEPTH) throw new StrictJSONError(`JSON nested deeper than ${MAX_DEPTH} levels`);
    } else if (c === "]" || c === "}") depth--;
  }
}

/** No string, name or value, may hold a lone surrogate: it is not Unicode text. */
function checkStrings(v) {
  if (typeof v === "string") {
    // Raw text is well-formed UTF-8, so a surrogate here came from an escape that no pair joined.
    if (LONE_SURROGATE.test(v)) throw new StrictJSONError("a JSON string holds a lone surrogate (an escape such as \\ud800)");
  } else if (Array.isArray(v)) {
    v.forEach(checkStrings);
  } else if (v !== null && typeof v === "object" && !(v instanceof JNumber)) {
    for (const name of Object.keys(v)) {
      checkStrings(name);
      checkStrings(v[name]);
    }
  }
}

export const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof JNumber);
