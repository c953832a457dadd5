// The seat's release of a hand (docs/codealing-spec.md 9.3) on Node, with Node's own test runner
// (`npm test` in client/web): seatReleases on every case of
// docs/vectors/fairdeck-codeal-seat-releases-v1.json, and HandSeat on the seal vectors' hands: it
// releases only what it opened, once asked, never shows its key or tokens, and opens nothing after.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { inspect } from "node:util";
import { fileURLToPath } from "node:url";
import vm from "node:vm";
import { x25519 } from "@noble/curves/ed25519.js";
import { HandSeat, SeatStateError, VerificationError, combineShares, openSealedShare, seatContext, seatReleases } from "../src/index.js";
import { runSeatReleases } from "./release-cases.mjs";

const read = (name) => JSON.parse(readFileSync(fileURLToPath(new URL(`../../../docs/vectors/${name}`, import.meta.url)), "utf8"));
const RELEASES = read("fairdeck-codeal-seat-releases-v1.json");
const SEALS = read("fairdeck-codeal-seal-v1.json");
const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
// Another realm (a game's window driving this page in a frame): its Uint8Array is not ours.
const foreignFromHex = vm.runInNewContext("(h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16))");

/**
 * Where `bytes` shows in `shown`: as hex, base64, or a list of decimals (a Uint8Array through
 * JSON.stringify, {"0":171,"1":205,...}, or through inspect, [ 171, 205, ... ] over several lines).
 */
function leaks(shown, bytes) {
  const decimals = shown.replace(/"\d+":/g, "").replace(/\s+/g, "");
  return shown.includes(toHex(bytes)) || shown.includes(Buffer.from(bytes).toString("base64")) || decimals.includes(Array.from(bytes).join(","));
}
const showings = (seat, states) => [JSON.stringify(seat), inspect(seat), inspect(seat, { showHidden: true, depth: null }), String(seat), JSON.stringify(states), inspect(states, { depth: null })];

test("seatReleases gives the reference's line on every seat-releases vector", () => {
  const lines = runSeatReleases(RELEASES, { seatReleases });
  for (const c of RELEASES.cases) assert.equal(lines[c.name], c.line, c.name);
});

function seatOn(handName, secret = SEALS.seat_secret, onchange = null) {
  const h = SEALS.hands[handName];
  const first = SEALS.cases.find((c) => c.hand === handName && c.line.startsWith("OK: "));
  return new HandSeat({
    deck: h.deck,
    handId: h.hand_id,
    keys: h.keys.map(fromHex),
    finalDeck: fromHex(h.final_deck),
    identityKeys: first.identity_keys.map(fromHex),
    secretKey: fromHex(secret),
    onchange,
  });
}
const sealedCard = (name) => {
  const c = SEALS.cases.find((x) => x.name === name);
  const seals = c.seals.map((s) => ({ holder: s.holder, seat_public_key: fromHex(s.seat_public_key), sealed_share_sha256: fromHex(s.sealed_share_sha256), signature: fromHex(s.signature) }));
  return { position: c.position, shares: c.sealed.map(fromHex), seals };
};

test("a HandSeat opens its cards, then releases exactly the reference's tokens, and opens nothing after", () => {
  const states = [];
  const seat = seatOn("short-2", SEALS.seat_secret, (s) => states.push(s));
  assert.equal(toHex(seat.publicKey), SEALS.seat_public_key);
  const cards = seat.open([sealedCard("valid, position 0"), sealedCard("valid, position 1")]);
  assert.deepEqual(cards.map((c) => c.code), ["8s", "7d"]);
  assert.equal(seat.released, false);
  const tokens = seat.release();
  const want = RELEASES.cases.find((c) => c.name === "valid: two holders, positions 0 and 1").line;
  assert.equal(["OK: releases", ...tokens.map(toHex)].join(" "), want);
  assert.deepEqual(seat.release().map(toHex), tokens.map(toHex)); // asked again: the same
  assert.throws(() => seat.open([sealedCard("valid, position 1")]), SeatStateError);
  assert.deepEqual(states.at(-1), { handId: SEALS.hands["short-2"].hand_id, publicKey: SEALS.seat_public_key, cards: ["8s", "7d"], released: true, tokens: 2 });
  // Neither the key nor a token in anything the seat shows of itself.
  for (const shown of showings(seat, states)) {
    assert.ok(!leaks(shown, fromHex(SEALS.seat_secret)), shown);
    for (const t of tokens) assert.ok(!leaks(shown, t), shown);
  }
  assert.ok(!Object.keys(seat).some((k) => /secret/i.test(k)));
});

test("a HandSeat releases nothing it did not open, and refuses a card sealed to another key", () => {
  const seat = seatOn("short-2", "11".repeat(32));
  assert.throws(() => seat.open([sealedCard("valid, position 0")]), (e) => e instanceof VerificationError && e.step === "seal");
  assert.throws(() => seat.release(), SeatStateError); // nothing opened: nothing to release
});

test("the leak check finds a key shown as JSON decimals or through inspect", () => {
  const key = fromHex(SEALS.seat_secret);
  for (const shown of [JSON.stringify({ k: key }), inspect({ k: key }), inspect(Array.from(key)), JSON.stringify(Array.from(key))]) assert.ok(leaks(shown, key), shown);
  assert.ok(!leaks(JSON.stringify({ k: key.subarray(1) }), key));
});

test("a HandSeat released before any card is refused, and its cards still open after", () => {
  const seat = seatOn("short-2");
  assert.throws(() => seat.release(), (e) => e instanceof SeatStateError && /opened no card/.test(e.message));
  assert.equal(seat.released, false);
  assert.deepEqual(seat.open([sealedCard("valid, position 0")]).map((c) => c.code), ["8s"]);
  assert.equal(seat.release().length, 1);
});

test("a HandSeat and seatReleases take byte arrays made in another realm (a game's window)", () => {
  const h = SEALS.hands["short-2"];
  const first = SEALS.cases.find((c) => c.hand === "short-2" && c.line.startsWith("OK: "));
  const seat = new HandSeat({
    deck: h.deck,
    handId: h.hand_id,
    keys: h.keys.map(foreignFromHex),
    finalDeck: foreignFromHex(h.final_deck),
    identityKeys: first.identity_keys.map(foreignFromHex),
    secretKey: foreignFromHex(SEALS.seat_secret),
  });
  const foreignCard = (name) => {
    const c = SEALS.cases.find((x) => x.name === name);
    const seals = c.seals.map((s) => ({ holder: s.holder, seatPublicKey: foreignFromHex(s.seat_public_key), sealedShareSha256: foreignFromHex(s.sealed_share_sha256), signature: foreignFromHex(s.signature) }));
    return { position: c.position, shares: c.sealed.map(foreignFromHex), seals };
  };
  assert.deepEqual(seat.open([foreignCard("valid, position 0"), foreignCard("valid, position 1")]).map((c) => c.code), ["8s", "7d"]);
  const want = RELEASES.cases.find((c) => c.name === "valid: two holders, positions 0 and 1");
  assert.equal(["OK: releases", ...seat.release().map(toHex)].join(" "), want.line);
  const direct = seatReleases({
    deck: want.deck,
    handId: want.hand_id,
    sealedCards: want.sealed_cards.map((s) => ({ position: s.position, shares: s.shares.map(foreignFromHex) })),
    secretKey: foreignFromHex(RELEASES.seat_secret),
  });
  assert.equal(["OK: releases", ...direct.map(toHex)].join(" "), want.line);
  // The lower-level calls a game page may use directly: the context and combining opened shares.
  const ctx = seatContext({ deck: h.deck, handId: h.hand_id, keys: h.keys.map(foreignFromHex), finalDeck: foreignFromHex(h.final_deck) });
  const card = SEALS.cases.find((x) => x.name === "valid, position 0");
  const opened = card.sealed.map((s, holder) =>
    foreignFromHex(toHex(openSealedShare({ deck: h.deck, handId: h.hand_id, position: card.position, holder, sealed: foreignFromHex(s), secretKey: foreignFromHex(SEALS.seat_secret) }))),
  );
  assert.equal(combineShares(ctx, card.position, opened).code, "8s");
});

test("a HandSeat takes a proto3-JSON seal (sealedShareSha256)", () => {
  const c = sealedCard("valid, position 0");
  c.seals = c.seals.map((s) => ({ holder: s.holder, seatPublicKey: s.seat_public_key, sealedShareSha256: s.sealed_share_sha256, signature: s.signature }));
  assert.deepEqual(seatOn("short-2").open([c]).map((x) => x.code), ["8s"]);
});

const refusedFor = (pattern, step = "encoding") => (e) => e instanceof VerificationError && e.step === step && pattern.test(e.detail);

test("a HandSeat refuses text, numbers and malformed cards as bytes with a VerificationError naming the field", () => {
  const card = sealedCard("valid, position 0");
  const hexShares = { ...card, shares: SEALS.cases.find((x) => x.name === "valid, position 0").sealed };
  assert.throws(() => seatOn("short-2").open([hexShares]), refusedFor(/position 0 share 0: want bytes/)); // not the co-dealer's fault
  assert.throws(() => seatOn("short-2").open([{ ...card, shares: [card.shares[0], 7] }]), refusedFor(/position 0 share 1: want bytes/));
  assert.throws(() => seatOn("short-2").open([{ ...card, shares: [...card.shares, null] }]), refusedFor(/3 shares for 2 holders/, "transcript"));
  assert.throws(() => seatOn("short-2").open(card), refusedFor(/sealedCards: want the list/));
  assert.throws(() => seatOn("short-2").open([null]), refusedFor(/sealedCards\[0\]/));
  assert.throws(() => seatOn("short-2").open([{ position: 0, shares: card.shares }]), refusedFor(/want one seal statement per co-dealer/, "seal"));
  assert.throws(() => seatOn("short-2").open([{ ...card, seals: [null] }]), refusedFor(/seals\[0\]/));
  const h = SEALS.hands["short-2"];
  const identityKeys = SEALS.cases[0].identity_keys.map(fromHex);
  const hand = { deck: h.deck, handId: h.hand_id, keys: h.keys.map(fromHex), identityKeys };
  assert.throws(() => new HandSeat({ ...hand, shuffles: [] }), refusedFor(/shuffles/));
  assert.throws(() => new HandSeat({ ...hand, finalDeck: h.final_deck }), refusedFor(/final deck: want bytes/));
  assert.throws(() => new HandSeat({ ...hand, finalDeck: fromHex(h.final_deck), secretKey: SEALS.seat_secret }), refusedFor(/secretKey: want bytes/));
  assert.throws(() => new HandSeat({ ...hand, finalDeck: fromHex(h.final_deck), identityKeys: identityKeys.map(toHex) }), refusedFor(/identity key of holder 1/));
});

test("seatReleases refuses a position outside 0..2^32-1 (2^32 is not position 0)", () => {
  const c = RELEASES.cases.find((x) => x.name === "valid: two holders, positions 0 and 1");
  const run = (position) => seatReleases({ deck: c.deck, handId: c.hand_id, sealedCards: [{ position, shares: c.sealed_cards[0].shares.map(fromHex) }], secretKey: fromHex(RELEASES.seat_secret) });
  assert.equal(run(c.sealed_cards[0].position).length, 1);
  for (const position of [2 ** 32 + c.sealed_cards[0].position, -1, 0.5, "0", null]) assert.throws(() => run(position), refusedFor(/want an integer in 0\.\.4294967295/), String(position));
  assert.throws(() => seatReleases({ deck: c.deck, handId: c.hand_id, sealedCards: [null], secretKey: fromHex(RELEASES.seat_secret) }), refusedFor(/sealedCards\[0\]/));
  assert.throws(() => seatReleases({ deck: c.deck, handId: c.hand_id, sealedCards: "x", secretKey: fromHex(RELEASES.seat_secret) }), refusedFor(/sealedCards/));
});

test("a HandSeat's deck, hand id and public key cannot be rewritten, and its release reads its own", () => {
  const seat = seatOn("short-2");
  seat.open([sealedCard("valid, position 0"), sealedCard("valid, position 1")]);
  assert.throws(() => { seat.handId = "another-hand"; }, TypeError);
  assert.throws(() => { seat.deck = "standard-52"; }, TypeError);
  assert.throws(() => { seat.publicKey = new Uint8Array(32); }, TypeError);
  seat.publicKey.fill(0); // a copy
  assert.equal(toHex(seat.publicKey), SEALS.seat_public_key);
  assert.equal(seat.handId, SEALS.hands["short-2"].hand_id);
  const want = RELEASES.cases.find((c) => c.name === "valid: two holders, positions 0 and 1").line;
  assert.equal(["OK: releases", ...seat.release().map(toHex)].join(" "), want);
});

test("a HandSeat with no key given makes its own, and never shows it", () => {
  // The key newSeatKey draws, seen through the platform's random source (x25519.keygen reads 32 bytes).
  const drawn = [];
  const real = globalThis.crypto.getRandomValues;
  globalThis.crypto.getRandomValues = function (a) {
    const out = real.call(this, a);
    drawn.push(Uint8Array.from(new Uint8Array(out.buffer, out.byteOffset, out.byteLength)));
    return out;
  };
  let seat;
  try {
    const h = SEALS.hands["short-2"];
    seat = new HandSeat({ deck: h.deck, handId: h.hand_id, keys: h.keys.map(fromHex), finalDeck: fromHex(h.final_deck), identityKeys: SEALS.cases[0].identity_keys.map(fromHex) });
  } finally {
    globalThis.crypto.getRandomValues = real;
  }
  const secret = drawn.find((d) => d.length === 32 && toHex(x25519.getPublicKey(d)) === toHex(seat.publicKey));
  assert.ok(secret, "the seat's key came from the platform's random source");
  assert.notEqual(toHex(seat.publicKey), SEALS.seat_public_key);
  for (const shown of showings(seat, [seat.state()])) assert.ok(!leaks(shown, secret), shown);
  assert.ok(!Object.keys(seat).length, "no own enumerable field");
});
