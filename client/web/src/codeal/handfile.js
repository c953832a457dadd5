// The co-dealt hand proof, format 4 of docs/hand-proof.md: read strictly, its co-dealers' identity
// signatures checked against the keys the player pins (never keys read from the file), then
// section 10 of docs/codealing-spec.md whole. The same order, steps and words as the Python
// reference (fairdeck.codeal.handfile), which `fairdeck verify --codealer-key` runs.
import { ed25519 } from "@noble/curves/ed25519.js";
import { codeForId, concat, equalBytes, fromHex, lp, u32, RANKS, SUITS } from "../spec.js";
import { JNumber, isObject } from "../strictjson.js";
import { head as first, pylist, pyrepr } from "../words.js";
import { MAX_HOLDERS, MIN_HOLDERS, V, fail, label } from "./group.js";
import { codealSpec, decodeKeyRecord, handContext, head as holderHead, verifyCodealHand } from "./hand.js";

const TYPE = "fairdeck-hand-proof";
const FORMAT = 4;
const HEX = /^(?:[0-9a-f]{2})+$/;
const INT = /^(0|[1-9][0-9]{0,9})$/;

const bad = (detail) => fail("encoding", detail);

export function names(value, want, what) {
  if (!isObject(value) || Object.keys(value).length !== want.length || !want.every((k) => Object.hasOwn(value, k))) {
    throw bad(`${what}: want an object with exactly ${pylist(want)}`);
  }
}
export function list(value, what) {
  if (!Array.isArray(value)) throw bad(`${what}: want an array`);
  return value;
}
export function str(value, what) {
  if (typeof value !== "string") throw bad(`${what}: want a string`);
  return value;
}
export function hex(value, what) {
  if (typeof value !== "string" || !HEX.test(value)) throw bad(`${what}: want lower-case hex of whole bytes`);
  return fromHex(value);
}
export function int(value, what) {
  if (!(value instanceof JNumber) || !INT.test(value.text)) throw bad(`${what}: want a non-negative JSON integer`);
  return Number(value.text);
}

/** A card code's id, as fairdeck.core.cards.Card.parse reads it (its words on a malformed code). */
function cardId(code) {
  const jokers = ["X1", "X2"];
  if (jokers.includes(code)) return 52 + jokers.indexOf(code);
  const chars = Array.from(code);
  const shown = chars.length <= 8 ? code : `${first(code, 8)}...`;
  const dot = code.indexOf(".");
  const headPart = Array.from(dot < 0 ? code : code.slice(0, dot));
  const tail = dot < 0 ? null : code.slice(dot + 1);
  if (headPart.length !== 2 || !RANKS.includes(headPart[0]) || !SUITS.includes(headPart[1])) {
    throw new Error(`malformed card code ${pyrepr(shown)}: want rank ${pyrepr(RANKS)} then suit ${pyrepr(SUITS)}, or X1/X2 for a joker`);
  }
  const base = 13 * SUITS.indexOf(headPart[1]) + RANKS.indexOf(headPart[0]);
  if (tail === null) return base;
  if (Array.from(tail).length !== 1 || !(tail >= "1" && tail <= "8")) throw new Error(`malformed card code ${pyrepr(shown)}: deck number must be 1..8`);
  return 52 * (Number(tail) - 1) + base;
}

/**
 * Step "encoding": a format-4 proof from its strict value (readHandProofValue): the hand for
 * verifyCodealHand (card ids, bytes as Uint8Array, seeds null while not revealed), its
 * identities, and the dealt cards' codes as the file writes them.
 */
export function codealProofFromValue(top) {
  names(top, ["type", "format", "deck", "hand_id", "codeal"], "hand proof");
  return codealRecordFromValue(top, FORMAT);
}

/**
 * The "type", "format", "deck", "hand_id" and "codeal" of a proof of format `fmt` (4, or 5 whose
 * dealt positions name their seat key, `seatKey`: a Uint8Array, empty for a public card), as the
 * Python reference's read_record; step "encoding".
 */
export function codealRecordFromValue(top, fmt) {
  if (top.type !== TYPE || int(top.format, "format") !== fmt) throw bad(`want a ${pyrepr(TYPE)} of format ${fmt}`);
  const deck = str(top.deck, "deck");
  const handId = str(top.hand_id, "hand_id");
  const spec = codealSpec(deck);
  const c = top.codeal;
  names(c, ["version", "keys", "shuffles", "identities", "dealt", "seeds"], "codeal");
  if (c.version !== V) throw bad(`codeal.version: want ${pyrepr(V)}`);
  const identities = list(c.identities, "identities").map((item, i) => {
    names(item, ["holder", "key", "key_signature", "shuffle_signature"], `identities[${i}]`);
    return {
      holder: int(item.holder, `identities[${i}].holder`),
      key: hex(item.key, `identities[${i}].key`),
      keySignature: hex(item.key_signature, `identities[${i}].key_signature`),
      shuffleSignature: hex(item.shuffle_signature, `identities[${i}].shuffle_signature`),
    };
  });
  const dealt = list(c.dealt, "dealt").map((item, i) => {
    names(item, fmt > FORMAT ? ["position", "card", "shares", "seat_key"] : ["position", "card", "shares"], `dealt[${i}]`);
    const code = str(item.card, `dealt[${i}].card`);
    let card;
    try {
      card = cardId(code);
    } catch (e) {
      throw bad(`dealt[${i}].card: ${e.message}`);
    }
    // The deck's own code only ("As" in a standard deck, "As.1" in a shoe), as the dealer writes it.
    if (!spec.idSet.has(card) || codeForId(card, spec.shoe) !== code) throw bad(`dealt[${i}].card: not a card of deck ${pyrepr(deck)}`);
    const shares = list(item.shares, `dealt[${i}].shares`).map((s) => hex(s, `dealt[${i}].shares`));
    const position = int(item.position, `dealt[${i}].position`);
    if (fmt === FORMAT) return { position, card, code, shares };
    const seatKey = item.seat_key === "" ? new Uint8Array(0) : hex(item.seat_key, `dealt[${i}].seat_key`);
    if (seatKey.length !== 0 && seatKey.length !== 32) throw bad(`dealt[${i}].seat_key: a seat key is 32 bytes, or empty for a public card`);
    return { position, card, code, shares, seatKey };
  });
  const seeds = list(c.seeds, "seeds").map((s) => hex(s, "seeds"));
  const keys = list(c.keys, "keys").map((k) => hex(k, "keys"));
  const shuffles = list(c.shuffles, "shuffles").map((s) => hex(s, "shuffles"));
  return { hand: { deck, handId, keys, shuffles, dealt, seeds: seeds.length ? seeds : null }, identities };
}

const verifyEd25519 = (pub, msg, sig) => {
  try {
    return ed25519.verify(sig, msg, pub, { zip215: false });
  } catch {
    return false; // a key that is not a point: not signed by it
  }
};

function verifyIdentity(key, statement, signature, step, what) {
  if (key.length !== 32 || signature.length !== 64) throw bad(`${what}: an identity key is 32 bytes and a signature 64`);
  if (!verifyEd25519(key, statement, signature)) throw fail(step, `${what}: not signed by the pinned identity key`);
}

/**
 * Section 5.5: holders 1..K-1 are the co-dealers the player pins (`pinned`: 32-byte keys, holder
 * order), and each signed its key record and its shuffle record. Raises VerificationError.
 */
export function verifyIdentities(hand, identities, pinned) {
  // 10.1 encoding and 10.2 key come first: the context needs every key record.
  const spec = codealSpec(hand.deck);
  const records = hand.keys.map((bytes, k) => decodeKeyRecord(bytes, k));
  if (!(records.length >= MIN_HOLDERS && records.length <= MAX_HOLDERS)) throw bad(`a hand has ${MIN_HOLDERS} to ${MAX_HOLDERS} key holders`);
  const ctx = handContext(spec, hand.handId, records);
  const holders = records.length;
  if (hand.shuffles.length !== holders) throw fail("transcript", `want one shuffle per holder in order 0..${holders - 1}`);
  const sorted = [...identities].sort((a, b) => a.holder - b.holder);
  if (sorted.length !== holders - 1 || sorted.some((id, i) => id.holder !== i + 1)) throw fail("key", "want one identity per co-dealer (holders 1..K-1)");
  if (pinned.length !== holders - 1) throw fail("key", `the hand has ${holders - 1} co-dealers; pin one identity key for each`);
  for (const id of sorted) {
    const k = id.holder;
    if (!equalBytes(id.key, pinned[k - 1])) throw fail("key", `holder ${k} is not the pinned co-dealer (another identity key)`);
    const keyStatement = concat(label("identity key record"), holderHead(spec, hand.handId), u32(k), u32(holders), hand.keys[k]);
    verifyIdentity(id.key, keyStatement, id.keySignature, "key", `holder ${k} key record`);
    const shuffleStatement = concat(label("identity shuffle record"), ctx.bytes, lp(hand.shuffles[k]));
    verifyIdentity(id.key, shuffleStatement, id.shuffleSignature, "shuffle", `holder ${k} shuffle record`);
  }
}

/** "OK: co-dealt hand H verified (...)", the line `fairdeck verify` prints for a format-4 proof that holds. */
export function codealProofOkLine(hand, holders) {
  const seeds = hand.seeds ? "revealed" : "not yet revealed";
  return `OK: co-dealt hand ${hand.handId} verified (${hand.deck}, ${hand.dealt.length} cards dealt, ${holders} key holders, seeds ${seeds})`;
}

/**
 * A format-4 proof's value against the pinned co-dealer keys: the identities, then section 10.
 * `onStep(step)` is told of each step of section 10 that held. Returns verifyCodealHand's result;
 * raises VerificationError at the first step that fails.
 */
export function verifyCodealProof(proof, pinned, onStep = () => {}) {
  verifyIdentities(proof.hand, proof.identities, pinned);
  return verifyCodealHand(proof.hand, onStep);
}

/** A co-dealer key the player gave is not one: an input error, never a verdict. */
export class CodealerKeyError extends Error {}

/** The identity keys a player pins: hex text (one a line, or separated by spaces) or an array; an Error naming the bad one. */
export function codealerKeysOf(input) {
  if (input === null || input === undefined) return [];
  const text = Array.isArray(input) ? input.join("\n") : String(input);
  const words = text.split("\n").filter((l) => !l.trim().startsWith("#")).join(" ").split(/\s+/).filter(Boolean);
  return words.map((w, i) => {
    if (!/^[0-9a-fA-F]{64}$/.test(w)) {
      throw new CodealerKeyError(`co-dealer key ${i + 1} of the ${words.length} given (${first(w, 20)}${w.length > 20 ? "..." : ""}): want 64 hex digits (32 bytes, from its operator)`);
    }
    return fromHex(w.toLowerCase());
  });
}
