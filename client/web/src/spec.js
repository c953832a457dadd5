// fairdeck-v1, written from docs/fairness-spec.md: cards and decks (section 1), the commitment
// (2), the derivation (3 to 5), and reading and verifying a transcript (6 and 7).
import { sha256 } from "@noble/hashes/sha2.js";
import { shake256 } from "@noble/hashes/sha3.js";
import { JNumber, isObject, loads, StrictJSONError } from "./strictjson.js";
import { head, length, pylist, pyrepr } from "./words.js";

export const VERSION = "fairdeck-v1";
export const SUPPORTED_VERSIONS = [VERSION];

/** A failed check: `step` is the step's stable name (docs/fairness-spec.md section 6, docs/hand-proof.md). */
export class VerificationError extends Error {
  constructor(step, detail) {
    super(`${step}: ${detail}`);
    this.step = step;
    this.detail = detail;
  }
}

// --- bytes ------------------------------------------------------------------------------------

export const ascii = (s) => Uint8Array.from(s, (c) => c.charCodeAt(0));
export const utf8 = (s) => new TextEncoder().encode(s);

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function u32(k) {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, k);
  return out;
}

export function u64(k) {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(k));
  return out;
}

/** lp(x) = u32(len(x)) || x (section 1.1). */
export const lp = (x) => concat(u32(x.length), x);

export const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

export function fromHex(h) {
  const out = new Uint8Array(h.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Byte strings equal, in time that depends only on their lengths. */
export function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

// --- cards and decks (section 1.2 and 1.3) ----------------------------------------------------

export const RANKS = "23456789TJQKA";
export const SUITS = "cdhs";
const JOKERS = ["X1", "X2"];

function standardCode(base) {
  return RANKS[base % 13] + SUITS[Math.floor(base / 13)];
}

/** The code of a card id in a deck (shoe codes carry ".D"). */
export function codeForId(id, shoe) {
  if (shoe) return `${standardCode(id % 52)}.${Math.floor(id / 52) + 1}`;
  return id < 52 ? standardCode(id) : JOKERS[id - 52];
}

/** The card id of a code, or null when it is not a code at all ("as", "As.01"). */
export function idForCode(code) {
  const j = JOKERS.indexOf(code);
  if (j >= 0) return 52 + j;
  const m = /^([2-9TJQKA])([cdhs])(?:\.([1-8]))?$/.exec(code);
  if (!m) return null;
  const base = 13 * SUITS.indexOf(m[2]) + RANKS.indexOf(m[1]);
  return m[3] === undefined ? base : 52 * (Number(m[3]) - 1) + base;
}

export const SPEC_NAMES = ["standard", "jokers", "short", ...[1, 2, 3, 4, 5, 6, 7, 8].map((n) => `shoe-${n}`)];

const specs = new Map();

/** The deck spec with this name: its card ids in canonical order, or null for an unknown one. */
export function deckSpec(name) {
  if (typeof name !== "string" || !SPEC_NAMES.includes(name)) return null;
  if (!specs.has(name)) {
    let ids;
    let shoe = false;
    if (name === "standard") ids = range(52);
    else if (name === "jokers") ids = range(54);
    else if (name === "short") ids = range(52).filter((i) => i % 13 >= RANKS.indexOf("6"));
    else {
      ids = range(52 * Number(name.slice(5)));
      shoe = true;
    }
    const n = ids.length;
    const limit = factorial(n); // n!
    const bits = (limit - 1n).toString(2).length; // B = bitlen(n! - 1)
    const width = Math.ceil(bits / 8); // w
    specs.set(name, {
      name,
      ids,
      shoe,
      idSet: new Set(ids),
      limit,
      mask: (1n << BigInt(bits)) - 1n,
      width,
      seedBytes: Math.ceil((bits + 128) / 8), // L (section 3.1)
      codes: ids.map((i) => codeForId(i, shoe)),
    });
  }
  return specs.get(name);
}

function range(n) {
  return Array.from({ length: n }, (_, i) => i);
}

function factorial(n) {
  let f = 1n;
  for (let i = 2n; i <= BigInt(n); i++) f *= i;
  return f;
}

/** Whether `code` is exactly this deck's spelling of one of its cards ("As.1" in a shoe). */
export function belongs(spec, code) {
  const id = idForCode(code);
  return id !== null && spec.idSet.has(id) && codeForId(id, spec.shoe) === code;
}

const HAND_ID = /^[A-Za-z0-9._:-]{1,64}$/;
export const validHandId = (h) => typeof h === "string" && HAND_ID.test(h);

// --- commitment and derivation (sections 2 to 5) -----------------------------------------------

/** C = SHA-256(lp(version " commit") || lp(deck) || lp(hand_id) || lp(S)) (section 2). */
export function commit(version, deck, handId, serverSeed) {
  return sha256(concat(lp(ascii(`${version} commit`)), lp(ascii(deck)), lp(ascii(handId)), lp(serverSeed)));
}

/** The dealt order (card ids, top card first) from validated inputs (sections 3 to 5). */
export function deriveDeck(version, spec, handId, serverSeed, clientSeeds) {
  const message = concat(
    lp(ascii(spec.name)),
    lp(ascii(handId)),
    lp(serverSeed),
    u32(clientSeeds.length),
    ...clientSeeds.map(lp),
  );
  const prefix = lp(ascii(`${version} stream`));
  // Section 3.2: block b is SHAKE-256(prefix || u64(b) || M) cut to 64 bytes, computed lazily.
  let buffer = new Uint8Array(0);
  let blocks = 0;
  let position = 0;
  const read = (n) => {
    while (buffer.length < position + n) {
      buffer = concat(buffer, shake256(concat(prefix, u64(blocks), message), { dkLen: 64 }));
      blocks++;
    }
    const out = buffer.subarray(position, position + n);
    position += n;
    return out;
  };
  // Section 4: attempts of w bytes, the low B bits kept, accepted when below n!.
  let r;
  for (;;) {
    r = BigInt(`0x${toHex(read(spec.width))}`) & spec.mask;
    if (r < spec.limit) break;
  }
  // Section 5: Durstenfeld's loop driven by the mixed-radix digits of r.
  const deck = spec.ids.slice();
  for (let i = deck.length - 1; i >= 1; i--) {
    const radix = BigInt(i + 1);
    const j = Number(r % radix);
    r /= radix;
    [deck[i], deck[j]] = [deck[j], deck[i]];
  }
  return deck;
}

// --- transcripts (sections 6 and 7) -------------------------------------------------------------

const KEYS = ["version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards"];
const HEX = /^(?:[0-9a-f]{2})*$/;

const malformed = (detail) => new VerificationError("malformed", detail);

/** Read a transcript's text (raw bytes) strictly: section 7.1, then 7.2. */
export function transcriptFromBytes(bytes) {
  let value;
  try {
    value = loads(bytes);
  } catch (e) {
    if (e instanceof StrictJSONError) throw malformed(e.message);
    throw e;
  }
  return transcriptFromValue(value);
}

/** Section 7.2, in its order: the version first, whatever the rest holds. */
export function transcriptFromValue(data) {
  if (!isObject(data)) throw malformed("transcript must be a JSON object");
  if (!("version" in data)) throw malformed("transcript has no 'version'");
  const version = data.version;
  if (typeof version !== "string") throw malformed("version must be a string");
  if (!SUPPORTED_VERSIONS.includes(version)) {
    const shown = length(version) <= 32 ? version : "<invalid>";
    throw new VerificationError("version", `unknown algorithm version ${pyrepr(shown)}; supported: ${SUPPORTED_VERSIONS.join(", ")}`);
  }
  const names = Object.keys(data);
  const missing = KEYS.filter((k) => !names.includes(k));
  const unknown = names.filter((k) => !KEYS.includes(k));
  if (missing.length || unknown.length) throw malformed(`transcript keys: missing ${pylist(missing)}, unknown ${pylist(unknown)}`);
  const seeds = data.client_seeds;
  if (!Array.isArray(seeds)) throw malformed("client_seeds must be a list of hex strings");
  const codes = data.cards;
  if (!Array.isArray(codes) || !codes.every((c) => typeof c === "string")) throw malformed("cards must be a list of card codes");
  if (typeof data.deck !== "string") throw malformed("deck must be a string");
  const spec = deckSpec(data.deck);
  if (!spec) {
    const shown = length(data.deck) <= 20 ? data.deck : `${head(data.deck, 20)}...`;
    throw malformed(`deck: unknown deck spec ${pyrepr(shown)}; known: ${SPEC_NAMES.join(", ")}`);
  }
  const cards = codes.map((code, position) => {
    if (!belongs(spec, code)) {
      const shown = length(code) <= 8 ? code : `${head(code, 8)}...`;
      throw malformed(`cards[${position}]: ${pyrepr(shown)} is not a card of deck ${pyrepr(spec.name)}`);
    }
    return idForCode(code);
  });
  if (typeof data.hand_id !== "string") throw malformed("hand_id must be a string");
  const hex = (v, name) => {
    if (typeof v !== "string" || !HEX.test(v)) throw malformed(`${name} must be lower-case hex with an even number of digits`);
    return fromHex(v);
  };
  return {
    version,
    deck: spec.name,
    handId: data.hand_id,
    commitment: hex(data.commitment, "commitment"),
    serverSeed: hex(data.server_seed, "server_seed"),
    clientSeeds: seeds.map((s, i) => hex(s, `client_seeds[${i}]`)),
    cards,
    codes: cards.map((id) => codeForId(id, spec.shoe)),
  };
}

/** Section 6: raise VerificationError naming the first step that fails. */
export function verifyTranscript(t) {
  const spec = deckSpec(t.deck);
  if (!validHandId(t.handId)) throw malformed("hand id must be 1..64 characters of A-Z a-z 0-9 . _ : -");
  if (t.serverSeed.length !== spec.seedBytes) {
    throw malformed(`server seed for deck ${pyrepr(spec.name)} must be ${spec.seedBytes} bytes, got ${t.serverSeed.length}`);
  }
  if (t.clientSeeds.length > 64) throw malformed(`at most 64 client seeds, got ${t.clientSeeds.length}`);
  t.clientSeeds.forEach((s, i) => {
    if (s.length < 1 || s.length > 256) throw malformed(`client_seeds[${i}]: client seed must be 1..256 bytes, got ${s.length}`);
  });
  if (t.commitment.length !== 32) throw malformed("commitment must be 32 bytes");
  if (t.cards.length !== spec.ids.length) {
    throw malformed(`deck ${pyrepr(spec.name)} has ${spec.ids.length} cards, transcript lists ${t.cards.length}`);
  }
  if (!equalBytes(commit(t.version, spec.name, t.handId, t.serverSeed), t.commitment)) {
    throw new VerificationError("commitment", "the revealed server seed does not match the published commitment");
  }
  const derived = deriveDeck(t.version, spec, t.handId, t.serverSeed, t.clientSeeds);
  if (!equalBytes(packCards(derived), packCards(t.cards))) {
    const first = derived.findIndex((id, i) => id !== t.cards[i]);
    throw new VerificationError("deck", `the dealt deck differs from the re-derived deck, first at position ${first}`);
  }
  return derived;
}

/** Card ids as 2-byte big-endian integers (the deck digest's input, docs/log-format.md). */
export function packCards(ids) {
  const out = new Uint8Array(2 * ids.length);
  ids.forEach((id, i) => {
    out[2 * i] = id >> 8;
    out[2 * i + 1] = id & 0xff;
  });
  return out;
}

export { JNumber };
