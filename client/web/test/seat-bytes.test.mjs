// The seat's calls take bytes as every other function of @fairdeck/verifier does (src/bytes.js): a
// Uint8Array (or a Buffer) made in any realm, and nothing else. They used to copy in a list of
// integers 0..255 and any one-byte typed array (an Int8Array, a Uint8ClampedArray), of this realm
// or another: the one corner of the package where a caller's list became bytes. Each such input is
// now refused at step encoding, in words that name the argument; the same call with the same bytes
// as another realm's Uint8Array still gives its answer (so each refusal is about the
// input's form, never its content). `npm test` in client/web; tests/web/test_codeal_popup.py and
// test_codeal_iframe.py check the page's seat so from a game's window in Chromium and Firefox.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import vm from "node:vm";
import { HandSeat, VerificationError, checkSeals, combineShares, openSealedShare, openSeatCard, sealRelease, sealStatement, seatContext, seatPublicKey, seatReleases } from "../src/index.js";

const read = (name) => JSON.parse(readFileSync(fileURLToPath(new URL(`../../../docs/vectors/${name}`, import.meta.url)), "utf8"));
const SEALS = read("fairdeck-codeal-seal-v1.json");
const RELEASES = read("fairdeck-codeal-seat-releases-v1.json");
const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const other = vm.createContext({});
const foreign = vm.runInContext("({ Uint8Array, Int8Array, Uint8ClampedArray, from: (b) => Array.from(b) })", other);

/** The same bytes in every form a seat call used to copy in, each of which is refused now. */
const LENIENT = {
  array: (b) => Array.from(b),
  Int8Array: (b) => new Int8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)),
  Uint8ClampedArray: (b) => new Uint8ClampedArray(b),
  "another realm's array": (b) => foreign.from(b),
  "another realm's Int8Array": (b) => new foreign.Int8Array(Array.from(b, (x) => (x > 127 ? x - 256 : x))),
  "another realm's Uint8ClampedArray": (b) => foreign.Uint8ClampedArray.from(b),
};
/** What the refusal says each form is ("array" for both realms' lists). */
const KIND = { "another realm's array": "array", "another realm's Int8Array": "Int8Array", "another realm's Uint8ClampedArray": "Uint8ClampedArray" };
// (This realm's Uint8Array is what every vector test of the package gives these calls.)
const HONEST = { "another realm's Uint8Array": (b) => foreign.Uint8Array.from(b) };

const h = SEALS.hands["short-2"];
const card = SEALS.cases.find((c) => c.name === "valid, position 0");
const secret = fromHex(SEALS.seat_secret);
// One context and one seat for the calls that take them (neither changes when a call is refused):
// reading a hand's keys and final deck is the slow part of a seat's set-up.
let context = null;
const ctx = () => (context ??= seatContext({ deck: h.deck, handId: h.hand_id, keys: h.keys.map(fromHex), finalDeck: fromHex(h.final_deck) }));
const seal = (s) => ({ holder: s.holder, seatPublicKey: fromHex(s.seat_public_key), sealedSha256: fromHex(s.sealed_share_sha256), signature: fromHex(s.signature) });
const seatOptions = () => ({ deck: h.deck, handId: h.hand_id, keys: h.keys.map(fromHex), finalDeck: fromHex(h.final_deck), identityKeys: card.identity_keys.map(fromHex), secretKey: Uint8Array.from(secret) });
let heldSeat = null;
const held = () => (heldSeat ??= new HandSeat(seatOptions()));
const message = () => ({ position: card.position, shares: card.sealed.map(fromHex), seals: card.seals.map(seal) });
const opening = (sealed = fromHex(card.sealed[1]), secretKey = Uint8Array.from(secret)) => ({ deck: h.deck, handId: h.hand_id, position: card.position, holder: 1, sealed, secretKey });
const plainShares = () => card.sealed.map((s, holder) => openSealedShare({ ...opening(fromHex(s)), holder }));
const both = RELEASES.cases.find((c) => c.name === "valid: two holders, positions 0 and 1");
const releasing = () => ({ deck: both.deck, handId: both.hand_id, sealedCards: both.sealed_cards.map((s) => ({ position: s.position, shares: s.shares.map(fromHex) })), secretKey: fromHex(RELEASES.seat_secret) });

/**
 * Each seat call with one argument swapped: `put(as)` calls it with that argument's bytes given
 * through `as`; `detail` is the refusal's words, `KIND` where the form is named.
 */
const CASES = {
  "HandSeat keys": [(as) => new HandSeat({ ...seatOptions(), keys: [as(fromHex(h.keys[0])), fromHex(h.keys[1])] }), "key record 0: want bytes (a Uint8Array), not KIND"],
  "HandSeat finalDeck": [(as) => new HandSeat({ ...seatOptions(), finalDeck: as(fromHex(h.final_deck)) }), "final deck: want bytes (a Uint8Array), not KIND"],
  "HandSeat shuffles": [(as) => new HandSeat({ ...seatOptions(), finalDeck: null, shuffles: [as(Uint8Array.from([0, 0, 0, 0, ...fromHex(h.final_deck)]))] }), "shuffle record 0: want bytes (a Uint8Array), not KIND"],
  "HandSeat identityKeys": [(as) => new HandSeat({ ...seatOptions(), identityKeys: [as(fromHex(card.identity_keys[0]))] }), "identity key of holder 1: want bytes (a Uint8Array), not KIND"],
  "HandSeat secretKey": [(as) => new HandSeat({ ...seatOptions(), secretKey: as(secret) }), "secretKey: want bytes (a Uint8Array), not KIND"],
  "HandSeat.open shares": [(as) => held().open([{ ...message(), shares: [fromHex(card.sealed[0]), as(fromHex(card.sealed[1]))] }]), "position 0 share 1: want bytes (a Uint8Array), not KIND"],
  "HandSeat.open seal's seat key": [(as) => held().open([{ ...message(), seals: [{ ...seal(card.seals[0]), seatPublicKey: as(fromHex(card.seals[0].seat_public_key)) }] }]), "position 0 seal 1 seat public key: want bytes (a Uint8Array), not KIND"],
  "HandSeat.open seal's digest": [(as) => held().open([{ ...message(), seals: [{ ...seal(card.seals[0]), sealedSha256: as(fromHex(card.seals[0].sealed_share_sha256)) }] }]), "position 0 seal 1 sealed share SHA-256: want bytes (a Uint8Array), not KIND"],
  "HandSeat.open seal's signature": [(as) => held().open([{ ...message(), seals: [{ ...seal(card.seals[0]), signature: as(fromHex(card.seals[0].signature)) }] }]), "position 0 seal 1 signature: want bytes (a Uint8Array), not KIND"],
  "seatContext keys": [(as) => seatContext({ deck: h.deck, handId: h.hand_id, keys: h.keys.map((k) => as(fromHex(k))), finalDeck: fromHex(h.final_deck) }), "key record 0: want bytes (a Uint8Array), not KIND"],
  "seatContext finalDeck": [(as) => seatContext({ deck: h.deck, handId: h.hand_id, keys: h.keys.map(fromHex), finalDeck: as(fromHex(h.final_deck)) }), "final deck: want bytes (a Uint8Array), not KIND"],
  "openSealedShare sealed": [(as) => openSealedShare(opening(as(fromHex(card.sealed[1])))), "seal: a sealed share is 176 bytes"],
  "openSealedShare secretKey": [(as) => openSealedShare(opening(undefined, as(secret))), "seat secret key: want bytes (a Uint8Array), not KIND"],
  "sealRelease sealed": [(as) => sealRelease(opening(as(fromHex(card.sealed[1])))), "seal: a sealed share is 176 bytes"],
  "sealRelease secretKey": [(as) => sealRelease(opening(undefined, as(secret))), "seat secret key: want bytes (a Uint8Array), not KIND"],
  "seatReleases shares": [(as) => seatReleases({ ...releasing(), sealedCards: [{ ...releasing().sealedCards[0], shares: releasing().sealedCards[0].shares.map(as) }] }), "seal: a sealed share is 176 bytes"],
  "seatReleases secretKey": [(as) => seatReleases({ ...releasing(), secretKey: as(fromHex(RELEASES.seat_secret)) }), "seat secret key: want bytes (a Uint8Array), not KIND"],
  "openSeatCard the dealer's sealed share": [(as) => openSeatCard(ctx(), 0, [as(fromHex(card.sealed[0])), fromHex(card.sealed[1])], secret, card.seals.map(seal), card.identity_keys.map(fromHex)), "seal: a sealed share is 176 bytes"],
  "openSeatCard a co-dealer's sealed share": [(as) => openSeatCard(ctx(), 0, [fromHex(card.sealed[0]), as(fromHex(card.sealed[1]))], secret, card.seals.map(seal), card.identity_keys.map(fromHex)), "position 0 share 1: want bytes (a Uint8Array), not KIND"],
  "openSeatCard secretKey": [(as) => openSeatCard(ctx(), 0, card.sealed.map(fromHex), as(secret), card.seals.map(seal), card.identity_keys.map(fromHex)), "seat secret key: want bytes (a Uint8Array), not KIND"],
  "openSeatCard identityKeys": [(as) => openSeatCard(ctx(), 0, card.sealed.map(fromHex), secret, card.seals.map(seal), card.identity_keys.map((k) => as(fromHex(k)))), "pinned identity keys: want 1 of 32 bytes, holders 1..1"],
  "checkSeals a seal's signature": [(as) => checkSeals(ctx(), 0, card.sealed.map(fromHex), [{ ...seal(card.seals[0]), signature: as(fromHex(card.seals[0].signature)) }], fromHex(SEALS.seat_public_key), card.identity_keys.map(fromHex)), "position 0 seal 1: a seat key is 32 bytes, a digest 32 and a signature 64"],
  "checkSeals seatPk": [(as) => checkSeals(ctx(), 0, card.sealed.map(fromHex), card.seals.map(seal), as(fromHex(SEALS.seat_public_key)), card.identity_keys.map(fromHex)), "seat public key: want bytes (a Uint8Array), not KIND"],
  "combineShares shares": [(as) => combineShares(ctx(), 0, plainShares().map(as)), "position 0 share 0: a share is 128 bytes"],
  "seatPublicKey": [(as) => seatPublicKey(as(secret)), "seat secret key: want bytes (a Uint8Array), not KIND"],
  "sealStatement": [(as) => sealStatement(ctx(), 0, 1, as(fromHex(SEALS.seat_public_key)), fromHex(card.seals[0].sealed_share_sha256)), "seal statement seat public key: want bytes (a Uint8Array), not KIND"],
};

function outcome(fn) {
  try {
    fn();
    return "answered";
  } catch (e) {
    return e instanceof VerificationError ? `${e.step}: ${e.detail}` : `${e.constructor.name}: ${e.message}`;
  }
}

test("the seat's calls answer for another realm's Uint8Array", () => {
  for (const [name, [put]] of Object.entries(CASES)) {
    for (const [form, as] of Object.entries(HONEST)) assert.equal(outcome(() => put(as)), "answered", `${name}, ${form}`);
  }
});

test("the seat's calls refuse a list of integers and other one-byte typed arrays, naming the argument", () => {
  for (const [name, [put, detail]] of Object.entries(CASES)) {
    for (const [form, as] of Object.entries(LENIENT)) {
      assert.equal(outcome(() => put(as)), `encoding: ${detail.replace("KIND", KIND[form] ?? form)}`, `${name}, ${form}`);
    }
  }
});

test("a whole hand of lists is refused, text, a buffer and null too, and a Buffer is bytes", () => {
  // The whole hand as lists, as a JSON loader would leave it: nothing of it is read.
  const lists = { ...seatOptions(), keys: h.keys.map((k) => Array.from(fromHex(k))), finalDeck: Array.from(fromHex(h.final_deck)) };
  assert.equal(outcome(() => new HandSeat(lists)), "encoding: key record 0: want bytes (a Uint8Array), not array");
  assert.equal(outcome(() => new HandSeat({ ...seatOptions(), secretKey: SEALS.seat_secret })), "encoding: secretKey: want bytes (a Uint8Array), not string");
  assert.equal(outcome(() => seatPublicKey(secret.buffer)), "encoding: seat secret key: want bytes (a Uint8Array), not ArrayBuffer");
  assert.equal(outcome(() => seatPublicKey(new DataView(secret.buffer))), "encoding: seat secret key: want bytes (a Uint8Array), not DataView");
  assert.equal(outcome(() => seatPublicKey(null)), "encoding: seat secret key: want bytes (a Uint8Array), not null");
  assert.equal(outcome(() => seatPublicKey(Buffer.from(secret))), "answered");
  assert.equal(outcome(() => held().open([{ ...message(), shares: message().shares.map((b) => Buffer.from(b)) }])), "answered");
});
