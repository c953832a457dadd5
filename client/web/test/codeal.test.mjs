// The co-dealt verifier on Node, with Node's own test runner (`npm test` in client/web):
// every vector of docs/vectors/fairdeck-codeal-v1.json at the step it names, the seat side, every
// co-dealt hand proof of fairdeck-codeal-proofs-v1.json (format 4), and every case of
// docs/vectors/fairdeck-codeal-seal-v1.json. Every line is computed once, before the tests: with
// FAIRDECK_NODE_RESULTS=FILE set, they are also written to FILE as JSON ({codeal, proofs: {"format
// 4"}, seals}), for the Python tests that hold them to the reference (tests/support/node_runs.py),
// so that no other node process checks the same vectors again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { vectorApi } from "../src/codeal/index.js";
import * as api from "../src/index.js";
import { combineShares, newSeatKey, openSealedShare, openSeatCard, seatContext, seatPublicKey, VerificationError } from "../src/index.js";
import { runCodealVectors } from "./codeal-cases.mjs";
import { proofLines } from "./proof-lines.mjs";
import { runSealVectors } from "./seal-cases.mjs";

const vectorsFile = (name) => JSON.parse(readFileSync(fileURLToPath(new URL(`../../../docs/vectors/${name}`, import.meta.url)), "utf8"));
const VECTORS = vectorsFile("fairdeck-codeal-v1.json");
// docs/vectors/fairdeck-codeal-seal-v1.json: the seat's device checks the co-dealers' seal
// statements (docs/codealing-spec.md 9.2) before it opens a share, in the reference's words.
const SEAL_VECTORS = vectorsFile("fairdeck-codeal-seal-v1.json");
const PROOFS = { "format 4": vectorsFile("fairdeck-codeal-proofs-v1.json") };
const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const result = runCodealVectors(VECTORS, vectorApi);
const proofs = Object.fromEntries(Object.entries(PROOFS).map(([form, v]) => [form, proofLines(v, api)]));
const seals = runSealVectors(SEAL_VECTORS, vectorApi);
if (process.env.FAIRDECK_NODE_RESULTS) {
  writeFileSync(process.env.FAIRDECK_NODE_RESULTS, JSON.stringify({ codeal: result, proofs, seals }));
}
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

test("a codeal object inside a hand proof of format 1 to 3 is refused at step format: a co-dealt hand's proof is format 4", async () => {
  const { check, verdictLine } = await import("../src/index.js");
  const proofs = JSON.parse(readFileSync(fileURLToPath(new URL("../../../docs/vectors/fairdeck-hand-proofs-v2.json", import.meta.url)), "utf8"));
  const proof = JSON.parse(proofs.valid.find((v) => v.name === "a standard hand").text);
  const line = verdictLine(check(JSON.stringify({ ...proof, codeal: {} }), { key: proofs.log_key }));
  assert.match(line, /^FAILED at step format: a hand proof of format 2 has exactly the names \['commit', 'dealt', /);
});

test("every co-dealt hand proof (format 4) of the vectors gives fairdeck verify's line, through check and verifyCodealProof", () => {
  const v1 = PROOFS["format 4"];
  for (const c of [...v1.valid, ...v1.invalid]) assert.deepEqual(proofs["format 4"][c.name], { check: c.line, api: c.line }, c.name);
});

test("the co-dealers' keys given to check as a list, and without them", () => {
  const { check, verdictLine, verifyCodealProof } = api;
  const v1 = PROOFS["format 4"];
  for (const c of [...v1.valid, ...v1.invalid]) assert.equal(verdictLine(check(c.text, { codealerKey: c.codealer_keys })), c.line, c.name);
  const seat = v1.valid[0];
  const unpinned = check(seat.text, {});
  assert.equal(unpinned.ok, false);
  assert.equal(unpinned.step, null);
  assert.equal(verdictLine(unpinned), null, "without the co-dealer's key, no verdict");
  assert.throws(() => verifyCodealProof(seat.text, {}), TypeError);
  assert.match(check(seat.text, { codealerKey: "abc" }).inputError, /^co-dealer key 1 of the 1 given \(abc\): want 64 hex digits/);
});

test("every seal vector gives its line on the seat's device", () => {
  for (const c of SEAL_VECTORS.cases) assert.equal(seals[c.name], c.line, c.name);
});
