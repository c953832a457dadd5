// Strict JSON text reading: docs/fairness-spec.md section 7.1, as fairdeck.core.strictjson does it.
//
// Two verifiers must reach the same verdict on the same bytes, so nothing is left to JSON.parse
// (which keeps the last of duplicate names and accepts lone surrogates). A text is at most
// 1 MiB (counted on the raw bytes first), has no byte order mark, is valid UTF-8, nests at most
// 32 deep, and is exactly one RFC 8259 value with no duplicate name in any object and no lone
// surrogate in any string. Numbers are never converted: each becomes a JNumber holding its text.

export const MAX_TEXT_BYTES = 1 << 20;
export const MAX_DEPTH = 32;

export class StrictJSONError extends Error {}

export class JNumber {
  constructor(text) {
    this.text = text;
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The text of raw bytes, after the size, BOM and UTF-8 rules (7.1 items 1 and 2). */
export function decodeText(bytes) {
  if (bytes.length > MAX_TEXT_BYTES) throw new StrictJSONError(`the text is larger than ${MAX_TEXT_BYTES} bytes`);
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new StrictJSONError("the text starts with a byte order mark");
  }
  try {
    return utf8.decode(bytes); // fatal: invalid bytes, overlong forms and encoded surrogates throw
  } catch {
    throw new StrictJSONError("the text is not UTF-8");
  }
}

/** The JSON value of raw bytes (a Uint8Array), or StrictJSONError. */
export function loads(bytes) {
  return parseText(decodeText(bytes));
}

const WS = new Set([" ", "\t", "\n", "\r"]);
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?/y;

/** Objects are null-prototype objects (so "__proto__" is an ordinary name), arrays are arrays. */
export function parseText(text) {
  checkDepth(text);
  let at = 0;
  const fail = (why) => {
    throw new StrictJSONError(`not JSON: ${why} at character ${at}`);
  };
  const skip = () => {
    while (at < text.length && WS.has(text[at])) at++;
  };
  const string = () => {
    at++; // the opening quote
    let out = "";
    for (;;) {
      if (at >= text.length) fail("unterminated string");
      const c = text[at];
      const code = text.charCodeAt(at);
      if (c === '"') {
        at++;
        break;
      }
      if (code < 0x20) fail("a raw control character in a string");
      if (c !== "\\") {
        out += c;
        at++;
        continue;
      }
      const e = text[at + 1];
      at += 2;
      switch (e) {
        case '"': out += '"'; break;
        case "\\": out += "\\"; break;
        case "/": out += "/"; break;
        case "b": out += "\b"; break;
        case "f": out += "\f"; break;
        case "n": out += "\n"; break;
        case "r": out += "\r"; break;
        case "t": out += "\t"; break;
        case "u": {
          const hex = text.slice(at, at + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail("a bad \\u escape");
          out += String.fromCharCode(parseInt(hex, 16));
          at += 4;
          break;
        }
        default:
          fail("a bad escape");
      }
    }
    if (LONE_SURROGATE.test(out)) {
      throw new StrictJSONError("a JSON string holds a lone surrogate (an escape such as \\ud800)");
    }
    return out;
  };
  const value = () => {
    skip();
    const c = text[at];
    if (c === "{") {
      at++;
      const obj = Object.create(null);
      const names = new Set();
      skip();
      if (text[at] === "}") {
        at++;
        return obj;
      }
      for (;;) {
        skip();
        if (text[at] !== '"') fail("a name is expected");
        const name = string();
        skip();
        if (text[at] !== ":") fail("':' is expected");
        at++;
        const v = value();
        if (names.has(name)) throw new StrictJSONError("duplicate name in a JSON object");
        names.add(name);
        obj[name] = v;
        skip();
        if (text[at] === ",") {
          at++;
          continue;
        }
        if (text[at] === "}") {
          at++;
          return obj;
        }
        fail("',' or '}' is expected");
      }
    }
    if (c === "[") {
      at++;
      const arr = [];
      skip();
      if (text[at] === "]") {
        at++;
        return arr;
      }
      for (;;) {
        arr.push(value());
        skip();
        if (text[at] === ",") {
          at++;
          continue;
        }
        if (text[at] === "]") {
          at++;
          return arr;
        }
        fail("',' or ']' is expected");
      }
    }
    if (c === '"') return string();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]]) {
      if (text.startsWith(word, at)) {
        at += word.length;
        return v;
      }
    }
    NUMBER.lastIndex = at;
    const m = NUMBER.exec(text);
    if (m) {
      at += m[0].length;
      return new JNumber(m[0]);
    }
    return fail(at >= text.length ? "unexpected end of text" : "unexpected character");
  };
  const result = value();
  skip();
  if (at !== text.length) fail("extra data after the value");
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

export const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof JNumber);
