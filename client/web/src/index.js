// fairdeck's verifier for Node.js and browsers: the code the verifier page runs, as a package.
//
//   import { verifyHandProof, verifyTranscript, errorDetails } from "@fairdeck/verifier";
//
// verifyTranscript and verifyHandProof check what `fairdeck verify` checks and raise a
// VerificationError with the same `step` and the same words; check() gives the page's report
// instead of raising. errorDetails() reads a refused call's google.rpc.Status, ErrorInfo and
// RetryInfo. transcriptFromMessage() and handProofText() turn the dealer's gRPC messages into
// what these read. verifyCodealHand checks a co-dealt hand (docs/codealing-spec.md) and
// openSeatCard opens a seat's own card on its device; HandSeat keeps a seat's key and cards
// through a hand and gives its release tokens (seatReleases) once its play is over. Types: index.d.ts. Nothing here touches the network, a clock or a file.
import { isBytes } from "./bytes.js";
import { LogError } from "./log.js";
import { LOGGED_CODEAL_FORMAT, formatOf, handProofFromBytes, readHandProofValue, verifyHandProof as verifyProof } from "./handproof.js";
import { loggedProofFromValue, loggedProofOkLine, verifyLoggedProof } from "./codeal/logged.js";
import {
  CodealerKeyError,
  codealProofFromValue,
  codealProofOkLine,
  codealerKeysOf,
  verifyCodealProof as verifyCodealProof_,
} from "./codeal/handfile.js";
import { SPEC_NAMES, SUPPORTED_VERSIONS, VerificationError, toHex, transcriptFromBytes, transcriptFromValue, verifyTranscript as verifyValue } from "./spec.js";
import { isHandProof, keysOf, policyOf, verdictLine, verifyBytes } from "./verify.js";

export { LogError, SPEC_NAMES, SUPPORTED_VERSIONS, VerificationError, isHandProof, verdictLine };
export { PolicyFileError } from "./policy.js";
export { HAND_PROOF_CHECKS, TRANSCRIPT_CHECKS } from "./verify.js";
export { StrictJSONError } from "./strictjson.js";
export {
  CODEAL_STEPS,
  CODEAL_VERSION,
  codealHandFromVector,
  codealLine,
  checkSeals,
  combineShares,
  HandSeat,
  newSeatKey,
  openSealedShare,
  openSeatCard,
  SeatStateError,
  sealRelease,
  sealStatement,
  seatContext,
  seatPublicKey,
  seatReleases,
  verifyCodealHand,
} from "./codeal/index.js";
export { CODEAL_CHECKS } from "./codeal/report.js";
export { ERROR_DOMAIN, STATUS_DETAILS_KEY, StatusDecodeError, decodeErrorInfo, decodeRetryInfo, decodeStatus, errorDetails } from "./status.js";
export { cardCode, handProofText, transcriptFromMessage } from "./messages.js";

/** Text (a string, as UTF-8) or bytes (a Uint8Array or Buffer), exactly as written. */
function asBytes(input, what) {
  if (isBytes(input)) return input;
  if (typeof input === "string") return new TextEncoder().encode(input);
  throw new TypeError(`${what} is checked on its exact text: pass the file's bytes or its text, not a parsed object`);
}

function summary(t) {
  return {
    version: t.version,
    deck: t.deck,
    handId: t.handId,
    commitment: toHex(t.commitment),
    serverSeed: toHex(t.serverSeed),
    clientSeeds: t.clientSeeds.map(toHex),
    cards: t.codes,
  };
}

/**
 * Check a revealed hand (docs/fairness-spec.md section 6): its text (bytes or a string, read by the
 * rules of section 7.1) or its value (an object, as transcriptFromMessage gives). Returns the
 * transcript; raises VerificationError at the first step that fails.
 */
export function verifyTranscript(input) {
  const t = isBytes(input) || typeof input === "string" ? transcriptFromBytes(asBytes(input, "a transcript")) : transcriptFromValue(input);
  verifyValue(t);
  return summary(t);
}

/**
 * Check a hand proof (docs/hand-proof.md, format 1, 2 or 3) against the log's key, which the
 * caller got from the operator (never the one written in the file), or a key the file's rotation
 * statements lead to from it (format 3: each statement signed by both its keys), and, with `witnesses` ("NAME=KEY"
 * strings) and a `threshold` (default: all), or a C2SP tlog-policy file (`policy`, its text or
 * bytes: witness, group and quorum lines), the witnesses' cosignatures. `key` may hold several
 * keys (an array, or a text with one a line, as a key file holds them): after a rotation, a proof
 * signed by any of them verifies. Returns the transcript, the cards dealt and the checkpoint both
 * entries are in, with the keys that signed it; raises VerificationError at the first step that
 * fails, or LogError when a key, a witness or the policy file given is not valid (the file's
 * error names its line), or a threshold comes with no witness (no cosignature would be checked).
 */
export function verifyHandProof(input, { key, witnesses = [], threshold = null, policy = null } = {}) {
  const keyList = Array.isArray(key) && key.every((k) => typeof k === "string");
  if (!(keyList || typeof key === "string")) {
    throw new TypeError("verifyHandProof needs the log's key: { key: 'origin+hash+base64' }, or a list of keys");
  }
  if (!Array.isArray(witnesses)) throw new TypeError("witnesses is an array of 'NAME=KEY' strings");
  if (threshold !== null && !Number.isInteger(threshold)) throw new TypeError("threshold is a whole number, or null for all the witnesses");
  const verifiers = keysOf(key);
  if (!verifiers.length) throw new TypeError("verifyHandProof needs the log's key: { key: 'origin+hash+base64' }, or a list of keys");
  if (policy !== null && typeof policy !== "string" && !isBytes(policy)) {
    throw new TypeError("policy is a tlog-policy file's text or bytes");
  }
  const witnessPolicy = policyOf(witnesses, threshold, policy);
  const proof = handProofFromBytes(asBytes(input, "a hand proof"));
  const checkpoint = verifyProof(proof, verifiers, witnessPolicy);
  return {
    transcript: summary(proof.transcript),
    dealt: proof.dealt,
    checkpoint: {
      origin: checkpoint.origin,
      size: checkpoint.size,
      root: checkpoint.root,
      signedBy: checkpoint.signedBy.map((v) => v.text),
    },
  };
}

/**
 * Check a co-dealt hand's proof (docs/hand-proof.md, format 4, or 5 with its receipts: then also
 * against the log keys `key`, and a witness policy as verifyHandProof takes one) against the co-dealers' identity
 * keys the caller pins (`codealerKeys`: hex, holder order, from each co-dealer's operator; never
 * the keys written in the file), as `fairdeck verify --codealer-key` does: the identities, then
 * docs/codealing-spec.md section 10. Returns the hand, its cards and `line`, the OK line `fairdeck
 * verify` prints; raises VerificationError at the first step that fails (step "format" for a text
 * that is not JSON), TypeError without a key or with a key that is not 64 hex digits.
 */
export function verifyCodealProof(input, { codealerKeys, key, witnesses = [], threshold = null, policy = null } = {}) {
  const given = Array.isArray(codealerKeys) ? codealerKeys : codealerKeys === undefined ? [] : [codealerKeys];
  let pinned;
  try {
    pinned = codealerKeysOf(given);
  } catch (e) {
    if (e instanceof CodealerKeyError) throw new TypeError(e.message);
    throw e;
  }
  if (!pinned.length) throw new TypeError("verifyCodealProof needs each co-dealer's identity key: { codealerKeys: ['64 hex digits'] }");
  const value = readHandProofValue(asBytes(input, "a hand proof"));
  if (formatOf(value) === LOGGED_CODEAL_FORMAT) {
    // Format 5: the receipts too, against the log keys the caller gives (never the file's log_key).
    const verifiers = keysOf(key);
    if (!verifiers.length) throw new TypeError("a co-dealt hand proof of format 5 carries log receipts: give the log's key, { key: 'origin+id+base64' }");
    const proof = loggedProofFromValue(value);
    const r = verifyLoggedProof(proof, pinned, verifiers, policyOf(witnesses, threshold, policy));
    return { ...codealResult(proof.hand, r.holders), inLogAt: r.checkpoint.size, line: loggedProofOkLine(proof.hand, r.holders, r.checkpoint) };
  }
  const proof = codealProofFromValue(value);
  const r = verifyCodealProof_(proof, pinned);
  return { ...codealResult(proof.hand, r.holders), line: codealProofOkLine(proof.hand, r.holders) };
}

function codealResult(hand, holders) {
  return {
    handId: hand.handId,
    deck: hand.deck,
    holders,
    dealt: hand.dealt.map((d) => ({ position: d.position, card: d.code })),
    seedsRevealed: hand.seeds !== null,
  };
}

/**
 * The verifier page's report on a file, never raising for what the file holds: `ok`, the failed
 * `step` and `detail`, each check's status, and `inputError` for a key or witness that is not valid.
 */
export function check(input, options = {}) {
  return verifyBytes(asBytes(input, "a file"), options);
}
