// docs/codealing-spec.md sections 8 and 9 on a seat's device: its X25519 key for the hand,
// checking that every co-dealer signed (under the identity key the player pinned) that it sealed
// the position to this seat's own key (9.2: the dealer relays seat keys and could pass its own),
// opening the shares sealed to it (X25519, HKDF-SHA256, ChaCha20-Poly1305 from @noble), checking
// each share's DLEQ proof and combining them into the card. Nothing here leaves the device; the
// seat's secret key is only ever passed in by the caller.
import { ed25519, x25519 } from "@noble/curves/ed25519.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { chacha20poly1305 } from "@noble/ciphers/chacha.js";
import { isBytes } from "../bytes.js";
import { ascii, codeForId, concat, lp, u32, validHandId } from "../spec.js";
import { decodeDeck, fail, label } from "./group.js";
import { codealSpec, decodeKeyRecords, handContext } from "./hand.js";
import { SHARE_BYTES, decodeShare, openCard, verifyShare } from "./shares.js";

export const SEALED_BYTES = 32 + SHARE_BYTES + 16;
const NONCE = new Uint8Array(12);

/** What `x` is, for a refusal: "array", a typed array's or a buffer's own type name, else its typeof. */
function kindOf(x) {
  if (x === null) return "null";
  if (Array.isArray(x)) return "array";
  const tag = Object.prototype.toString.call(x).slice(8, -1);
  return ArrayBuffer.isView(x) || tag === "ArrayBuffer" || tag === "SharedArrayBuffer" ? tag : typeof x;
}

/**
 * `x` as this realm's own Uint8Array (a copy), or VerificationError ("encoding", naming `what`):
 * bytes are a Uint8Array (or a Buffer) of any realm (isBytes: a game's page hands this page its own
 * window's arrays), as every function of the package takes them. A list of numbers, another typed
 * array, an ArrayBuffer, a string or a number is refused, never converted. `n`, when given, is the
 * exact length.
 */
export function ownBytes(x, what, n = null) {
  if (!isBytes(x)) throw fail("encoding", `${what}: want bytes (a Uint8Array), not ${kindOf(x)}`);
  const out = new Uint8Array(x.buffer, x.byteOffset, x.byteLength).slice();
  if (n !== null && out.length !== n) throw fail("encoding", `${what}: want ${n} bytes, not ${out.length}`);
  return out;
}

/** A seal's position: an integer in 0..2^32-1 (u32), or VerificationError naming it. */
function checkPosition(position) {
  if (!(Number.isInteger(position) && position >= 0 && position <= 0xffffffff)) {
    throw fail("encoding", `position ${String(position)}: want an integer in 0..4294967295`);
  }
}

/** A fresh X25519 key pair for one hand: give `publicKey` to the dealer, keep `secretKey`. */
export function newSeatKey() {
  const { secretKey, publicKey } = x25519.keygen();
  return { secretKey, publicKey };
}

/** The X25519 public key of a seat's 32-byte secret key (VerificationError naming it otherwise). */
export const seatPublicKey = (secretKey) => x25519.getPublicKey(ownBytes(secretKey, "seat secret key", 32));

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
  checkPosition(position);
  checkPosition(holder);
  if (!(isBytes(sealed) && sealed.length === SEALED_BYTES)) throw fail("encoding", `seal: a sealed share is ${SEALED_BYTES} bytes`);
  sealed = ownBytes(sealed, "seal");
  secretKey = ownBytes(secretKey, "seat secret key", 32);
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

function releaseInfo(spec, handId, p, k, epk, seatPk) {
  return concat(label("seal release"), lp(ascii(spec.name)), lp(ascii(handId)), u32(p), u32(k), epk, seatPk);
}

/**
 * Section 9.3: this seat's 32-byte release token of holder `holder`'s seal of position `position`,
 * HKDF-SHA256(X25519(secretKey, epk), release info), once the sealed share opens with the seat's key
 * there (openSealedShare's errors otherwise). A secret until the hand is closed: the game server
 * sends every seat's tokens with CloseHand (seat_releases), and nothing logs them.
 */
export function sealRelease({ deck, handId, position, holder, sealed, secretKey }) {
  openSealedShare({ deck, handId, position, holder, sealed, secretKey });
  sealed = ownBytes(sealed, "seal");
  secretKey = ownBytes(secretKey, "seat secret key", 32);
  const spec = codealSpec(deck);
  const epk = sealed.subarray(0, 32);
  const info = releaseInfo(spec, handId, position, holder, epk, seatPublicKey(secretKey));
  return hkdf(sha256, x25519.getSharedSecret(secretKey, epk), new Uint8Array(0), info, 32);
}

/**
 * Section 9.3 for a whole draw, as the Python SDK's `seat_releases`: this seat's release token of
 * every co-dealer's share (holders 1..K-1; the dealer's, holder 0, needs none) of each of
 * `sealedCards` ({ position, shares }, as DrawCards gave them to this seat), in that order, each
 * checked to open with `secretKey` first (openSealedShare's errors otherwise). Call it only once
 * the seat's play is over (HandSeat.release does): the tokens let the co-dealer reveal its seed.
 */
export function seatReleases({ deck, handId, sealedCards, secretKey }) {
  if (!Array.isArray(sealedCards)) throw fail("encoding", "sealedCards: want the list of this seat's sealed cards, [{ position, shares }]");
  return sealedCards.flatMap((card, c) => {
    if (card === null || typeof card !== "object") throw fail("encoding", `sealedCards[${c}]: want { position, shares }`);
    const { position, shares } = card;
    checkPosition(position);
    if (!Array.isArray(shares)) throw fail("encoding", `position ${position} shares: want the list of its sealed shares, holder order`);
    return shares.slice(1).map((sealed, i) => sealRelease({ deck, handId, position, holder: i + 1, sealed, secretKey }));
  });
}

/**
 * What a seat needs to check shares: the hand context from the hand's key records (each proof of
 * possession checked, section 5.2) and the final deck (the last holder's shuffle record's deck,
 * or its 64 n bytes). The shuffles themselves are checked by verifyCodealHand.
 */
export function seatContext({ deck, handId, keys, finalDeck }) {
  const spec = codealSpec(deck);
  if (!Array.isArray(keys)) throw fail("encoding", "keys: want the hand's key records, holder order");
  const records = keys.map((k, i) => ownBytes(k, `key record ${i}`));
  const ctx = handContext(spec, handId, decodeKeyRecords(spec, handId, records));
  ctx.final = decodeDeck(ownBytes(finalDeck, "final deck"), spec.ids.length, "final deck").cts;
  return ctx;
}

/**
 * One card from its K shares: each share (bytes, holder order) is decoded and its DLEQ proof
 * checked against its holder's key and the final deck's ciphertext at `position` (section 8),
 * then combined. Returns { id, code }; raises VerificationError ("encoding", "share", "open").
 */
export function combineShares(ctx, position, shares) {
  if (!(Number.isInteger(position) && position >= 0 && position < ctx.final.length)) throw fail("transcript", `position ${position} is not in the deck`);
  if (!Array.isArray(shares)) throw fail("encoding", `position ${position} shares: want the list of its shares, holder order`);
  const local = (s) => (isBytes(s) ? ownBytes(s, "share") : s); // any realm's bytes, copied; decodeShare refuses the rest
  const decoded = shares.map((s, k) => decodeShare(local(s), `position ${position} share ${k}`));
  const e = ctx.final[position];
  decoded.forEach((s, k) => verifyShare(ctx, position, k, e, s));
  const id = openCard(ctx, position, e, decoded);
  return { id, code: codeForId(id, ctx.spec.shoe) };
}

/** Section 9.1: lp(V " identity seal") || ctx || u32(p) || u32(k) || seat_pk || SHA-256(sealed). */
export const sealStatement = (ctx, position, holder, seatPk, sealedSha256) =>
  concat(label("identity seal"), ctx.bytes, u32(position), u32(holder), ownBytes(seatPk, "seal statement seat public key"), ownBytes(sealedSha256, "seal statement sealed share SHA-256"));

const bytesOf = (b, n) => isBytes(b) && b.length === n; // any realm's
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
function signedBy(key, message, signature) {
  try {
    return ed25519.verify(signature, message, key, { zip215: false }); // strict RFC 8032, as log.js
  } catch {
    return false;
  }
}

/**
 * Section 9.2, before any share is opened: one statement per co-dealer (holders 1..K-1 in order,
 * each { holder, seatPublicKey, sealedSha256, signature }) that verifies under the identity key the
 * device pinned for it (`identityKeys`, holders 1..K-1; never the keys the hand names), names this
 * seat's own key `seatPk`, and the sealed bytes received. Raises VerificationError naming the position.
 */
export function checkSeals(ctx, position, sealedShares, seals, seatPk, identityKeys) {
  const K = ctx.keys.length;
  if (!(Array.isArray(identityKeys) && identityKeys.length === K - 1 && identityKeys.every((k) => bytesOf(k, 32)))) {
    throw fail("encoding", `pinned identity keys: want ${K - 1} of 32 bytes, holders 1..${K - 1}`);
  }
  identityKeys = identityKeys.map((k) => ownBytes(k, "pinned identity key"));
  seatPk = ownBytes(seatPk, "seat public key", 32);
  if (!Array.isArray(sealedShares)) throw fail("encoding", `position ${position} shares: want the list of its sealed shares, holder order`);
  if (sealedShares.length !== K) throw fail("transcript", `position ${position}: ${sealedShares.length} shares for ${K} holders`);
  if (!(Array.isArray(seals) && seals.length === K - 1 && seals.every((s, i) => s !== null && typeof s === "object" && s.holder === i + 1))) {
    throw fail("seal", `position ${position}: want one seal statement per co-dealer, holders 1..${K - 1} in order`);
  }
  for (const given of seals) {
    const k = given.holder;
    if (!(bytesOf(given.seatPublicKey, 32) && bytesOf(given.sealedSha256, 32) && bytesOf(given.signature, 64))) {
      throw fail("encoding", `position ${position} seal ${k}: a seat key is 32 bytes, a digest 32 and a signature 64`);
    }
    const s = { seatPublicKey: ownBytes(given.seatPublicKey, "seal"), sealedSha256: ownBytes(given.sealedSha256, "seal"), signature: ownBytes(given.signature, "seal") };
    if (!signedBy(identityKeys[k - 1], sealStatement(ctx, position, k, s.seatPublicKey, s.sealedSha256), s.signature)) {
      throw fail("seal", `position ${position}: co-dealer ${k}'s seal statement does not verify under its pinned identity key`);
    }
    if (!same(s.seatPublicKey, seatPk)) {
      throw fail("seal", `position ${position} was sealed by co-dealer ${k} to another key: the dealer may have read this card`);
    }
    if (!same(s.sealedSha256, sha256(ownBytes(sealedShares[k], `position ${position} share ${k}`)))) {
      throw fail("seal", `position ${position}: co-dealer ${k}'s sealed share is not the one it signed`);
    }
  }
}

/**
 * A hole card on the seat's device: the co-dealers' seal statements (checkSeals, section 9.2)
 * against the pinned `identityKeys`, then every holder's sealed share opened, verified and
 * combined. Returns { id, code }; raises VerificationError naming the step and the position.
 */
export function openSeatCard(ctx, position, sealedShares, secretKey, seals, identityKeys) {
  if (!(Number.isInteger(position) && position >= 0 && position < ctx.final.length)) throw fail("transcript", "dealt positions must be distinct and in 0..n-1");
  secretKey = ownBytes(secretKey, "seat secret key", 32);
  checkSeals(ctx, position, sealedShares, seals, seatPublicKey(secretKey), identityKeys);
  const shares = sealedShares.map((sealed, holder) =>
    openSealedShare({ deck: ctx.spec.name, handId: ctx.handId, position, holder, sealed, secretKey }),
  );
  return combineShares(ctx, position, shares);
}
