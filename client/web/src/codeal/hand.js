// docs/codealing-spec.md section 10, from its text: the verifier of a whole co-dealt hand, with
// the key records (5.2), the hand context (5.3), the seed commitment, permutation and randomness
// (6.1 to 6.3), the shuffle records and their signatures (6.5). It stops at the first failure and
// names the step: encoding, key, transcript, shuffle, share, open, seed. Every check carries the
// number of the spec step it implements.
import { shake256 } from "@noble/hashes/sha3.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { isBytes } from "../bytes.js";
import { VerificationError, ascii, concat, deckSpec, deriveDeck, equalBytes, lp, u32, validHandId, SPEC_NAMES } from "../spec.js";
import { pyrepr } from "../words.js";
import {
  L,
  MAX_HOLDERS,
  MIN_HOLDERS,
  Point,
  Sum,
  V,
  batchWeights,
  decodeDeck,
  decodePoint,
  decodeScalar,
  fail,
  hs,
  initialDeck,
  label,
  le,
  mul,
  mulBase,
} from "./group.js";
import { decodeProof, proofBytes, shuffleChallenges, shuffleTerms, shuffleWeights, verifyShuffle } from "./proof.js";
import { decodeShare, openCard, shareTerms, shareWeights, sharesHold, verifyShare } from "./shares.js";

export const KEY_RECORD_BYTES = 128;
/** 4 + 64 n + 32 (5 n + 9) + 64: a shuffle record's length (section 6.5). */
export const recordBytes = (n) => 4 + 64 * n + proofBytes(n) + 64;
/** The steps of section 10, in order. */
export const CODEAL_STEPS = ["encoding", "key", "transcript", "shuffle", "share", "open", "seed"];

/** The deck spec of a co-dealt hand, or VerificationError("encoding"). */
export function codealSpec(name) {
  const spec = deckSpec(name);
  if (!spec) {
    const shown = typeof name !== "string" ? null : name.length <= 20 ? name : `${name.slice(0, 20)}...`;
    if (shown === null) throw fail("encoding", `deck: deck spec must be a string, got ${typeof name}`);
    throw fail("encoding", `deck: unknown deck spec ${pyrepr(shown)}; known: ${SPEC_NAMES.join(", ")}`);
  }
  return spec;
}

/** lp(deck) || lp(hand_id), after checking the hand id (fairness spec section 3.1). */
export function head(spec, handId) {
  if (!validHandId(handId)) throw fail("encoding", "hand id: hand id must be 1..64 characters of A-Z a-z 0-9 . _ : -");
  return concat(lp(ascii(spec.name)), lp(ascii(handId)));
}

/** key record = enc(Y_k) || enc(T_k) || le32(s_k) || C_k (section 5.2). */
export function decodeKeyRecord(bytes, k) {
  if (!isBytes(bytes) || bytes.length !== KEY_RECORD_BYTES) throw fail("encoding", `key record ${k}: ${KEY_RECORD_BYTES} bytes`);
  return {
    key: decodePoint(bytes.subarray(0, 32), `key record ${k} Y`),
    t: decodePoint(bytes.subarray(32, 64), `key record ${k} T`),
    s: decodeScalar(bytes.subarray(64, 96), `key record ${k} s`),
    keyBytes: bytes.subarray(0, 32),
    tBytes: bytes.subarray(32, 64),
    commitment: bytes.subarray(96, 128),
  };
}

/** shuffle record = u32(k) || enc(D_{k+1}) || proof || enc(T) || le32(s) (section 6.5). */
function decodeShuffleRecord(bytes, n, i) {
  if (!isBytes(bytes) || bytes.length !== recordBytes(n)) throw fail("encoding", `shuffle record ${i}: ${recordBytes(n)} bytes for ${n} cards`);
  const k = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0);
  const end = 4 + 64 * n + proofBytes(n);
  return {
    k,
    deck: decodeDeck(bytes.subarray(4, 4 + 64 * n), n, `shuffle record ${i} deck`),
    proof: decodeProof(bytes.subarray(4 + 64 * n, end), n, k),
    t: decodePoint(bytes.subarray(end, end + 32), `shuffle record ${i} T`),
    s: decodeScalar(bytes.subarray(end + 32), `shuffle record ${i} s`),
  };
}

/** Section 5.2: s_k * B = T_k + e * Y_k. */
function verifyKeyRecord(spec, handId, k, r) {
  const e = hs(concat(label("key"), head(spec, handId), u32(k), lp(r.keyBytes), lp(r.commitment), lp(r.tBytes)));
  if (!mulBase(r.s).equals(r.t.add(mul(e, r.key)))) throw fail("key", `holder ${k}: the proof of possession of its key does not verify`);
}

/** The key records of a hand (bytes each), decoded and each proof of possession checked (5.2). */
export function decodeKeyRecords(spec, handId, keys) {
  if (!(keys.length >= MIN_HOLDERS && keys.length <= MAX_HOLDERS)) throw fail("encoding", `a hand has ${MIN_HOLDERS} to ${MAX_HOLDERS} key holders, not ${keys.length}`);
  const records = keys.map((bytes, k) => decodeKeyRecord(bytes, k));
  head(spec, handId);
  records.forEach((r, k) => verifyKeyRecord(spec, handId, k, r));
  return records;
}

/** Section 5.3: the hand context's bytes and the joint key; keys pairwise distinct, joint key not the identity. */
export function handContext(spec, handId, records) {
  const bytes = concat(
    lp(ascii(V)),
    head(spec, handId),
    u32(records.length),
    ...records.map((r) => r.keyBytes),
    ...records.map((r) => r.commitment),
  );
  const seen = new Set(records.map((r) => r.keyBytes.join(",")));
  if (seen.size !== records.length) throw fail("key", "two key holders have the same key");
  const jointKey = records.reduce((a, r) => a.add(r.key), Point.ZERO);
  if (jointKey.is0()) throw fail("key", "the joint key is the identity");
  return { spec, handId, bytes, keys: records.map((r) => r.key), commitments: records.map((r) => r.commitment), jointKey };
}

/** Section 6.5: the record is holder k's own, s * B = T + e * Y_k. */
function verifySignature(ctx, before, r, recordBytesIn) {
  const n = before.cts.length;
  const proof = recordBytesIn.subarray(4 + 64 * n, 4 + 64 * n + proofBytes(n));
  const tBytes = recordBytesIn.subarray(4 + 64 * n + proofBytes(n), 4 + 64 * n + proofBytes(n) + 32);
  const e = hs(concat(label("shuffle signature"), ctx.bytes, u32(r.k), lp(before.bytes), lp(r.deck.bytes), lp(proof), lp(tBytes)));
  if (!mulBase(r.s).equals(r.t.add(mul(e, ctx.keys[r.k])))) throw fail("shuffle", `step ${r.k}: the shuffle record is not signed by holder ${r.k}`);
}

/** Section 6.4, freshness: output c1 pairwise distinct, none equal to an input c1. */
function checkFresh(before, after, k) {
  const key = (e) => e.bytes.subarray(0, 32).join(",");
  const outputs = new Set(after.cts.map(key));
  if (outputs.size !== after.cts.length) throw fail("shuffle", `step ${k}: two output ciphertexts share c1 (reused randomness)`);
  if (before.cts.some((e) => outputs.has(key(e)))) throw fail("shuffle", `step ${k}: an output c1 equals an input c1 (no re-encryption)`);
}

// --- seeds (section 6) -----------------------------------------------------------------------

const seedHead = (spec, handId, k, name) => concat(label(name), lp(ascii(spec.name)), lp(ascii(handId)), u32(k));

/** C_k = SHA-256(lp(V " seed") || lp(deck) || lp(hand_id) || u32(k) || lp(S_k)) (section 6.2). */
export const seedCommitment = (spec, handId, k, seed) => sha256(concat(seedHead(spec, handId, k, "seed"), lp(seed)));

/** The one client seed of holder k's derivation: ASCII(V " shuffler") || u32(k). */
export const shufflerClientSeed = (k) => concat(ascii(`${V} shuffler`), u32(k));

/** psi_k: output position i takes input position psi_k[i] (section 6.3). */
export function permutation(spec, handId, k, seed) {
  const index = new Map(spec.ids.map((id, i) => [id, i]));
  return deriveDeck("fairdeck-v1", spec, handId, seed, [shufflerClientSeed(k)]).map((id) => index.get(id));
}

/** r_k,i for i = 0..n-1 (section 6.3). */
export function randomness(spec, handId, k, seed) {
  const prefix = concat(seedHead(spec, handId, k, "reencrypt"), lp(seed));
  return spec.ids.map((_, i) => le(shake256(concat(prefix, u32(i)), { dkLen: 64 })) % L);
}

/** Step 10.7's checks of holder k's seed that come before its re-encryption, in order: its psi_k and r_k,i. */
function seedDerivation(ctx, handId, k, seed) {
  const { spec } = ctx;
  if (!isBytes(seed) || seed.length !== spec.seedBytes) throw fail("seed", `holder ${k}: a seed for deck '${spec.name}' is ${spec.seedBytes} bytes`);
  if (!equalBytes(seedCommitment(spec, handId, k, seed), ctx.commitments[k])) throw fail("seed", `holder ${k}: the seed does not open its commitment`);
  const psi = permutation(spec, handId, k, seed);
  const rs = randomness(spec, handId, k, seed);
  if (rs.some((r) => r === 0n)) throw fail("seed", `holder ${k}: the seed derives a zero randomness`);
  return { psi, rs };
}

/** How many weights seedTerms takes for a deck of n cards. */
const seedWeights = (n) => 2 * n;

/**
 * 10.7: re-doing the shuffle of 6.4 from `before` with psi and r gives exactly `after`, as terms
 * of one equation in a batch (section 10) added to `sum`: after[i] - before[psi(i)] = (r_i B, r_i Y)
 * for every i, with weights w_2i and w_2i+1.
 */
function seedTerms(sum, w, ctx, before, after, { psi, rs }) {
  let baseCoef = 0n;
  let keyCoef = 0n;
  psi.forEach((j, i) => {
    const [rho, sigma] = [w[2 * i], w[2 * i + 1]];
    baseCoef -= rho * rs[i];
    keyCoef -= sigma * rs[i];
    sum.add(rho, after[i].c1);
    sum.add(-rho, before[j].c1);
    sum.add(sigma, after[i].c2);
    sum.add(-sigma, before[j].c2);
  });
  sum.add(baseCoef, Point.BASE);
  sum.add(keyCoef, ctx.jointKey);
}

/**
 * Step 10.7. `held`: holder k -> its seed's derivation, for the seeds whose re-encryption was
 * found to hold in verifyCodealHand's batch (derivedSeeds ran their checks before it, which held).
 */
function verifySeeds(ctx, hand, decks, held) {
  const { spec } = ctx;
  const seeds = hand.seeds;
  // 10.7 seed: one seed per holder, each of the length of 6.1, opening C_k, deriving no zero r.
  if (seeds.length !== ctx.keys.length) throw fail("seed", `${seeds.length} seeds for ${ctx.keys.length} holders`);
  const psis = [];
  seeds.forEach((seed, k) => {
    const derived = held.get(k) ?? seedDerivation(ctx, hand.handId, k, seed);
    if (!held.has(k)) {
      // 10.7: re-doing the shuffle of 6.4 gives exactly the published D_{k+1}: one equation in a batch.
      const w = batchWeights("seed", [ctx.bytes, u32(k), seed, decks[k].bytes, decks[k + 1].bytes], seedWeights(derived.psi.length));
      const sum = new Sum();
      seedTerms(sum, w, ctx, decks[k].cts, decks[k + 1].cts, derived);
      if (!sum.isZero()) throw fail("seed", `holder ${k}: the seed does not re-derive its published shuffle`);
    }
    psis.push(derived.psi);
  });
  // 10.7: each dealt card is the card the composed permutations put at its position.
  const order = finalOrder(spec, psis);
  for (const d of hand.dealt) {
    if (order[d.position] !== d.card) throw fail("seed", `position ${d.position}: the seeds put card ${order[d.position]} there`);
  }
  return order;
}

/** The seeds that pass 10.7's checks before their re-encryption: holder k -> its derivation. */
function derivedSeeds(ctx, hand) {
  const out = new Map();
  const seeds = hand.seeds;
  if (!Array.isArray(seeds) || seeds.length !== ctx.keys.length) return out;
  seeds.forEach((seed, k) => {
    try {
      out.set(k, seedDerivation(ctx, hand.handId, k, seed));
    } catch (e) {
      if (!(e instanceof VerificationError)) throw e;
    }
  });
  return out;
}

/**
 * Whether every equation of 10.4 (each proof of shuffle), 10.5 (each share) and 10.7 (the
 * re-encryption of each seed in `seeded`) holds, as one equation in a batch (section 10) with
 * weights from every byte they are computed from. A point that several of them hold (the decks
 * between shuffles, B, the keys) is multiplied once. When it holds, those steps skip their own
 * checks of these equations; when it does not, they check them, to name the first that fails.
 */
function handHolds(ctx, hand, decks, shuffles, dealt, seeded) {
  const n = decks[0].cts.length;
  const parts = [
    ctx.bytes,
    ...hand.shuffles,
    ...dealt.flatMap((d) => d.shares.map((share) => concat(u32(d.position), d.e.bytes, share.bytes))),
    ...[...seeded.keys()].map((k) => concat(u32(k), hand.seeds[k])),
  ];
  const count = shuffles.length * shuffleWeights(n) + shareWeights(dealt) + seeded.size * seedWeights(n);
  const w = batchWeights("hand", parts, count);
  let at = 0;
  const next = (m) => w.slice(at, (at += m));
  const sum = new Sum();
  shuffles.forEach((r, k) => {
    const challenges = shuffleChallenges(ctx, k, decks[k], r.deck, r.proof);
    shuffleTerms(sum, next(shuffleWeights(n)), ctx, decks[k], r.deck, r.proof, challenges);
  });
  shareTerms(sum, next(shareWeights(dealt)), ctx, dealt);
  for (const [k, derived] of seeded) seedTerms(sum, next(seedWeights(n)), ctx, decks[k].cts, decks[k + 1].cts, derived);
  return sum.isZero();
}

/** Card ids of the final deck: position i holds canonical psi_0(psi_1(...psi_{K-1}(i))). */
export function finalOrder(spec, psis) {
  return spec.ids.map((_, i) => spec.ids[psis.reduceRight((j, psi) => psi[j], i)]);
}

/**
 * Steps 10.1 to 10.7 over a co-dealt hand: {deck, handId, keys, shuffles, dealt: [{position, card,
 * shares}], seeds} (bytes as Uint8Array, card as a card id; seeds null while the hand is played).
 * Returns {holders, final: card ids of the final deck or null without seeds, opened: card ids};
 * raises VerificationError at the first step that fails. `onStep(step)` is told of each step held.
 */
export function verifyCodealHand(hand, onStep = () => {}) {
  // 10.1 encoding: the deck spec, the hand id, 2..16 holders, every record's exact bytes.
  const spec = codealSpec(hand.deck);
  const n = spec.ids.length;
  const holders = hand.keys.length;
  if (!(holders >= MIN_HOLDERS && holders <= MAX_HOLDERS)) throw fail("encoding", `a hand has ${MIN_HOLDERS} to ${MAX_HOLDERS} key holders, not ${holders}`);
  const records = hand.keys.map((bytes, k) => decodeKeyRecord(bytes, k));
  const shuffles = hand.shuffles.map((bytes, i) => decodeShuffleRecord(bytes, n, i));
  const dealt = hand.dealt.map((d) => ({ ...d, decoded: d.shares.map((s, k) => decodeShare(s, `position ${d.position} share ${k}`)) }));
  head(spec, hand.handId);
  onStep("encoding");
  // 10.2 key: each proof of possession; distinct keys; a joint key that is not the identity.
  records.forEach((r, k) => verifyKeyRecord(spec, hand.handId, k, r));
  const ctx = handContext(spec, hand.handId, records);
  onStep("key");
  // 10.3 transcript: one shuffle per holder in order; distinct dealt positions below n; K shares each.
  if (shuffles.length !== holders || shuffles.some((r, i) => r.k !== i)) throw fail("transcript", `want one shuffle per holder in order 0..${holders - 1}`);
  const positions = dealt.map((d) => d.position);
  if (new Set(positions).size !== positions.length || !positions.every((p) => Number.isInteger(p) && p >= 0 && p < n)) {
    throw fail("transcript", `dealt positions must be distinct and in 0..${n - 1}`);
  }
  for (const d of dealt) if (d.decoded.length !== holders) throw fail("transcript", `position ${d.position}: ${d.decoded.length} shares for ${holders} holders`);
  onStep("transcript");
  // Every equation of 10.4, 10.5 and 10.7 at once; each step below checks its own only where these fail.
  const decks = [initialDeck(spec), ...shuffles.map((r) => r.deck)];
  const final = decks[holders].cts;
  const batch = dealt.map((d) => ({ position: d.position, e: final[d.position], shares: d.decoded }));
  const seeded = derivedSeeds(ctx, hand);
  const held = handHolds(ctx, hand, decks, shuffles, batch, seeded);
  // 10.4 shuffle: for k in order, freshness (6.4), the proof of shuffle (7.4), the signature (6.5).
  shuffles.forEach((r, k) => {
    checkFresh(decks[k], r.deck, k);
    verifyShuffle(ctx, k, decks[k], r.deck, r.proof, held);
    verifySignature(ctx, decks[k], r, hand.shuffles[k]);
  });
  onStep("shuffle");
  // 10.5 share and 10.6 open, position by position in the order given.
  const allHold = held || sharesHold(ctx, batch);
  const opened = [];
  for (const d of dealt) {
    if (!allHold) d.decoded.forEach((s, k) => verifyShare(ctx, d.position, k, final[d.position], s));
    const card = openCard(ctx, d.position, final[d.position], d.decoded);
    if (card !== d.card) throw fail("open", `position ${d.position}: the shares open card ${card}, not ${d.card}`);
    opened.push(card);
  }
  if (!allHold) throw fail("share", "a share fails its DLEQ proof");
  onStep("share");
  onStep("open");
  if (hand.seeds === null || hand.seeds === undefined) return { holders, final: null, opened };
  const order = verifySeeds(ctx, hand, decks, held ? seeded : new Map());
  onStep("seed");
  return { holders, final: order, opened };
}
