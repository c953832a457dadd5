// Hand proofs (docs/hand-proof.md): one file a player checks offline with the log's key alone, read
// and checked exactly as the Python reader (fairdeck.log.handproof) does, with the same failed
// step and the same words. Format 1 holds the receipts as JSON objects, format 2 as C2SP
// tlog-proof texts (tlogproof.js), format 3 as format 2 with the log key rotation statements that
// lead to the checkpoint's key (rotation.js); the checks and their order are the same for all.
import {
  VerificationError,
  equalBytes,
  transcriptFromValue,
  verifyTranscript,
} from "./spec.js";
import { JNumber, isObject, loads, StrictJSONError } from "./strictjson.js";
import { head, pylist, pyrepr, pyreprValue } from "./words.js";
import {
  LogError,
  checkPolicy,
  decodeEntry,
  deckDigest,
  describePolicy,
  leafHash,
  openCheckpoint,
  receiptFromValue,
  verifyInclusion,
} from "./log.js";
import { parseTlogProof } from "./tlogproof.js";
import { MAX_CHAIN, checkChain, followedKeys } from "./rotation.js";

export const HAND_PROOF_TYPE = "fairdeck-hand-proof";
export const HAND_PROOF_STEPS = ["format", "commitment", "deck", "cards", "entries", "rotations", "checkpoint", "inclusion", "cosignatures"];
/** The formats this verifier reads (docs/hand-proof.md). */
export const HAND_PROOF_FORMATS = ["1", "2", "3"];
const PROOF_NAMES = ["type", "format", "transcript", "dealt", "commit", "reveal", "log_key"];
const PROOF_NAMES_3 = [...PROOF_NAMES, "key_rotations"];
const MAX_PROOF_BYTES = 1024 * 1024;

const fail = (step, detail) => new VerificationError(step, detail);

/** The format of a co-dealt hand's proof (docs/hand-proof.md, "Format 4"; codeal/handfile.js). */
export const CODEAL_FORMAT = 4;
/** A co-dealt hand's proof with its log receipts and seal statements ("Format 5"; codeal/logged.js). */
export const LOGGED_CODEAL_FORMAT = 5;

/**
 * A hand proof's bytes, read once under the strict rules (at most 1 MiB): its value, numbers as
 * JNumber; or VerificationError at step "format". Every format starts here, as in the Python reader.
 */
export function readHandProofValue(bytes) {
  if (bytes.length > MAX_PROOF_BYTES) throw fail("format", `a hand proof is at most ${MAX_PROOF_BYTES} bytes`);
  try {
    return loads(bytes);
  } catch (e) {
    if (e instanceof StrictJSONError) throw fail("format", `not a hand proof: ${e.message}`);
    throw e;
  }
}

/** The format of a hand proof's value (its type right, its format a plain whole number), else null: what a verifier dispatches on. */
export function formatOf(d) {
  if (!isObject(d) || d.type !== HAND_PROOF_TYPE) return null;
  return d.format instanceof JNumber && /^(0|[1-9][0-9]{0,5})$/.test(d.format.text) ? Number(d.format.text) : null;
}

/** Step "format": read a hand proof's bytes strictly (formats 1 to 3). */
export function handProofFromBytes(bytes) {
  return handProofFromValue(readHandProofValue(bytes));
}

/** Step "format": a hand proof of format 1, 2 or 3 from its strict value (readHandProofValue). */
export function handProofFromValue(d) {
  if (!isObject(d) || d.type !== HAND_PROOF_TYPE) throw fail("format", `not a hand proof: want an object with "type": "${HAND_PROOF_TYPE}"`);
  if (!(d.format instanceof JNumber) || !HAND_PROOF_FORMATS.includes(d.format.text)) {
    const shown = d.format instanceof JNumber ? d.format.text : head(pyreprValue(d.format ?? null), 20);
    const e = fail("format", `unknown hand proof format ${shown}; this verifier reads 1 to 5`);
    // A format above those known may be a later one this copy of the page predates: the page says so.
    if (/^[1-9][0-9]{0,5}$/.test(shown) && Number(shown) > HAND_PROOF_FORMATS.length) e.newerFormat = Number(shown);
    throw e;
  }
  const format = Number(d.format.text);
  // A "codeal" object is no part of formats 1 to 3: a co-dealt hand's proof is format 4.
  const names = format === 3 ? PROOF_NAMES_3 : PROOF_NAMES;
  if (Object.keys(d).length !== names.length || !names.every((k) => k in d)) {
    throw fail("format", `a hand proof of format ${format} has exactly the names ${pylist([...names].sort())}`);
  }
  let transcript;
  try {
    transcript = transcriptFromValue(d.transcript);
  } catch (e) {
    if (e instanceof VerificationError) throw fail("format", `transcript: ${e.detail}`);
    throw e;
  }
  if (!Array.isArray(d.dealt) || !d.dealt.every((c) => typeof c === "string")) throw fail("format", "dealt must be a list of card codes");
  if (typeof d.log_key !== "string") throw fail("format", "log_key must be a string");
  const receipts = {};
  for (const name of ["commit", "reveal"]) {
    if (format >= 2 && typeof d[name] !== "string") throw fail("format", `${name}: in format ${format}, ${name} is a tlog-proof text`);
    try {
      receipts[name] = format >= 2 ? parseTlogProof(d[name]) : receiptFromValue(d[name]);
    } catch (e) {
      if (e instanceof LogError) throw fail("format", `${name}: ${e.message}`);
      throw e;
    }
  }
  const rotations = d.key_rotations ?? [];
  if (!Array.isArray(rotations) || !rotations.every((n) => typeof n === "string")) {
    throw fail("format", "key_rotations must be a list of rotation statements, each a signed note's text");
  }
  if (rotations.length > MAX_CHAIN) throw fail("format", `a hand proof carries at most ${MAX_CHAIN} key rotation statements`);
  const keyRotations = rotations.map((n) => new TextEncoder().encode(n));
  return { format, transcript, dealt: d.dealt, commit: receipts.commit, reveal: receipts.reveal, logKey: d.log_key, keyRotations };
}

/**
 * Every check of docs/hand-proof.md, in its order. `onStep(name, detail)` is told of each step
 * that holds. `verifiers`: the log's key, or a list of keys (a rotation's, every one used: the
 * checkpoint verifies if any of them signed it), to which the file's key rotation statements,
 * checked first, may lead. Returns the checkpoint, with `signedBy`, the keys that signed it (a
 * key reached by statements carries `via`: { from, rotations }); raises VerificationError at the
 * first step that fails. With no key (the player gave none: null or an empty list), stops after
 * "rotations" and returns null.
 */
export function verifyHandProof(proof, verifiers, policy = null, onStep = () => {}) {
  const t = proof.transcript;
  try {
    verifyTranscript(t);
  } catch (e) {
    if (e instanceof VerificationError && e.step === "deck") onStep("commitment");
    throw e;
  }
  onStep("commitment");
  onStep("deck");
  const deck = t.codes;
  if (proof.dealt.length > deck.length) throw fail("cards", `${proof.dealt.length} cards dealt from a deck of ${deck.length}`);
  proof.dealt.forEach((code, position) => {
    if (code !== deck[position]) {
      throw fail("cards", `card ${position + 1} dealt was ${pyrepr(head(code, 8))}; the re-derived deck has ${deck[position]} there`);
    }
  });
  onStep("cards");
  checkEntries(proof);
  onStep("entries");
  const cp = checkReceipts([["commit", proof.commit], ["reveal", proof.reveal]], proof.keyRotations ?? [], verifiers, onStep);
  if (cp === null) return null;
  if (policy) {
    let result;
    try {
      result = checkPolicy(policy, proof.reveal.signedCheckpoint);
    } catch (e) {
      if (e instanceof LogError) throw fail("cosignatures", e.message);
      throw e;
    }
    if (!result.ok) throw fail("cosignatures", describePolicy(result));
    onStep("cosignatures", result);
  }
  return cp;
}

/**
 * Steps "rotations", "checkpoint" and "inclusion" of a hand proof's named receipts (formats 1 to 3:
 * commit and reveal; format 5: a co-dealt hand's setup, seals and seeds), as the Python reference's
 * check_receipts: the statements lead to the last receipt's checkpoint, every receipt names that
 * checkpoint, it verifies under a key given or one the statements lead to, and each entry is in its
 * tree. `onStep` is told of rotations (the chain), checkpoint and inclusion (the checkpoint). With no
 * key, stops after "rotations" and returns null.
 */
export function checkReceipts(receipts, keyRotations, verifiers, onStep = () => {}) {
  const note = receipts[receipts.length - 1][1].signedCheckpoint;
  let chain;
  try {
    chain = checkChain(keyRotations, note);
  } catch (e) {
    if (e instanceof LogError) throw fail("rotations", e.message);
    throw e;
  }
  onStep("rotations", chain);
  if (verifiers === null || (Array.isArray(verifiers) && !verifiers.length)) return null;
  const keys = followedKeys(Array.isArray(verifiers) ? verifiers : [verifiers], chain);
  if (receipts.some(([, r]) => !equalBytes(r.signedCheckpoint, note))) {
    throw fail("checkpoint", `the ${receipts.length === 2 ? "two" : receipts.length} receipts lead to different checkpoints`);
  }
  let cp;
  try {
    cp = openCheckpoint(note, keys);
  } catch (e) {
    if (e instanceof LogError) throw fail("checkpoint", `checkpoint does not verify under the log key: ${e.message}`);
    throw e;
  }
  onStep("checkpoint", cp);
  for (const [name, receipt] of receipts) {
    if (receipt.treeSize !== cp.size) throw fail("inclusion", `the ${name} receipt is for tree size ${receipt.treeSize}`);
    try {
      verifyInclusion(receipt.index, cp.size, leafHash(receipt.entry), receipt.hashes, cp.root);
    } catch (e) {
      if (e instanceof LogError) throw fail("inclusion", `the ${name} entry is not in the signed tree: ${e.message}`);
      throw e;
    }
  }
  onStep("inclusion", cp);
  return cp;
}

function checkEntries(proof) {
  const t = proof.transcript;
  let commit;
  let reveal;
  try {
    commit = decodeEntry(proof.commit.entry);
    reveal = decodeEntry(proof.reveal.entry);
  } catch (e) {
    if (e instanceof LogError) throw fail("entries", `a log entry does not parse: ${e.message}`);
    throw e;
  }
  if (commit.type !== "commit" || commit.handId !== t.handId) throw fail("entries", "the commit receipt is not of this hand's commitment");
  if (!equalBytes(commit.commitment, t.commitment) || commit.deck !== t.deck || commit.version !== t.version) {
    throw fail("entries", "the logged commitment is not the transcript's");
  }
  if (reveal.type !== "reveal" || reveal.handId !== t.handId) throw fail("entries", "the reveal receipt is not of this hand's reveal");
  const seedsEqual =
    reveal.clientSeeds.length === t.clientSeeds.length && reveal.clientSeeds.every((s, i) => equalBytes(s, t.clientSeeds[i]));
  if (!equalBytes(reveal.serverSeed, t.serverSeed) || !seedsEqual || !equalBytes(reveal.deckDigest, deckDigest(t.cards))) {
    throw fail("entries", "the logged reveal differs from the transcript");
  }
}

