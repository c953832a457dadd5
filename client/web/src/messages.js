// The dealer's gRPC messages, as a Node program receives them (@grpc/proto-loader or generated
// code), turned into what the verifiers read: a transcript value (docs/fairness-spec.md section
// 7.2) and a hand proof's text (docs/hand-proof.md, format 1, or 3 with the key rotation
// statements after a rotation, as `fairdeck hand get` writes it).
//
// Fields are read under either name a loader gives them (`hand_id` with keepCase, `handId`
// without). Bytes must be bytes (Uint8Array or Buffer: proto-loader's default, not its
// `bytes: String` option), uint64 numbers a BigInt, a safe integer, a decimal string or a Long.
import { isBytes } from "./bytes.js";
import { HAND_PROOF_TYPE } from "./handproof.js";
import { chainTo } from "./rotation.js";
import { HEADER as TLOG_PROOF_HEADER } from "./tlogproof.js";
import { SPEC_NAMES, VerificationError, codeForId, deckSpec, toHex } from "./spec.js";
import { head, length, pyrepr } from "./words.js";

const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

function field(message, name) {
  if (message === null || typeof message !== "object") throw new TypeError(`expected a message with ${name}`);
  return message[name] ?? message[camel(name)];
}

function bytes(value, name) {
  if (!isBytes(value)) {
    throw new TypeError(`${name} must be bytes (a Buffer or Uint8Array); with proto-loader, leave its "bytes" option unset`);
  }
  return value;
}

function uint64(value, name) {
  const text = typeof value === "bigint" || typeof value === "number" ? String(value) : value?.toString?.();
  if (typeof text !== "string" || !/^(?:0|[1-9][0-9]*)$/.test(text) || (typeof value === "number" && !Number.isSafeInteger(value))) {
    throw new TypeError(`${name} must be an unsigned integer (a BigInt, a safe integer, a decimal string or a Long), got ${String(value)}`);
  }
  return BigInt(text);
}

/**
 * The transcript value of a dealer's Transcript message: seeds and commitment in hex, cards as
 * codes. A card id that is not in the deck, or a deck this version does not know, is the step
 * "malformed", worded as `fairdeck verify` words it.
 */
export function transcriptFromMessage(message) {
  const deck = field(message, "deck");
  const spec = deckSpec(deck);
  if (!spec) {
    const name = String(deck);
    const shown = length(name) <= 20 ? name : `${head(name, 20)}...`;
    throw new VerificationError("malformed", `unknown deck spec ${pyrepr(shown)}; known: ${SPEC_NAMES.join(", ")}`);
  }
  const ids = field(message, "cards") ?? [];
  return {
    version: field(message, "version"),
    deck,
    hand_id: field(message, "hand_id"),
    commitment: toHex(bytes(field(message, "commitment"), "commitment")),
    server_seed: toHex(bytes(field(message, "server_seed"), "server_seed")),
    client_seeds: (field(message, "client_seeds") ?? []).map((s, i) => toHex(bytes(s, `client_seeds[${i}]`))),
    cards: ids.map((id, position) => {
      if (!Number.isInteger(id) || !spec.idSet.has(id)) {
        throw new VerificationError("malformed", `cards[${position}]: card id ${id} is not in deck ${pyrepr(deck)}`);
      }
      return codeForId(id, spec.shoe);
    }),
  };
}

/** The code of card `id` in `deck` ("As", "X1", "7h.3"): what DrawCards' ids stand for. */
export function cardCode(deck, id) {
  const spec = deckSpec(deck);
  if (!spec) throw new RangeError(`unknown deck spec ${pyrepr(String(deck))}; known: ${SPEC_NAMES.join(", ")}`);
  if (!Number.isInteger(id) || !spec.idSet.has(id)) throw new RangeError(`card id ${id} is not in deck ${pyrepr(deck)}`);
  return codeForId(id, spec.shoe);
}

function receipt(message, name) {
  if (!message) throw new TypeError(`${name} is missing: the GetInclusionProof response for the hand's ${name} entry`);
  return {
    index: uint64(field(message, "index"), `${name}.index`),
    tree_size: uint64(field(message, "tree_size"), `${name}.tree_size`),
    hashes: (field(message, "hashes") ?? []).map((h, i) => b64(bytes(h, `${name}.hashes[${i}]`))),
    entry: b64(bytes(field(message, "entry"), `${name}.entry`)),
    signed_checkpoint: new TextDecoder("utf-8").decode(bytes(field(message, "signed_checkpoint"), `${name}.signed_checkpoint`)),
  };
}

const b64 = (raw) => btoa(Array.from(raw, (b) => String.fromCharCode(b)).join(""));

/**
 * A closed hand's proof, as text: `hand` is the Hand message of CloseHand or GetHand (its
 * transcript and dealt count), `commit` and `reveal` the GetInclusionProof responses for its two
 * entries (the commit one asked at the reveal's tree size), `logKey` the log's verifier key, and
 * `keyRotations` the `key_rotations` of GetPublicKey's response: when valid statements lead to the
 * checkpoint's key, the proof is of format 3 and carries them, so a player who holds a key from
 * before the rotation can check it. The text is what `verifyHandProof`, `fairdeck verify` and the
 * verifier page read; it is not checked here.
 */
export function handProofText({ hand, commit, reveal, logKey, keyRotations = [] }) {
  const transcript = field(hand, "transcript");
  if (!transcript) throw new TypeError("hand has no transcript: only a closed hand has a proof");
  const value = transcriptFromMessage(transcript);
  const dealt = Number(field(hand, "dealt_count") ?? 0);
  if (typeof logKey !== "string") throw new TypeError("logKey must be the log's verifier key (a string)");
  if (!Array.isArray(keyRotations)) throw new TypeError("keyRotations is the key_rotations list of GetPublicKey's response");
  const receipts = { commit: receipt(commit, "commit"), reveal: receipt(reveal, "reveal") };
  const signed = bytes(field(reveal, "signed_checkpoint"), "reveal.signed_checkpoint");
  const chain = chainTo(keyRotations.map((n, i) => bytes(n, `keyRotations[${i}]`)), signed);
  // After a rotation, format 3: the statements that lead to the checkpoint's key travel with it.
  const proof = {
    type: HAND_PROOF_TYPE,
    format: chain.length ? 3 : 1,
    transcript: value,
    dealt: value.cards.slice(0, dealt),
    commit: chain.length ? tlogProofText(receipts.commit) : receipts.commit,
    reveal: chain.length ? tlogProofText(receipts.reveal) : receipts.reveal,
    log_key: logKey,
  };
  if (chain.length) proof.key_rotations = chain.map((r) => new TextDecoder("utf-8").decode(r.note));
  return `${json(proof, "")}\n`;
}

/** A format-1 receipt object as a C2SP tlog-proof text (docs/hand-proof.md, format 2). */
function tlogProofText(r) {
  const lines = [TLOG_PROOF_HEADER, `extra ${r.entry}`, `index ${r.index}`, ...r.hashes];
  return `${lines.join("\n")}\n\n${r.signed_checkpoint}`;
}

/** JSON text, two spaces of indent, BigInts written as the plain digits JSON numbers are. */
function json(value, indent) {
  if (typeof value === "bigint" || typeof value === "number") return String(value);
  if (typeof value === "string") return JSON.stringify(value);
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (!value.length) return "[]";
    return `[\n${value.map((v) => inner + json(v, inner)).join(",\n")}\n${indent}]`;
  }
  const names = Object.keys(value);
  return `{\n${names.map((k) => `${inner}${JSON.stringify(k)}: ${json(value[k], inner)}`).join(",\n")}\n${indent}}`;
}
