// The co-dealt verifier on Node, with Node's own test runner (`npm test` in client/web):
// every vector of docs/vectors/fairdeck-codeal-v1.json at the step it names, the seat side, and
// every case of docs/vectors/fairdeck-codeal-seal-v1.json.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { vectorApi } from "../src/codeal/index.js";
import { combineShares, newSeatKey, openSealedShare, openSeatCard, seatContext, seatPublicKey, VerificationError } from "../src/index.js";
import { runCodealVectors } from "./codeal-cases.mjs";
import { runSealVectors } from "./seal-cases.mjs";

const VECTORS = JSON.parse(readFileSync(fileURLToPath(new URL("../../../docs/vectors/fairdeck-codeal-v1.json", import.meta.url)), "utf8"));
// docs/vectors/fairdeck-codeal-seal-v1.json: the seat's device checks the co-dealers' seal
// statements (docs/codealing-spec.md 9.2) before it opens a share, in the reference's words.
const SEAL_VECTORS = JSON.parse(readFileSync(fileURLToPath(new URL("../../../docs/vectors/fairdeck-codeal-seal-v1.json", import.meta.url)), "utf8"));
const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const result = runCodealVectors(VECTORS, vectorApi);
const stepOf = (line) => (line.startsWith("OK: ") ? null : /^FAILED at step ([a-z]+): /.exec(line)[1]);

test("every valid hand verifies", () => {
  for (const [name, line] of Object.entries(result.hands)) assert.match(line, /^OK: co-dealt hand /, name);
});

test("every case is accepted or rejected at the step it names", () => {
  for (const c of VECTORS.cases) assert.equal(stepOf(result.cases[c.name]), c.step, `${c.name}: ${result.cases[c.name]}`);
});

test("every sealed share opens only for its seat and place", () => {
  VECTORS.seals.forEach((s, i) => {
    assert.equal(result.seals[i].step, s.step);
    if (s.step === null) assert.equal(result.seals[i].share, s.share);
  });
});

test("card points, generators, hash to point and each holder's derivation", () => {
  assert.equal(result.points, true);
  for (const d of result.derivations) assert.deepEqual(d, { commitment: true, client_seed: true, psi: true, randomness: true });
});

test("a seat opens its sealed share, checks every share and combines them into its card", () => {
  const seal = VECTORS.seals.find((s) => s.step === null);
  const hand = VECTORS.hands[seal.hand_id === "vec-short-2" ? "short-2" : seal.hand_id];
  const ctx = seatContext({
    deck: hand.deck,
    handId: hand.hand_id,
    keys: hand.keys.map(fromHex),
    finalDeck: fromHex(hand.shuffles[hand.shuffles.length - 1]).subarray(4, 4 + 64 * 36),
  });
  const secretKey = fromHex(seal.seat_secret);
  const opened = openSealedShare({ deck: hand.deck, handId: hand.hand_id, position: seal.position, holder: seal.holder, sealed: fromHex(seal.sealed), secretKey });
  const dealt = hand.dealt.find((d) => d.position === seal.position);
  const shares = dealt.shares.map(fromHex);
  assert.deepEqual(opened, shares[seal.holder]);
  assert.equal(combineShares(ctx, seal.position, shares).id, dealt.card);
  // A share made for another position does not combine here: its DLEQ proof names the position.
  const other = hand.dealt.find((d) => d.position !== seal.position);
  assert.throws(() => combineShares(ctx, other.position, shares), (e) => e instanceof VerificationError && e.step === "share");
  // Sealed to another seat: that seat's device refuses it, naming the position (spec 9.2).
  const c = SEAL_VECTORS.cases[0];
  const h = SEAL_VECTORS.hands[c.hand];
  const sealCtx = seatContext({ deck: h.deck, handId: h.hand_id, keys: h.keys.map(fromHex), finalDeck: fromHex(h.final_deck) });
  const seals = c.seals.map((s) => ({ holder: s.holder, seatPublicKey: fromHex(s.seat_public_key), sealedSha256: fromHex(s.sealed_share_sha256), signature: fromHex(s.signature) }));
  assert.throws(
    () => openSeatCard(sealCtx, c.position, c.sealed.map(fromHex), newSeatKey().secretKey, seals, c.identity_keys.map(fromHex)),
    (e) => e.step === "seal" && e.detail === `position ${c.position} was sealed by co-dealer 1 to another key: the dealer may have read this card`,
  );
});

test("the seat side, as the page runs it", () => {
  assert.deepEqual(result.seat, { key: true, mine: true, every: true });
});

test("a seat key is a fresh X25519 key pair", () => {
  const a = newSeatKey();
  const b = newSeatKey();
  assert.equal(a.publicKey.length, 32);
  assert.deepEqual(seatPublicKey(a.secretKey), a.publicKey);
  assert.notDeepEqual(a.secretKey, b.secretKey);
});

test("a hand proof's codeal object: read strictly, and bound to the proof's own hand", async () => {
  const { check, verdictLine } = await import("../src/index.js");
  const { codeForId } = await import("../src/spec.js");
  const proofs = JSON.parse(readFileSync(fileURLToPath(new URL("../../../docs/vectors/fairdeck-hand-proofs-v2.json", import.meta.url)), "utf8"));
  const proof = JSON.parse(proofs.valid.find((v) => v.name === "a standard hand").text);
  const other = VECTORS.hands["holdem-9-seats"]; // standard too, but hand vec-holdem
  const codeal = {
    version: "fairdeck-codeal-v1",
    keys: other.keys,
    shuffles: other.shuffles,
    dealt: other.dealt.map((d) => ({ position: d.position, card: codeForId(d.card, false), shares: d.shares })),
    seeds: other.seeds,
  };
  const line = (c) => verdictLine(check(JSON.stringify({ ...proof, codeal: c }), { key: proofs.log_key }));
  assert.equal(line({ ...codeal, version: "fairdeck-codeal-v2" }), 'FAILED at step format: codeal: version must be "fairdeck-codeal-v1"');
  assert.equal(line({ ...codeal, seeds: ["0A"] }), "FAILED at step format: codeal: seeds must be a list of lower-case hex strings");
  const noVersion = { ...codeal };
  delete noVersion.version;
  assert.match(line(noVersion), /^FAILED at step format: codeal: an object with exactly the names \['dealt', 'keys', 'seeds', 'shuffles', 'version'\]$/);
  // Another hand's records: every proof of possession hashes the hand id.
  assert.equal(line(codeal), "FAILED at step key: holder 0: the proof of possession of its key does not verify");
});

test("the cards a co-dealt record opens must be the hand proof's dealt cards, every one, position by position", async () => {
  const { codeForId } = await import("../src/spec.js");
  const { checkDealtIsCodealt } = await import("../src/codeal/report.js");
  const hand = vectorApi.codealHandFromVector(VECTORS.hands["holdem-9-seats"]);
  hand.dealt = hand.dealt.map((d) => ({ ...d, code: codeForId(d.card, false) }));
  const codes = hand.dealt.map((d) => d.code);
  checkDealtIsCodealt({ ...hand, proofDealt: codes });
  const swapped = [codes[1], codes[0], ...codes.slice(2)];
  assert.throws(() => checkDealtIsCodealt({ ...hand, proofDealt: swapped }), (e) => e.step === "open" && e.detail === `position 0: the hand proof deals ${codes[1]} there, the shares open ${codes[0]}`);
  assert.throws(() => checkDealtIsCodealt({ ...hand, proofDealt: codes.slice(1) }), (e) => e.detail === "the hand proof deals 22 cards, the co-dealt record opens 23");
  assert.throws(() => checkDealtIsCodealt({ ...hand, proofDealt: [...codes, "2c"] }), (e) => e.detail === "the hand proof deals 24 cards, the co-dealt record opens 23");
});

test("every seal vector gives its line on the seat's device", () => {
  const lines = runSealVectors(SEAL_VECTORS, vectorApi);
  for (const c of SEAL_VECTORS.cases) assert.equal(lines[c.name], c.line, c.name);
});
