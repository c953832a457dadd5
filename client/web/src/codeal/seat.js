// docs/codealing-spec.md sections 8 and 9 on a seat's device: its X25519 key for the hand,
// opening the shares sealed to it (X25519, HKDF-SHA256, ChaCha20-Poly1305 from @noble), checking
// each share's DLEQ proof and combining them into the card. Nothing here leaves the device; the
// seat's secret key is only ever passed in by the caller.
import { x25519 } from "@noble/curves/ed25519.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { chacha20poly1305 } from "@noble/ciphers/chacha.js";
import { ascii, codeForId, concat, lp, u32, validHandId } from "../spec.js";
import { decodeDeck, fail, label } from "./group.js";
import { codealSpec, decodeKeyRecords, handContext } from "./hand.js";
import { SHARE_BYTES, decodeShare, openCard, verifyShare } from "./shares.js";

export const SEALED_BYTES = 32 + SHARE_BYTES + 16;
const NONCE = new Uint8Array(12);

/** A fresh X25519 key pair for one hand: give `publicKey` to the dealer, keep `secretKey`. */
export function newSeatKey() {
  const { secretKey, publicKey } = x25519.keygen();
  return { secretKey, publicKey };
}

/** The X25519 public key of a seat's 32-byte secret key. */
export const seatPublicKey = (secretKey) => x25519.getPublicKey(secretKey);

function sealInfo(spec, handId, p, k, epk, seatPk) {
  if (!validHandId(handId)) throw fail("encoding", "hand id: hand id must be 1..64 characters of A-Z a-z 0-9 . _ : -");
  return concat(label("seal"), lp(ascii(spec.name)), lp(ascii(handId)), u32(p), u32(k), epk, seatPk);
}

/**
 * Section 9: the 128-byte share holder `holder` sealed for position `position` to this seat.
 * Raises VerificationError at step "seal" when it was not sealed for this seat, hand, position
 * and holder (or was altered), "encoding" when it is not 176 bytes. Verify the share (section 8)
 * before using it: openSeatCard does.
 */
export function openSealedShare({ deck, handId, position, holder, sealed, secretKey }) {
  const spec = codealSpec(deck);
  if (!(sealed instanceof Uint8Array) || sealed.length !== SEALED_BYTES) throw fail("encoding", `seal: a sealed share is ${SEALED_BYTES} bytes`);
  const epk = sealed.subarray(0, 32);
  const info = sealInfo(spec, handId, position, holder, epk, seatPublicKey(secretKey));
  let shared;
  try {
    shared = x25519.getSharedSecret(secretKey, epk);
  } catch {
    throw fail("seal", "the X25519 exchange gives zero: a low-order key");
  }
  if (shared.every((b) => b === 0)) throw fail("seal", "the X25519 exchange gives zero: a low-order key");
  const key = hkdf(sha256, shared, new Uint8Array(0), info, 32);
  try {
    return chacha20poly1305(key, NONCE, info).decrypt(sealed.subarray(32));
  } catch {
    throw fail("seal", `position ${position}, holder ${holder}: the sealed share does not open`);
  }
}

/**
 * What a seat needs to check shares: the hand context from the hand's key records (each proof of
 * possession checked, section 5.2) and the final deck (the last holder's shuffle record's deck,
 * or its 64 n bytes). The shuffles themselves are checked by verifyCodealHand.
 */
export function seatContext({ deck, handId, keys, finalDeck }) {
  const spec = codealSpec(deck);
  const ctx = handContext(spec, handId, decodeKeyRecords(spec, handId, keys));
  ctx.final = decodeDeck(finalDeck, spec.ids.length, "final deck").cts;
  return ctx;
}

/**
 * One card from its K shares: each share (bytes, holder order) is decoded and its DLEQ proof
 * checked against its holder's key and the final deck's ciphertext at `position` (section 8),
 * then combined. Returns { id, code }; raises VerificationError ("encoding", "share", "open").
 */
export function combineShares(ctx, position, shares) {
  if (!(Number.isInteger(position) && position >= 0 && position < ctx.final.length)) throw fail("transcript", `position ${position} is not in the deck`);
  const decoded = shares.map((s, k) => decodeShare(s, `position ${position} share ${k}`));
  const e = ctx.final[position];
  decoded.forEach((s, k) => verifyShare(ctx, position, k, e, s));
  const id = openCard(ctx, position, e, decoded);
  return { id, code: codeForId(id, ctx.spec.shoe) };
}

/** A hole card on the seat's device: open every holder's sealed share, verify them, combine. */
export function openSeatCard(ctx, position, sealedShares, secretKey) {
  const shares = sealedShares.map((sealed, holder) =>
    openSealedShare({ deck: ctx.spec.name, handId: ctx.handId, position, holder, sealed, secretKey }),
  );
  return combineShares(ctx, position, shares);
}
