// docs/codealing-spec.md sections 1 to 4, from its text: ristretto255 points and scalars with
// strict decoding, Hs, the labels, hash to point (cards and generators), and ciphertexts.
// Every group operation is @noble/curves' ristretto255; this module adds no field or point
// arithmetic of its own. Values from outside become points or scalars only through decodePoint
// and decodeScalar, which reject what section 2 rejects (and, for points, the identity).
import { ristretto255, ristretto255_hasher } from "@noble/curves/ed25519.js";
import { mulAddUnsafe, pippenger } from "@noble/curves/abstract/curve.js";
import { sha512 } from "@noble/hashes/sha2.js";
import { isBytes } from "../bytes.js";
import { VerificationError, ascii, concat, lp, u32 } from "../spec.js";

export const Point = ristretto255.Point;
/** The prime order of ristretto255 (section 1). */
export const L = 2n ** 252n + 27742317777372353535851937790883648493n;
/** The version of docs/codealing-spec.md: every hash input starts with a label made of it. */
export const V = "fairdeck-codeal-v1";
export const DST_CARD = `${V}-card-ristretto255_XMD:SHA-512_R255MAP_RO_`;
export const DST_GEN = `${V}-generator-ristretto255_XMD:SHA-512_R255MAP_RO_`;
export const MIN_HOLDERS = 2;
export const MAX_HOLDERS = 16;

/** A failed check at a named step of section 10 (or "seal", section 9). */
export const fail = (step, detail) => new VerificationError(step, detail);

/** lp(V || " " || name): the first field of every hash input. */
export const label = (name) => lp(ascii(`${V} ${name}`));

/** LE(x): the unsigned integer of little-endian bytes. */
export function le(bytes) {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i]);
  return n;
}

/** le32(s): a scalar as 32 bytes little-endian. */
export function le32(s) {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++, s >>= 8n) out[i] = Number(s & 0xffn);
  return out;
}

export const mod = (a) => ((a % L) + L) % L;

/** Hs(x) = LE(SHA-512(x)) mod L. */
export const hs = (bytes) => le(sha512(bytes)) % L;

const isZero = (b) => b.every((x) => x === 0);

/** Section 2.1: 32 bytes, RFC 9496 Decode accepts them, and not the identity. */
export function decodePoint(bytes, what) {
  if (!isBytes(bytes) || bytes.length !== 32) throw fail("encoding", `${what}: a point is 32 bytes`);
  let p;
  try {
    p = Point.fromBytes(bytes);
  } catch {
    throw fail("encoding", `${what}: not a canonical ristretto255 encoding`);
  }
  if (isZero(bytes)) throw fail("encoding", `${what}: the identity is not allowed here`);
  return p;
}

/** Section 2.2: 32 bytes little-endian, below L (zero allowed). */
export function decodeScalar(bytes, what) {
  if (!isBytes(bytes) || bytes.length !== 32) throw fail("encoding", `${what}: a scalar is 32 bytes`);
  const s = le(bytes);
  if (s >= L) throw fail("encoding", `${what}: scalar not reduced below L`);
  return s;
}

/** s * P for public values (variable time: a verifier holds no secret). */
export const mul = (s, p) => p.multiplyUnsafe(s);
/** s * B. */
export const mulBase = (s) => Point.BASE.multiplyUnsafe(s);
/** The sum of scalars[i] * points[i]. */
export const msm = (scalars, points) => pippenger(Point, points, scalars);
/** The same for a few terms (scalars below L): one walk of doublings for all of them. */
export const mulAdd = (scalars, points) => mulAddUnsafe(Point, points, scalars);

/** H2P(msg, DST): RFC 9380 hash_to_ristretto255 (section 3). */
export const hashToPoint = (msg, dst) => ristretto255_hasher.hashToCurve(msg, { DST: dst });

const cardCache = new Map();
/** P_c = H2P(u32(c), DST_card). */
export function cardPoint(id) {
  if (!cardCache.has(id)) cardCache.set(id, hashToPoint(u32(id), DST_CARD));
  return cardCache.get(id);
}

const gens = [];
/** G_0 .. G_n: h, then h_1 .. h_n of the proof of shuffle. */
export function generators(n) {
  while (gens.length <= n) gens.push(hashToPoint(u32(gens.length), DST_GEN));
  return gens.slice(0, n + 1);
}

/** enc(P_1, ..., P_m). */
export const encodePoints = (points) => concat(...points.map((p) => p.toBytes()));

/**
 * A deck (section 4.2): {cts, bytes}, cts an array of {c1, c2, bytes} where bytes are the
 * ciphertext's 64 bytes as received (canonical, so equal points have equal bytes); decodeDeck
 * checks the exact length and decodes every point.
 */
export function decodeDeck(bytes, n, what) {
  if (bytes.length !== 64 * n) throw fail("encoding", `${what}: a deck of ${n} cards is ${64 * n} bytes`);
  const deck = [];
  for (let i = 0; i < n; i++) {
    const at = 64 * i;
    deck.push({
      c1: decodePoint(bytes.subarray(at, at + 32), `${what} position ${i} c1`),
      c2: decodePoint(bytes.subarray(at + 32, at + 64), `${what} position ${i} c2`),
      bytes: bytes.subarray(at, at + 64),
    });
  }
  return { cts: deck, bytes };
}

/** D_0: the deck spec's canonical order, each card under randomness 0 (section 4.3). */
const initialDecks = new Map();
export function initialDeck(spec) {
  if (!initialDecks.has(spec.name)) {
    const cts = spec.ids.map((id) => {
      const bytes = concat(new Uint8Array(32), cardPoint(id).toBytes());
      return { c1: Point.ZERO, c2: cardPoint(id), bytes };
    });
    initialDecks.set(spec.name, { cts, bytes: concat(...cts.map((e) => e.bytes)) });
  }
  return initialDecks.get(spec.name);
}

/**
 * Weights for checking many equations at once: w_i = the first 16 bytes, little-endian, of
 * SHA-512(SHA-512(lp(V " batch " tag) || parts) || u32(i)), a 128-bit integer. They are computed
 * from every value the equations hold, after all of them are fixed, so a set of equations that do
 * not all hold sums to the identity with probability about 2^-128 per try (docs/codealing-spec.md
 * section 10, "Checking equations in a batch").
 */
export function batchWeights(tag, parts, count) {
  const seed = sha512(concat(label(`batch ${tag}`), ...parts));
  const out = [];
  for (let i = 0; i < count; i++) out.push(le(sha512(concat(seed, u32(i))).subarray(0, 16)));
  return out;
}

const SHORT = 1n << 130n;
/** Below this many terms, @noble/curves' interleaved wNAF (mulAddUnsafe) beats its pippenger. */
const FEW = 64;

/**
 * Whether sum scalars[i] * points[i] is the identity. A short scalar's sign goes to its point, so
 * it stays short. The short terms (the batch weights, 128 bits) go through @noble/curves'
 * interleaved wNAF (mulAddUnsafe), whose walk is as long as the longest scalar it gets; the long
 * ones through its pippenger, whose windows span every bit of L whatever the scalars (or wNAF too
 * where they are few).
 */
export function sumIsZero(scalars, points) {
  const short = { ss: [], ps: [] };
  const long = { ss: [], ps: [] };
  scalars.forEach((s, i) => {
    if (s === 0n || points[i] === Point.ZERO) return; // the initial deck's c1: adds nothing
    if (s < SHORT && s > -SHORT) {
      short.ss.push(s < 0n ? -s : s);
      short.ps.push(s < 0n ? points[i].negate() : points[i]);
    } else {
      long.ss.push(mod(s));
      long.ps.push(points[i]);
    }
  });
  if (short.ss.length >= FEW) {
    // Many: noble's pippenger costs a short term what it costs a long one, and one pippenger
    // over both sums its buckets and doubles once.
    long.ss.push(...short.ss);
    long.ps.push(...short.ps);
    short.ss = [];
    short.ps = [];
  }
  const sum = (t) => (t.ss.length < FEW ? mulAddUnsafe(Point, t.ps, t.ss) : msm(t.ss, t.ps));
  return sum(short).add(sum(long)).is0();
}

/**
 * The terms of one equation in a batch, sum s_i * P_i = 0 (section 10, "Checking equations in a
 * batch"): terms on the same point (the same object: a deck's ciphertext that two shuffles and a
 * seed hold, B, a holder's key) are merged, so that each point is multiplied once.
 */
export class Sum {
  constructor() {
    this.at = new Map();
    this.scalars = [];
    this.points = [];
  }

  add(s, p) {
    const i = this.at.get(p);
    if (i !== undefined) {
      this.scalars[i] += s;
      return;
    }
    this.at.set(p, this.points.length);
    this.points.push(p);
    this.scalars.push(s);
  }

  /** Whether the sum is the identity. */
  isZero() {
    return sumIsZero(this.scalars, this.points);
  }
}
