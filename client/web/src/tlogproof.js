// A receipt as a C2SP tlog-proof text (https://c2sp.org/tlog-proof, the draft of C2SP main, commit
// ab17a74), read exactly as the Python reader (fairdeck.log.tlog_proof) reads it, in its words:
//
//   c2sp.org/tlog-proof@v1
//   extra <the log entry, base64>       (optional in the draft; a fairdeck receipt requires it)
//   index <N>                           (decimal, no leading zero, below 2**64)
//   <the audit path, one base64 hash a line>
//   (an empty line)
//   <the signed checkpoint note, verbatim>
//
// The tree size is the checkpoint's. Nothing is trusted here: the checkpoint's signature, the
// audit path and the entry are checked by the hand proof's steps (handproof.js).
import { utf8 } from "./spec.js";
import { LogError, b64decode, parseCheckpoint } from "./log.js";

export const HEADER = "c2sp.org/tlog-proof@v1";
const MAX_CHARS = 256 * 1024;
const INDEX = /^index (0|[1-9][0-9]{0,19})$/;
const MAX_U64 = (1n << 64n) - 1n;

const fail = (why) => new LogError(`malformed tlog-proof: ${why}`);

/** Whether a string is longer than `n` characters, counted as Python counts them (code points). */
function longer(text, n) {
  if (text.length <= n) return false;
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // A surrogate pair is one character; strictjson admits no lone surrogate.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    if (++count > n) return true;
  }
  return false;
}

function b64(text, what) {
  const raw = b64decode(text);
  if (raw === null) throw fail(`${what} is not canonical standard base64`);
  return raw;
}

/**
 * A receipt `{ index, treeSize, hashes, entry, signedCheckpoint }` from a tlog-proof text (a string,
 * as a format-2 hand proof holds it); LogError ("malformed tlog-proof: ...") unless well formed.
 */
export function parseTlogProof(text) {
  if (longer(text, MAX_CHARS)) throw fail(`larger than ${MAX_CHARS} bytes`);
  const split = text.indexOf("\n\n");
  if (split < 0) throw fail("no empty line before the checkpoint");
  const note = text.slice(split + 2);
  const lines = text.slice(0, split).split("\n");
  if (lines[0] !== HEADER) throw fail(`the first line must be ${HEADER}`);
  if (lines.length < 3 || !lines[1].startsWith("extra ")) throw fail("a fairdeck receipt has an extra line holding its log entry");
  const entry = b64(lines[1].slice("extra ".length), "the extra line");
  const m = INDEX.exec(lines[2]);
  if (m === null) throw fail("the third line must be `index N` (decimal, no leading zero)");
  const index = BigInt(m[1]);
  if (index > MAX_U64) throw fail("the index is beyond 2**64-1");
  const hashes = lines.slice(3).map((line, i) => {
    const h = b64(line, `proof hash ${i + 1}`);
    if (h.length !== 32) throw fail(`proof hash ${i + 1} is ${h.length} bytes, want 32`);
    return h;
  });
  const at = note.indexOf("\n\n");
  let size;
  try {
    size = parseCheckpoint(`${at < 0 ? note : note.slice(0, at)}\n`).size;
  } catch (e) {
    if (e instanceof LogError) throw fail(`the checkpoint: ${e.message}`);
    throw e;
  }
  return { index, treeSize: size, hashes, entry, signedCheckpoint: utf8(note) };
}
