// The co-dealt mode's verifier and seat side (docs/codealing-spec.md), as the package exports it.
import { VerificationError, fromHex } from "../spec.js";
import { V, cardPoint, generators, hashToPoint, le32 } from "./group.js";
import { CODEAL_STEPS, codealSpec, permutation, randomness, seedCommitment, shufflerClientSeed, verifyCodealHand } from "./hand.js";
import { checkSeals, combineShares, newSeatKey, openSealedShare, openSeatCard, sealRelease, sealStatement, seatContext, seatPublicKey, seatReleases } from "./seat.js";
import { HandSeat, SeatStateError } from "./handseat.js";

export { CODEAL_STEPS, verifyCodealHand };
export { newSeatKey, seatPublicKey, openSealedShare, seatContext, combineShares, openSeatCard, checkSeals, sealStatement, sealRelease, seatReleases } from "./seat.js";
export { HandSeat, SeatStateError } from "./handseat.js";
export const CODEAL_VERSION = V;

const HEX = /^(?:[0-9a-f]{2})*$/;
const bytesOf = (h) => (typeof h === "string" && HEX.test(h) ? fromHex(h) : h);

/**
 * A co-dealt hand as the vectors write it (docs/vectors/fairdeck-codeal-v1.json "hands"): deck,
 * hand_id, keys, shuffles, dealt [{position, card (id), shares}], seeds (null while the hand is
 * played), bytes as lower-case hex. A field that is not hex is passed on as it is, for the
 * verifier's step "encoding" to reject.
 */
export function codealHandFromVector(v) {
  return {
    deck: v.deck,
    handId: v.hand_id,
    keys: v.keys.map(bytesOf),
    shuffles: v.shuffles.map(bytesOf),
    dealt: v.dealt.map((d) => ({ position: d.position, card: d.card, shares: d.shares.map(bytesOf) })),
    seeds: v.seeds === null || v.seeds === undefined ? null : v.seeds.map(bytesOf),
  };
}

/**
 * "OK: co-dealt hand H verified (...)" or "FAILED at step STEP: DETAIL": the line for a hand, as
 * the Python reference's checks word it. Raises what is not a VerificationError.
 */
export function codealLine(hand) {
  try {
    const r = verifyCodealHand(hand);
    const seeds = r.final ? "the seeds re-derive every shuffle" : "seeds not revealed yet";
    return `OK: co-dealt hand ${hand.handId} verified (${hand.deck}, ${r.holders} key holders, ${r.opened.length} cards opened, ${seeds})`;
  } catch (e) {
    if (e instanceof VerificationError) return `FAILED at step ${e.step}: ${e.detail}`;
    throw e;
  }
}

/** The building blocks the known-answer vectors pin (test/codeal-vectors.mjs, the page's window.fairdeck.codeal). */
export const vectorApi = {
  verifyCodealHand,
  codealHandFromVector,
  codealLine,
  openSealedShare,
  newSeatKey,
  seatPublicKey,
  seatContext,
  combineShares,
  openSeatCard,
  checkSeals,
  sealStatement,
  sealRelease,
  seatReleases,
  HandSeat,
  SeatStateError,
  cardPoint,
  generators,
  hashToPoint,
  le32,
  shufflerClientSeed,
  seedCommitment: (deck, handId, k, seed) => seedCommitment(codealSpec(deck), handId, k, seed),
  permutation: (deck, handId, k, seed) => permutation(codealSpec(deck), handId, k, seed),
  randomness: (deck, handId, k, seed) => randomness(codealSpec(deck), handId, k, seed),
};
