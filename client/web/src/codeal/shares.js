// docs/codealing-spec.md section 8: a decryption share with its Chaum-Pedersen (DLEQ) proof, and
// opening a card from one share per key holder. Used by the verifier of a whole hand and by a
// seat's device, which verifies the shares it opened before combining them.
import { isBytes } from "../bytes.js";
import { concat, lp, toHex, u32 } from "../spec.js";
import { Point, Sum, batchWeights, cardPoint, decodePoint, decodeScalar, fail, hs, label, mul, mulBase } from "./group.js";

export const SHARE_BYTES = 128;

/** share = enc(D_k) || enc(A) || enc(A') || le32(z). */
export function decodeShare(bytes, what) {
  if (!isBytes(bytes) || bytes.length !== SHARE_BYTES) throw fail("encoding", `${what}: a share is ${SHARE_BYTES} bytes`);
  return {
    bytes,
    d: decodePoint(bytes.subarray(0, 32), `${what} D`),
    a: decodePoint(bytes.subarray(32, 64), `${what} A`),
    aPrime: decodePoint(bytes.subarray(64, 96), `${what} A'`),
    z: decodeScalar(bytes.subarray(96, 128), `${what} z`),
  };
}

/** e = Hs(lp(V " share") || ctx || u32(p) || u32(k) || lp(enc(c1) || enc(c2)) || lp(enc(D)) || lp(enc(A)) || lp(enc(A'))). */
function challenge(ctx, p, k, e, share) {
  const b = share.bytes;
  return hs(concat(label("share"), ctx.bytes, u32(p), u32(k), lp(e.bytes), lp(b.subarray(0, 32)), lp(b.subarray(32, 64)), lp(b.subarray(64, 96))));
}

/**
 * Step 10.5 for holder k's share of the ciphertext e = {c1, c2, bytes} at final position p:
 * z * B = A + e * Y_k and z * c1 = A' + e * D_k.
 */
export function verifyShare(ctx, p, k, e, share) {
  if (!(k >= 0 && k < ctx.keys.length)) throw fail("share", `position ${p}: no holder ${k}`);
  const c = challenge(ctx, p, k, e, share);
  if (!mulBase(share.z).equals(share.a.add(mul(c, ctx.keys[k])))) {
    throw fail("share", `position ${p}, holder ${k}: the DLEQ proof fails against the key`);
  }
  if (!mul(share.z, e.c1).equals(share.aPrime.add(mul(c, share.d)))) {
    throw fail("share", `position ${p}, holder ${k}: the DLEQ proof fails against the ciphertext`);
  }
}

/**
 * Whether every share of `dealt` ([{position, e, shares}], shares in holder order) verifies, as
 * one equation in a batch (section 10): true means each would pass verifyShare; false means at
 * least one fails (the caller then checks them one by one, to name it).
 */
export function sharesHold(ctx, dealt) {
  const parts = [ctx.bytes, ...dealt.flatMap((d) => d.shares.map((share) => concat(u32(d.position), d.e.bytes, share.bytes)))];
  const sum = new Sum();
  shareTerms(sum, batchWeights("shares", parts, shareWeights(dealt)), ctx, dealt);
  return sum.isZero();
}

/** How many weights shareTerms takes for `dealt`. */
export const shareWeights = (dealt) => 2 * dealt.reduce((a, d) => a + d.shares.length, 0);

/** The equations of step 10.5 for every share of `dealt`, with weights `w`, added to `sum`. */
export function shareTerms(sum, w, ctx, dealt) {
  let j = 0;
  for (const d of dealt) {
    d.shares.forEach((share, k) => {
      const c = challenge(ctx, d.position, k, d.e, share);
      const [rho, sigma] = [w[2 * j], w[2 * j + 1]];
      j++;
      // rho (z B - A - c Y_k) + sigma (z c1 - A' - c D) = 0
      sum.add(rho * share.z, Point.BASE);
      sum.add(-rho * c, ctx.keys[k]);
      sum.add(-rho, share.a);
      sum.add(-sigma, share.aPrime);
      sum.add(sigma * share.z, d.e.c1);
      sum.add(-sigma * c, share.d);
    });
  }
}

/** Step 10.6: M = c2 - (D_0 + ... + D_{K-1}), and the card id whose point M is, of this deck spec. */
export function openCard(ctx, p, e, shares) {
  if (shares.length !== ctx.keys.length) throw fail("transcript", `position ${p}: ${shares.length} shares for ${ctx.keys.length} holders`);
  let m = e.c2;
  for (const s of shares) m = m.subtract(s.d);
  const id = cardIds(ctx.spec).get(toHex(m.toBytes()));
  if (id !== undefined) return id;
  throw fail("open", `position ${p}: the shares open to no card of deck '${ctx.spec.name}'`);
}

const byPoint = new Map();
/** Card point (hex) to card id, for one deck spec. */
function cardIds(spec) {
  if (!byPoint.has(spec.name)) byPoint.set(spec.name, new Map(spec.ids.map((id) => [toHex(cardPoint(id).toBytes()), id])));
  return byPoint.get(spec.name);
}
