// Bytes made in another realm, on Node, with Node's own test runner (`npm test` in client/web): a
// game's page that drives the verifier page in a frame hands it its own window's Uint8Arrays, for
// which `instanceof Uint8Array` is false here. node:vm gives such a realm. Every function of the
// package that takes bytes gives the same answer for them as for this realm's own; a string or a
// list of numbers where bytes are expected is still refused in the same words. (A real iframe, in
// Chromium and Firefox: tests/web/test_codeal_iframe.py.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import vm from "node:vm";
import * as api from "../src/index.js";
import { isBytes } from "../src/bytes.js";
import { vectorApi } from "../src/codeal/index.js";
import { decodePoint, decodeScalar } from "../src/codeal/group.js";
import { decodeShare } from "../src/codeal/shares.js";
import { parsePolicyFile } from "../src/policy.js";

const read = (name) => JSON.parse(readFileSync(fileURLToPath(new URL(`../../../docs/vectors/${name}`, import.meta.url)), "utf8"));
const CODEAL = read("fairdeck-codeal-v1.json");
const PROOFS = read("fairdeck-hand-proofs-v2.json");
const TEXTS = read("fairdeck-v1-texts.json");
const POLICIES = read("fairdeck-tlog-policy-v1.json");
const other = vm.createContext({});
const foreign = vm.runInContext("(h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16))", other);
const local = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const hexOf = (s) => Buffer.from(s, "utf8").toString("hex");

/** What a call gave: its value as JSON, or the error's class, step and words. */
function outcome(fn) {
  try {
    return JSON.stringify(fn(), (_, v) => (typeof v === "bigint" ? `${v}n` : isBytes(v) ? Buffer.from(v).toString("hex") : v));
  } catch (e) {
    return `${e.constructor.name}${e.step ? ` at ${e.step}` : ""}: ${e.detail ?? e.message}`;
  }
}

test("the other realm's arrays are not this realm's: the case is real", () => {
  const b = foreign("00ff");
  assert.equal(b instanceof Uint8Array, false);
  assert.equal(isBytes(b), true);
  assert.equal(isBytes(Buffer.from("00ff", "hex")), true);
  const others = ["00ff", [0, 255], new Int8Array(2), new ArrayBuffer(2), null, undefined, { [Symbol.toStringTag]: "Uint8Array", length: 2 }, new Proxy(new Uint8Array(2), {})];
  others.forEach((x, i) => assert.equal(isBytes(x), false, `others[${i}]`));
});

test("verifyCodealHand gives every vector hand's line for another realm's arrays", () => {
  for (const [name, v] of Object.entries(CODEAL.hands)) {
    const mine = vectorApi.codealLine(vectorApi.codealHandFromVector(v));
    assert.match(mine, /^OK: /, name);
    const hand = {
      deck: v.deck,
      handId: v.hand_id,
      keys: v.keys.map(foreign),
      shuffles: v.shuffles.map(foreign),
      dealt: v.dealt.map((d) => ({ position: d.position, card: d.card, shares: d.shares.map(foreign) })),
      seeds: v.seeds === null ? null : v.seeds.map(foreign),
    };
    assert.equal(vectorApi.codealLine(hand), mine, name);
    assert.equal(outcome(() => api.verifyCodealHand(hand)), outcome(() => api.verifyCodealHand(vectorApi.codealHandFromVector(v))), name);
  }
});

test("verifyCodealHand still refuses a key record, a share or a seed given as text or a list of numbers", () => {
  const v = CODEAL.hands["short-2"];
  const base = () => vectorApi.codealHandFromVector(v);
  const edits = {
    "FAILED at step encoding: key record 0: 128 bytes": (h, x) => (h.keys[0] = x(v.keys[0])),
    "FAILED at step encoding: shuffle record 0: 8420 bytes for 36 cards": (h, x) => (h.shuffles[0] = x(v.shuffles[0])),
    "FAILED at step encoding: position 0 share 0: a share is 128 bytes": (h, x) => (h.dealt[0].shares[0] = x(v.dealt[0].shares[0])),
    "FAILED at step seed: holder 0: a seed for deck 'short' is 34 bytes": (h, x) => (h.seeds[0] = x(v.seeds[0])),
  };
  for (const [line, edit] of Object.entries(edits)) {
    for (const as of [(h) => h, (h) => Array.from(local(h)), (h) => local(h).buffer, (h) => new Int8Array(local(h))]) {
      const h = base();
      edit(h, as);
      assert.equal(vectorApi.codealLine(h), line);
    }
  }
});

test("decodePoint, decodeScalar and decodeShare read another realm's arrays, and refuse text and lists", () => {
  const key = CODEAL.hands["short-2"].keys[0];
  const share = CODEAL.hands["short-2"].dealt[0].shares[0];
  assert.equal(decodePoint(foreign(key.slice(0, 64)), "Y").equals(decodePoint(local(key.slice(0, 64)), "Y")), true);
  assert.equal(decodeScalar(foreign(key.slice(128, 192)), "s"), decodeScalar(local(key.slice(128, 192)), "s"));
  assert.equal(outcome(() => decodeShare(foreign(share), "share")), outcome(() => decodeShare(local(share), "share")));
  assert.equal(outcome(() => decodePoint(foreign("00".repeat(32)), "Y")), "VerificationError at encoding: Y: the identity is not allowed here");
  for (const as of [(h) => h, (h) => Array.from(local(h))]) {
    assert.equal(outcome(() => decodePoint(as(key.slice(0, 64)), "Y")), "VerificationError at encoding: Y: a point is 32 bytes");
    assert.equal(outcome(() => decodeScalar(as(key.slice(128, 192)), "s")), "VerificationError at encoding: s: a scalar is 32 bytes");
    assert.equal(outcome(() => decodeShare(as(share), "share")), "VerificationError at encoding: share: a share is 128 bytes");
  }
});

test("transcripts, hand proofs and policy files read from another realm's bytes", () => {
  const text = TEXTS.texts.find((t) => t.expected_step === null).text;
  const want = outcome(() => api.verifyTranscript(local(text)));
  assert.match(want, /^\{/);
  assert.equal(outcome(() => api.verifyTranscript(foreign(text))), want);
  const proof = hexOf(PROOFS.valid[0].text);
  const proofWant = outcome(() => api.verifyHandProof(local(proof), { key: PROOFS.log_key }));
  assert.match(proofWant, /^\{/);
  assert.equal(outcome(() => api.verifyHandProof(foreign(proof), { key: PROOFS.log_key })), proofWant);
  const policy = hexOf(POLICIES.valid[0].policy);
  assert.equal(outcome(() => parsePolicyFile(foreign(policy))), outcome(() => parsePolicyFile(local(policy))));
  const withPolicy = outcome(() => api.verifyHandProof(local(proof), { key: PROOFS.log_key, policy: local(policy) }));
  assert.doesNotMatch(withPolicy, /^TypeError/);
  assert.equal(outcome(() => api.verifyHandProof(foreign(proof), { key: PROOFS.log_key, policy: foreign(policy) })), withPolicy);
  // A list of numbers is not a file's bytes: refused as before, never read.
  assert.equal(outcome(() => api.verifyTranscript(Array.from(local(text)))), outcome(() => api.verifyTranscript([])));
  assert.equal(outcome(() => parsePolicyFile(Array.from(local(policy)))), "TypeError: a tlog-policy file is bytes or a string");
  assert.equal(
    outcome(() => api.verifyHandProof(local(proof), { key: PROOFS.log_key, policy: Array.from(local(policy)) })),
    "TypeError: policy is a tlog-policy file's text or bytes",
  );
});

test("errorDetails and transcriptFromMessage take another realm's bytes, and refuse text", () => {
  // google.rpc.Status { code: 3, message: "x" }, as a grpc library hands the trailer over.
  const status = "08031201" + "78";
  const want = outcome(() => api.errorDetails(local(status)));
  assert.match(want, /"code":3/);
  assert.equal(outcome(() => api.errorDetails(foreign(status))), want);
  assert.equal(outcome(() => api.errorDetails({ get: () => [foreign(status)] })), want);
  assert.equal(outcome(() => api.errorDetails({ get: () => [status] })), "StatusDecodeError: grpc-status-details-bin is not binary");
  const message = (b) => ({ version: "fairdeck-v1", deck: "standard", hand_id: "h-1", commitment: b("ab".repeat(32)), server_seed: b("cd".repeat(32)), client_seeds: [b("01")], cards: [0, 1] });
  const got = outcome(() => api.transcriptFromMessage(message(local)));
  assert.match(got, /^\{/);
  assert.equal(outcome(() => api.transcriptFromMessage(message(foreign))), got);
  assert.match(outcome(() => api.transcriptFromMessage(message((h) => h))), /^TypeError: commitment must be bytes/);
});
