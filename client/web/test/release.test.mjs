// The seat's release of a hand (docs/codealing-spec.md 9.3) on Node, with Node's own test runner
// (`npm test` in client/web): seatReleases on every case of
// docs/vectors/fairdeck-codeal-seat-releases-v1.json, and HandSeat on the seal vectors' hands: it
// releases only what it opened, once asked, never shows its key or tokens, and opens nothing after.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { inspect } from "node:util";
import { fileURLToPath } from "node:url";
import { HandSeat, SeatStateError, VerificationError, seatReleases } from "../src/index.js";
import { runSeatReleases } from "./release-cases.mjs";

const read = (name) => JSON.parse(readFileSync(fileURLToPath(new URL(`../../../docs/vectors/${name}`, import.meta.url)), "utf8"));
const RELEASES = read("fairdeck-codeal-seat-releases-v1.json");
const SEALS = read("fairdeck-codeal-seal-v1.json");
const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

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
  for (const shown of [JSON.stringify(seat), inspect(seat), String(seat), JSON.stringify(states)]) {
    assert.ok(!shown.includes(SEALS.seat_secret), shown);
    for (const t of tokens) assert.ok(!shown.includes(toHex(t)), shown);
  }
  assert.ok(!Object.keys(seat).some((k) => /secret/i.test(k)));
});

test("a HandSeat releases nothing it did not open, and refuses a card sealed to another key", () => {
  const seat = seatOn("short-2", "11".repeat(32));
  assert.throws(() => seat.open([sealedCard("valid, position 0")]), (e) => e instanceof VerificationError && e.step === "seal");
  assert.deepEqual(seat.release(), []);
});
