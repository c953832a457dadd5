// docs/codealing-spec.md section 7: the proof of shuffle's bytes (7.3) and CheckProof (7.4), the
// Terelius-Wikström check as Haenni et al. write it, on ristretto255 written additively. Indices
// here are 0-based: the spec's i is i + 1. Both challenges are recomputed from the bytes received
// and hash the whole statement (section 5.4).
import { sha512 } from "@noble/hashes/sha2.js";
import { concat, lp, u32 } from "../spec.js";
import { L, Point, Sum, batchWeights, decodePoint, decodeScalar, fail, generators, hs, label, msm, mul, mulAdd, mulBase } from "./group.js";

/** 32 (5N + 9): the length of the proof of a deck of N cards. */
export const proofBytes = (n) => 32 * (5 * n + 9);

/** Section 7.3: points c_1..c_N, C^_1..C^_N, t1, t2, t3, t4,1, t4,2, t^_1..t^_N, then scalars. */
export function decodeProof(bytes, n, k) {
  if (bytes.length !== proofBytes(n)) throw fail("encoding", `shuffle ${k}: a proof for ${n} cards is ${proofBytes(n)} bytes`);
  const word = (i) => bytes.subarray(32 * i, 32 * i + 32);
  const pts = [];
  for (let i = 0; i < 3 * n + 5; i++) pts.push(decodePoint(word(i), `shuffle ${k} proof point ${i}`));
  const scs = [];
  for (let i = 0; i < 2 * n + 4; i++) scs.push(decodeScalar(word(3 * n + 5 + i), `shuffle ${k} proof scalar ${i}`));
  return {
    bytes,
    commitments: pts.slice(0, n),
    chain: pts.slice(n, 2 * n),
    t: pts.slice(2 * n, 2 * n + 5), // t1, t2, t3, t4,1, t4,2
    tHat: pts.slice(2 * n + 5),
    s: scs.slice(0, 4), // s1, s2, s3, s4
    sHat: scs.slice(4, 4 + n),
    sPrime: scs.slice(4 + n),
  };
}

const T_NAMES = ["t1", "t2", "t3", "t4,1", "t4,2"];

/**
 * The challenges of step k's proof of shuffle (section 7.4), recomputed from the bytes received:
 * u_1..u_N and c, with the generators h = G_0 and h_1..h_N.
 */
export function shuffleChallenges(ctx, k, before, after, proof) {
  const n = before.cts.length;
  const g = generators(n);
  const statement = concat(ctx.bytes, u32(k), lp(before.bytes), lp(after.bytes));
  // u_i = Hs(U || u32(i)), U = SHA-512(lp(V " shuffle u") || ctx || u32(k) || lp(e) || lp(e') || lp(c_1..c_N)).
  const U = sha512(concat(label("shuffle u"), statement, lp(proof.bytes.subarray(0, 32 * n))));
  const u = [];
  for (let i = 1; i <= n; i++) u.push(hs(concat(U, u32(i))));
  // c = Hs(lp(V " shuffle challenge") || ctx || u32(k) || lp(e) || lp(e') || lp(c_*) || lp(C^_*) || lp(t1) ... lp(t4,2) || lp(t^_*)).
  const c = hs(
    concat(
      label("shuffle challenge"),
      statement,
      lp(proof.bytes.subarray(0, 32 * n)),
      lp(proof.bytes.subarray(32 * n, 64 * n)),
      ...[0, 1, 2, 3, 4].map((j) => lp(proof.bytes.subarray(32 * (2 * n + j), 32 * (2 * n + j + 1)))),
      lp(proof.bytes.subarray(32 * (2 * n + 5), 32 * (3 * n + 5))),
    ),
  );
  return { u, c, h: g[0], hs1: g.slice(1) };
}

/**
 * CheckProof (section 7.4) of step k: `after` is a re-encryption of a permutation of `before`
 * under the joint key. `ctx` is the hand context (section 5.3): {bytes, jointKey}. Raises
 * VerificationError("shuffle") naming the first equation that fails. `held`: the caller already
 * found every equation of this proof holding, in a batch of its own (verifyCodealHand's).
 */
export function verifyShuffle(ctx, k, before, after, proof, held = false) {
  if (held) return;
  const n = before.cts.length;
  const Y = ctx.jointKey;
  const { u, c, h, hs1 } = shuffleChallenges(ctx, k, before, after, proof);
  const w = batchWeights("shuffle", [ctx.bytes, u32(k), lp(before.bytes), lp(after.bytes), lp(proof.bytes)], shuffleWeights(n));
  const batch = new Sum();
  shuffleTerms(batch, w, ctx, before, after, proof, { u, c, h, hs1 });
  if (batch.isZero()) return;
  // Some equation fails: check each in the spec's order, to name it.
  const negC = (L - c) % L;
  const sum = (points) => points.reduce((a, p) => a.add(p), Point.ZERO);
  const cBar = sum(proof.commitments).subtract(sum(hs1));
  const uProduct = u.reduce((a, x) => (a * x) % L, 1n);
  const cHat = proof.chain[n - 1].subtract(mul(uProduct, h));
  const [s1, s2, s3, s4] = proof.s;
  const expected = [
    () => mulBase(s1).add(mul(negC, cBar)),
    () => mulBase(s2).add(mul(negC, cHat)),
    () => mulBase(s3).add(msm(proof.sPrime, hs1)).add(mul(negC, msm(u, proof.commitments))),
    () => msm(proof.sPrime, after.cts.map((e) => e.c2)).subtract(mul(s4, Y)).add(mul(negC, msm(u, before.cts.map((e) => e.c2)))),
    () => msm(proof.sPrime, after.cts.map((e) => e.c1)).subtract(mulBase(s4)).add(mul(negC, msm(u, before.cts.map((e) => e.c1)))),
  ];
  for (let j = 0; j < 5; j++) {
    if (!proof.t[j].equals(expected[j]())) throw fail("shuffle", `step ${k}: the proof of shuffle fails at ${T_NAMES[j]}`);
  }
  let previous = h;
  for (let i = 0; i < n; i++) {
    const want = mulBase(proof.sHat[i]).add(mulAdd([proof.sPrime[i], negC], [previous, proof.chain[i]]));
    if (!proof.tHat[i].equals(want)) throw fail("shuffle", `step ${k}: the proof of shuffle fails at t^_${i + 1}`);
    previous = proof.chain[i];
  }
  throw fail("shuffle", `step ${k}: the proof of shuffle fails`);
}

/** How many weights shuffleTerms takes for a deck of n cards. */
export const shuffleWeights = (n) => 5 + n;

/**
 * Every equation of section 7.4, as terms of one equation in a batch (docs/codealing-spec.md
 * section 10) added to `sum`: the five with weights w_1..w_5 and each t^_i with weight w_{5+i},
 * over every point of the statement and the proof; the last argument is shuffleChallenges' result.
 */
export function shuffleTerms(sum, w, ctx, before, after, proof, { u, c, h, hs1 }) {
  const n = u.length;
  const [w1, w2, w3, w4, w5] = w;
  const rho = w.slice(5, 5 + n);
  const [s1, s2, s3, s4] = proof.s;
  const uProduct = u.reduce((a, x) => (a * x) % L, 1n);
  const term = (s, p) => sum.add(s, p);
  // B and Y.
  term(w1 * s1 + w2 * s2 + w3 * s3 - w5 * s4 + rho.reduce((a, r, i) => a + r * proof.sHat[i], 0n), Point.BASE);
  term(-w4 * s4, ctx.jointKey);
  for (let i = 0; i < n; i++) {
    term(-c * (w1 + w3 * u[i]), proof.commitments[i]); // c_i, in c_bar and c~
    term(w1 * c + w3 * proof.sPrime[i], hs1[i]); // h_i, in c_bar and t3
    term(w4 * proof.sPrime[i], after.cts[i].c2);
    term(w5 * proof.sPrime[i], after.cts[i].c1);
    term(-w4 * c * u[i], before.cts[i].c2);
    term(-w5 * c * u[i], before.cts[i].c1);
    term(-rho[i], proof.tHat[i]);
  }
  // h = C^_0: in C^ of t2, and in t^_1.
  term(w2 * c * uProduct + rho[0] * proof.sPrime[0], h);
  for (let j = 1; j <= n; j++) {
    // C^_j: in t^_j (- c C^_j) and in t^_{j+1} (s'_{j+1} C^_j); C^_N also in C^ of t2.
    term(-c * rho[j - 1] + (j < n ? rho[j] * proof.sPrime[j] : -w2 * c), proof.chain[j - 1]);
  }
  for (let j = 0; j < 5; j++) term(-w[j], proof.t[j]);
}
