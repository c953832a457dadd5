// The transparency log, written from docs/log-format.md and docs/witness.md: entries, RFC 9162
// inclusion proofs, C2SP signed notes and checkpoints under one log key or a list of them (the
// keys of a rotation), C2SP tlog-cosignature (cosignature/v1) witness policies, and receipts.
// Hand proofs are in handproof.js, tlog-proof texts in tlogproof.js, tlog-policy files in policy.js.
import { ed25519 } from "@noble/curves/ed25519.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { ascii, concat, equalBytes, packCards, utf8, validHandId, SUPPORTED_VERSIONS, SPEC_NAMES } from "./spec.js";
import { JNumber, isObject, loads, StrictJSONError } from "./strictjson.js";
import { head, pylist, pyrepr } from "./words.js";

export class LogError extends Error {}

const MAX_U64 = (1n << 64n) - 1n;

// --- base64 (RFC 4648 section 4, canonical only) ------------------------------------------------

/** Standard base64 with padding that re-encodes to the same text; null otherwise. */
export function b64decode(text) {
  if (typeof text !== "string" || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  let bin;
  try {
    bin = atob(text);
  } catch {
    return null;
  }
  const raw = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  return b64encode(raw) === text ? raw : null;
}

export const b64encode = (raw) => btoa(Array.from(raw, (b) => String.fromCharCode(b)).join(""));

/**
 * Whether Python's base64.b64decode(text, validate=True) decodes `text` (canonical or not): the
 * alphabet with at most two "=" at the end, and padding that completes the last group.
 */
export function b64valid(text) {
  const m = /^([A-Za-z0-9+/]*)(={0,2})$/.exec(text);
  if (!m) return false;
  const rest = m[1].length % 4;
  const pads = m[2].length;
  return rest === 0 || (rest === 2 && pads === 2) || (rest === 3 && pads >= 1);
}

// --- entries (docs/log-format.md, "Entries" and "Parsing") --------------------------------------

/** Parse one entry strictly; LogError names the rule broken. */
export function decodeEntry(data) {
  let pos = 0;
  const take = (n) => {
    if (pos + n > data.length) throw new LogError("log entry is truncated");
    const out = data.subarray(pos, pos + n);
    pos += n;
    return out;
  };
  const int = (n) => take(n).reduce((acc, b) => acc * 256n + BigInt(b), 0n);
  const field = () => take(Number(int(4)));
  const text = () => {
    const raw = field();
    if (raw.some((b) => b > 0x7f)) throw new LogError("log entry text field is not ASCII");
    return String.fromCharCode(...raw);
  };
  const handId = () => {
    const h = text();
    if (!validHandId(h)) throw new LogError("log entry hand id is not 1..64 of A-Z a-z 0-9 . _ : -");
    return h;
  };
  const digest = (value, what) => {
    if (value.length !== 32) throw new LogError(`log entry ${what} is ${value.length} bytes, want 32`);
    return value;
  };
  if (!equalBytes(take(4), ascii("FDL1"))) throw new LogError("log entry has an unknown format (magic)");
  const kind = Number(int(1));
  let entry;
  if (kind === 1) {
    const timeMs = int(8);
    const hand = handId();
    const version = text();
    const deck = text();
    if (!SUPPORTED_VERSIONS.includes(version)) throw new LogError("commit entry names an unknown algorithm version");
    if (!SPEC_NAMES.includes(deck)) throw new LogError("commit entry names an unknown deck spec");
    entry = { type: "commit", timeMs, handId: hand, version, deck, commitment: digest(field(), "commitment") };
  } else if (kind === 2) {
    const timeMs = int(8);
    const hand = handId();
    const outcome = Number(int(1));
    const serverSeed = field();
    if (outcome !== 1 && outcome !== 2) throw new LogError(`reveal entry has unknown outcome ${outcome}`);
    const count = int(4);
    if (count > 64n) throw new LogError(`reveal entry has ${count} client seeds, at most 64`);
    const clientSeeds = [];
    for (let i = 0n; i < count; i++) clientSeeds.push(field());
    if (clientSeeds.some((s) => s.length < 1 || s.length > 256)) {
      throw new LogError("reveal entry has a client seed outside 1..256 bytes");
    }
    entry = { type: "reveal", timeMs, handId: hand, outcome, serverSeed, clientSeeds, deckDigest: digest(field(), "deck digest") };
  } else {
    throw new LogError(`log entry has unknown type ${kind}`);
  }
  if (pos !== data.length) throw new LogError("log entry has trailing bytes");
  return entry;
}

/** SHA-256 over the whole derived deck as 2-byte big-endian card ids. */
export const deckDigest = (ids) => sha256(packCards(ids));

// --- the tree (RFC 9162 section 2.1) -------------------------------------------------------------

export const leafHash = (entry) => sha256(concat(Uint8Array.of(0), entry));
const nodeHash = (l, r) => sha256(concat(Uint8Array.of(1), l, r));
const bitLength = (x) => (x === 0n ? 0 : x.toString(2).length);
const bitCount = (x) => x.toString(2).split("1").length - 1;

/** The number of hashes in the inclusion proof of leaf `index` of a tree of `size` (index < size). */
export function inclusionProofLength(index, size) {
  const inner = bitLength(index ^ (size - 1n));
  return inner + bitCount(index >> BigInt(inner));
}

/** RFC 9162 section 2.1.3.2: `leaf` is leaf `index` (BigInt) of the tree of `size` whose hash is `root`. */
export function verifyInclusion(index, size, leaf, proof, root) {
  if (index >= size) throw new LogError(`leaf index ${index} is not below the tree size ${size}`);
  const want = inclusionProofLength(index, size);
  if (proof.length !== want) {
    throw new LogError(`inclusion proof has ${proof.length} hashes, want ${want} for leaf ${index} of a tree of ${size}`);
  }
  if (leaf.length !== 32 || root.length !== 32 || proof.some((p) => p.length !== 32)) {
    throw new LogError("every hash of a proof is 32 bytes");
  }
  let fn = index;
  let sn = size - 1n;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) throw new LogError("inclusion proof is too long");
    if (fn & 1n || fn === sn) {
      r = nodeHash(p, r);
      if (!(fn & 1n)) {
        while (!(fn & 1n || fn === 0n)) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new LogError("inclusion proof is too short");
  if (!equalBytes(r, root)) throw new LogError("inclusion proof does not lead to the root: computed root differs");
}

// --- signed notes (C2SP signed-note) ---------------------------------------------------------------

const SIG_PREFIX = "\u2014 "; // em dash, space
const MAX_NOTE_BYTES = 128 * 1024;
const MAX_SIGNATURES = 100;
const NOTE_CONTROL = /[\x00-\x09\x0b-\x1f]/;
// What Python's str.isspace() calls a space (the reference reader's rule for key names).
export const SPACE = /[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const hex8 = (n) => n.toString(16).padStart(8, "0");

/** signed-note, "Verifier keys": a key name is non-empty UTF-8 (no lone surrogate), has no "+" and no space. */
export function validKeyName(name) {
  return (
    typeof name === "string" &&
    name.length > 0 &&
    !name.includes("+") &&
    !SPACE.test(name) &&
    !NOTE_CONTROL.test(name) &&
    !LONE_SURROGATE.test(name)
  );
}

function keyId(name, type, publicKey) {
  const d = sha256(concat(utf8(name), Uint8Array.of(0x0a, type), publicKey));
  return ((d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3]) >>> 0;
}

function partition(s, sep) {
  const i = s.indexOf(sep);
  return i < 0 ? [s, ""] : [s.slice(0, i), s.slice(i + sep.length)];
}

const byte = (b) => `0x${b.toString(16).padStart(2, "0")}`;

/**
 * A verifier key `name+hash+base64(type || 32-byte key)`: type 0x01 for a log's Ed25519 key
 * (signed-note), 0x04 for a witness's cosignature/v1 key (tlog-cosignature, "Format"). A key that
 * is not valid is a LogError in the words of the Python reader (Verifier.parse,
 * CosignatureVerifier.parse), so the page and `fairdeck verify` refuse it alike.
 */
export function parseVerifierKey(vkey, type = 0x01) {
  const kind = type === 0x01 ? "verifier" : "witness verifier";
  if (typeof vkey !== "string") throw new LogError(`a ${kind} key is a string`);
  const [name, rest] = partition(vkey, "+");
  const [hash16, key64] = partition(rest, "+");
  if (!validKeyName(name)) throw new LogError(`malformed ${kind} key: invalid key name ${pyrepr(name)}`);
  if (!/^[0-9a-f]{8}$/.test(hash16)) throw new LogError(`malformed ${kind} key: the key hash must be 8 lowercase hex digits`);
  const raw = b64decode(key64);
  if (!raw || raw.length === 0) throw new LogError(`malformed ${kind} key: the key is not canonical base64`);
  if (raw[0] !== type) {
    throw new LogError(
      type === 0x01
        ? `unsupported verifier key type ${byte(raw[0])}: only Ed25519 (0x01)`
        : `witness verifier key has type ${byte(raw[0])}, want ${byte(type)} (cosignature/v1)`,
    );
  }
  if (raw.length !== 33) throw new LogError(`malformed ${kind} key: an Ed25519 key is 32 bytes`);
  const publicKey = raw.subarray(1);
  const id = keyId(name, type, publicKey);
  if (parseInt(hash16, 16) !== id) throw new LogError(`${kind} key hash ${hash16} does not match the key`);
  return { name, keyId: id, publicKey, text: vkey };
}

/**
 * The log keys of a text as `fairdeck verify --key @FILE` reads a key file: one key a line, blank
 * lines and lines starting with "#" skipped; here keys may also share a line, separated by spaces
 * (a key holds none). A key that is not valid is a LogError that says which one; no key at all
 * gives an empty list.
 */
export function parseKeyList(text) {
  const keys = String(text)
    .split(/\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]/)
    .map((line) => line.split(SPACE).filter(Boolean))
    .filter((words) => words.length && !words[0].startsWith("#"))
    .flat();
  return keys.map((k, i) => {
    try {
      return parseVerifierKey(k);
    } catch (e) {
      if (!(e instanceof LogError) || keys.length === 1) throw e;
      throw new LogError(`log key ${i + 1} of the ${keys.length} given (${pyrepr(head(k, 40))}): ${e.message}`);
    }
  });
}

/** Ed25519 (RFC 8032), strict: noble's zip215=false, as RFC 8032 and FIPS 186-5 read it. */
const ed25519Verify = (sig, msg, pub) => {
  try {
    return sig.length === 64 && ed25519.verify(sig, msg, pub, { zip215: false });
  } catch {
    return false;
  }
};

/** Split a note into its text and signature lines; LogError unless it is well formed. */
function splitNote(msg) {
  if (msg.length > MAX_NOTE_BYTES) throw new LogError(`note is larger than ${MAX_NOTE_BYTES} bytes`);
  let whole;
  try {
    whole = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(msg);
  } catch {
    throw new LogError("note is not valid UTF-8");
  }
  const m = NOTE_CONTROL.exec(whole);
  if (m) throw new LogError(`note contains the control character U+${m[0].charCodeAt(0).toString(16).padStart(4, "0").toUpperCase()}`);
  const split = whole.lastIndexOf("\n\n");
  if (split < 0) throw new LogError("no blank line between the text and the signatures");
  const text = whole.slice(0, split + 1);
  const block = whole.slice(split + 2);
  if (!block) throw new LogError("note has no signature lines");
  if (!block.endsWith("\n")) throw new LogError("the last signature line does not end in a newline");
  return { text, lines: block.slice(0, -1).split("\n") };
}

/**
 * signed-note, "Signatures": the note's text, if a known key signed it. `verifiers` is one key or
 * a list (a log's keys across a rotation, every one used): each known key's first line must
 * verify, and at least one must be there. `signedBy` lists the keys that signed, in line order.
 */
export function openNote(msg, verifiers) {
  const known = new Map(); // "name+keyid" -> the distinct keys given under it
  for (const v of Array.isArray(verifiers) ? verifiers : [verifiers]) {
    const id = `${v.name}+${hex8(v.keyId)}`;
    const same = known.get(id) ?? [];
    if (!same.some((k) => equalBytes(k.publicKey, v.publicKey))) same.push(v);
    known.set(id, same);
  }
  const { text, lines } = splitNote(msg);
  const body = utf8(text);
  const signedBy = [];
  const seen = new Set();
  const unverified = new Map(); // line -> "name+keyid", each line once
  lines.forEach((line, i) => {
    const number = i + 1;
    if (number > MAX_SIGNATURES) throw new LogError(`note has more than ${MAX_SIGNATURES} signatures`);
    if (!line.startsWith(SIG_PREFIX)) throw new LogError(`signature line ${number} does not start with an em dash and a space`);
    const [name, sig64] = partition(line.slice(SIG_PREFIX.length), " ");
    if (!validKeyName(name)) throw new LogError(`signature line ${number} has an invalid key name`);
    const raw = b64decode(sig64);
    if (raw === null) throw new LogError(`signature line ${number} is not canonical base64`);
    if (raw.length < 5) throw new LogError(`signature line ${number} is too short`);
    const id = `${name}+${hex8(((raw[0] << 24) | (raw[1] << 16) | (raw[2] << 8) | raw[3]) >>> 0)}`;
    const candidates = known.get(id);
    if (candidates === undefined) {
      // An unknown key's line (even one sharing a name or an ID with a known key): ignored, named once.
      if (!unverified.has(line)) unverified.set(line, id);
      return;
    }
    if (candidates.length > 1) throw new LogError(`ambiguous key ${id}: two known keys share that name and ID`);
    if (seen.has(id)) return; // only a known key's first signature counts
    seen.add(id);
    if (!ed25519Verify(raw.subarray(4), body, candidates[0].publicKey)) throw new LogError(`invalid signature by known key ${id}`);
    signedBy.push(candidates[0]);
  });
  if (!signedBy.length) {
    const keys = [...unverified.values()].join(", ") || "nobody";
    throw new LogError(`note has no signature by a known key (signed by: ${keys})`);
  }
  return { text, lines, signedBy };
}

// --- checkpoints (C2SP tlog-checkpoint) -------------------------------------------------------------

const DECIMAL = /^(?:0|[1-9][0-9]{0,19})$/;

export function parseCheckpoint(text) {
  if (!text.endsWith("\n")) throw new LogError("checkpoint text must end in a newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3) throw new LogError(`checkpoint has ${lines.length} lines, want origin, size and root hash`);
  lines.forEach((line, i) => {
    if (!line) throw new LogError(`checkpoint line ${i + 1} is empty`);
  });
  const [origin, sizeText, rootText] = lines;
  if (!DECIMAL.test(sizeText)) throw new LogError(`tree size ${pyrepr(head(sizeText, 24))} is not a canonical decimal number`);
  const size = BigInt(sizeText);
  if (size > MAX_U64) throw new LogError(`tree size ${sizeText} is beyond 2**64-1`);
  if (!b64valid(rootText)) throw new LogError("root hash is not valid base64");
  const root = b64decode(rootText);
  if (root === null) throw new LogError("root hash is not canonical base64");
  if (root.length !== 32) throw new LogError(`root hash is ${root.length} bytes, want 32`);
  // The origin and extension lines hold no control character (a note's reader refuses them before
  // this; a tlog-proof's checkpoint is read before its signature is checked).
  const extensions = lines.slice(3);
  for (const [what, line] of [["origin", origin], ...extensions.map((l) => ["extension line", l])]) {
    const m = /[\x00-\x1f]/.exec(line);
    if (m) throw new LogError(`${what} contains the control character U+${m[0].charCodeAt(0).toString(16).padStart(4, "0").toUpperCase()}`);
  }
  return { origin, size, root, extensions };
}

/**
 * The checkpoint of a signed note, if the log's key (one, or any of a list: the keys of a rotation)
 * signed it and its origin is the name of the (first) key. `signedBy`: the keys that signed.
 */
export function openCheckpoint(msg, verifiers) {
  const keys = Array.isArray(verifiers) ? verifiers : [verifiers];
  if (!keys.length) throw new TypeError("no log key given");
  let opened;
  try {
    opened = openNote(msg, keys);
  } catch (e) {
    if (e instanceof LogError) throw new LogError(`checkpoint note: ${e.message}`);
    throw e;
  }
  const cp = parseCheckpoint(opened.text);
  if (cp.origin !== keys[0].name) {
    throw new LogError(`checkpoint is for origin ${pyrepr(cp.origin)}, want ${pyrepr(keys[0].name)}`);
  }
  return { ...cp, signedBy: opened.signedBy };
}

// --- witness cosignatures (C2SP tlog-cosignature, cosignature/v1) ------------------------------------

const MAX_TIMESTAMP = (1n << 63n) - 1n;

/**
 * A policy: named witness keys (a Map from the label reports use to the key) and either a
 * threshold (that many distinct witnesses must cosign) or a tlog-policy quorum (policy.js): a
 * witness `{ name }`, or a group `{ name, k, members }` of which at least k must be met.
 */
export function makePolicy(witnesses, threshold, quorum = null) {
  if (quorum === null && (!Number.isInteger(threshold) || threshold < 1 || threshold > witnesses.size)) {
    throw new LogError(`witness threshold ${threshold} must be between 1 and the ${witnesses.size} witnesses named`);
  }
  const ids = new Set([...witnesses.values()].map((v) => `${v.name}+${v.keyId}`));
  if (ids.size !== witnesses.size) throw new LogError("two witnesses of the policy share one key");
  return { witnesses, threshold: quorum === null ? threshold : 0, quorum };
}

/** Whether the witnesses in `signed` (a Set of names) meet the quorum (tlog-policy). */
export function quorumMet(q, signed) {
  if (!q.members) return signed.has(q.name);
  return q.members.filter((m) => quorumMet(m, signed)).length >= q.k;
}

/** A quorum in words: "X1", "2 of (X1, X2, 1 of (Y1))". */
export function describeQuorum(q) {
  return q.members ? `${q.k} of (${q.members.map(describeQuorum).join(", ")})` : q.name;
}

/** A policy from "NAME=KEY" lines and a threshold (default: all of them). */
export function parsePolicy(specs, threshold = null) {
  const witnesses = new Map();
  for (const spec of specs) {
    const [name, vkey] = partition(spec, "=");
    if (!spec.includes("=") || !name) throw new LogError(`a witness is NAME=KEY, got ${pyrepr(head(spec, 80))}`);
    if (witnesses.has(name)) throw new LogError(`witness ${pyrepr(name)} is named twice`);
    witnesses.set(name, parseVerifierKey(vkey, 0x04));
  }
  return makePolicy(witnesses, threshold === null ? witnesses.size : threshold);
}

/** Which witnesses of the policy validly cosigned the (already opened) note; LogError for a bad one. */
export function checkPolicy(policy, msg) {
  const { text, lines } = splitNote(msg);
  const byKey = new Map([...policy.witnesses].map(([label, v]) => [`${v.name}+${v.keyId}`, label]));
  const timestamps = new Map();
  for (const line of lines) {
    const [name, sig64] = partition(line.startsWith(SIG_PREFIX) ? line.slice(SIG_PREFIX.length) : line, " ");
    const raw = b64decode(sig64);
    if (raw === null || raw.length < 4) continue;
    const kid = ((raw[0] << 24) | (raw[1] << 16) | (raw[2] << 8) | raw[3]) >>> 0;
    const label = byKey.get(`${name}+${kid}`);
    if (label === undefined || timestamps.has(label)) continue; // unknown key, or a second line
    if (raw.length !== 4 + 8 + 64) throw new LogError("a cosignature/v1 line holds 76 bytes of canonical base64");
    const timestamp = raw.subarray(4, 12).reduce((acc, b) => acc * 256n + BigInt(b), 0n);
    if (timestamp > MAX_TIMESTAMP) throw new LogError("cosignature timestamp exceeds 2**63-1");
    const v = policy.witnesses.get(label);
    // tlog-cosignature, "Ed25519 signed message": header, time line, then the checkpoint text.
    const message = concat(utf8("cosignature/v1\n"), utf8(`time ${timestamp}\n`), utf8(text));
    if (!ed25519Verify(raw.subarray(12), message, v.publicKey)) {
      throw new LogError(`invalid cosignature by witness ${label} (${v.text})`);
    }
    timestamps.set(label, timestamp);
  }
  const labels = [...policy.witnesses.keys()];
  const signed = labels.filter((l) => timestamps.has(l));
  const missing = labels.filter((l) => !timestamps.has(l));
  const quorum = policy.quorum ?? null;
  const ok = quorum ? quorumMet(quorum, new Set(signed)) : signed.length >= policy.threshold;
  return { threshold: policy.threshold, quorum, signed, missing, timestamps, ok };
}

/** A policy's verdict on a checkpoint, in the words of the Python verifier (PolicyResult.describe). */
export function describePolicy(result) {
  const signed = result.signed.join(", ") || "none";
  const missing = result.missing.join(", ") || "none";
  const verdict = result.ok ? "meets" : "does not meet";
  if (result.quorum) {
    return (
      `checkpoint is cosigned by ${result.signed.length} of the policy's witnesses, which ${verdict} ` +
      `its quorum ${describeQuorum(result.quorum)}: signed by ${signed}; missing ${missing}`
    );
  }
  return (
    `checkpoint has ${result.signed.length} of the ${result.threshold} witness cosignatures required ` +
    `(${verdict} the policy): signed by ${signed}; missing ${missing}`
  );
}

// --- receipts (docs/log-format.md, "The receipt") -------------------------------------------------------

const RECEIPT_NAMES = ["index", "tree_size", "hashes", "entry", "signed_checkpoint"];
const UINT = /^(?:0|[1-9][0-9]{0,19})$/;

/** A receipt from its strict JSON value (numbers still as their text). */
export function receiptFromValue(d) {
  const fail = (why) => new LogError(`malformed inclusion proof: ${why}`);
  if (!isObject(d) || Object.keys(d).length !== 5 || !RECEIPT_NAMES.every((k) => k in d)) {
    throw fail(`want an object with exactly ${pylist(RECEIPT_NAMES)}`);
  }
  if (!Array.isArray(d.hashes)) throw fail("hashes must be a list");
  if (typeof d.signed_checkpoint !== "string") throw fail("signed_checkpoint must be a string");
  const b64 = (v, name) => {
    const raw = typeof v === "string" ? b64decode(v) : null;
    if (raw === null) throw fail(`${name} must be canonical standard base64`);
    return raw;
  };
  const hashes = d.hashes.map((h, i) => b64(h, `hashes[${i}]`));
  hashes.forEach((h, i) => {
    if (h.length !== 32) throw fail(`hashes[${i}] is ${h.length} bytes, want 32`);
  });
  const uint = (v, name) => {
    const text = v instanceof JNumber ? v.text : null;
    if (text === null || !UINT.test(text)) throw fail(`${name} must be an integer written in plain digits`);
    const n = BigInt(text);
    if (n > MAX_U64) throw fail(`${name} is beyond 2**64-1`);
    return n;
  };
  return {
    index: uint(d.index, "index"),
    treeSize: uint(d.tree_size, "tree_size"),
    hashes,
    entry: b64(d.entry, "entry"),
    signedCheckpoint: utf8(d.signed_checkpoint),
  };
}

/** A receipt's text, read strictly and checked (docs/log-format.md, "The receipt", steps 1 to 5). */
export function verifyReceiptText(bytes, verifier, policy = null) {
  let value;
  try {
    value = loads(bytes);
  } catch (e) {
    if (e instanceof StrictJSONError) throw new LogError(`malformed inclusion proof: ${e.message}`);
    throw e;
  }
  const r = receiptFromValue(value);
  const cp = openCheckpoint(r.signedCheckpoint, verifier);
  if (policy) {
    const result = checkPolicy(policy, r.signedCheckpoint);
    if (!result.ok) throw new LogError(describePolicy(result));
  }
  if (cp.size !== r.treeSize) throw new LogError(`proof is for tree size ${r.treeSize}, the checkpoint signs ${cp.size}`);
  verifyInclusion(r.index, cp.size, leafHash(r.entry), r.hashes, cp.root);
  return { receipt: r, checkpoint: cp, entry: decodeEntry(r.entry) };
}
