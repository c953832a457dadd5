// What the page checks, and how it says it: one entry point for a dropped or pasted file.
import { VerificationError, deckSpec, toHex, transcriptFromBytes, verifyTranscript } from "./spec.js";
import { LogError, b64encode, describePolicy, parseKeyList, parsePolicy } from "./log.js";
import { CODEAL_FORMAT, HAND_PROOF_TYPE, LOGGED_CODEAL_FORMAT, formatOf, handProofFromValue, readHandProofValue, verifyHandProof } from "./handproof.js";
import { parsePolicyFile, witnessPolicyOf } from "./policy.js";
import { checkCodealProof } from "./codeal/report.js";

/** The checks in order, with what each means in plain words (docs/hand-proof.md, "The checks"). */
export const HAND_PROOF_CHECKS = [
  ["format", "The file is a complete hand proof, in the published format."],
  ["commitment", "The dealer's revealed seed opens the commitment it published before any card was seen."],
  ["deck", "The deck re-derives from the dealer's seed and the players' seeds (fairdeck-v1)."],
  ["cards", "The cards dealt are the top of that deck, in order."],
  ["entries", "The transparency log's two entries are this hand's commitment and reveal."],
  ["rotations", "The log key rotation statements in the file, if any, are each signed by the old key and the new one, and lead one after the other to the key that signed the checkpoint."],
  ["checkpoint", "The log's checkpoint is signed by the log key you gave (by one of them, if you gave several)."],
  ["inclusion", "Both entries are in that signed log."],
  ["cosignatures", "Enough independent witnesses cosigned that checkpoint."],
];

export const TRANSCRIPT_CHECKS = [
  ["version", "The transcript is of an algorithm version this page knows (fairdeck-v1)."],
  ["malformed", "The transcript is well formed: deck, hand id, seed sizes and cards."],
  ["commitment", "The dealer's revealed seed opens the commitment it published before any card was seen."],
  ["deck", "The deck re-derives from the dealer's seed and the players' seeds: the cards are exactly that deck."],
];

const NEEDLE = new TextEncoder().encode(HAND_PROOF_TYPE);

/** As `fairdeck verify` decides: a file whose first 64 KiB hold "fairdeck-hand-proof" is a hand proof. */
export function isHandProof(bytes) {
  const head = bytes.subarray(0, 64 * 1024);
  outer: for (let i = 0; i + NEEDLE.length <= head.length; i++) {
    for (let j = 0; j < NEEDLE.length; j++) if (head[i + j] !== NEEDLE[j]) continue outer;
    return true;
  }
  return false;
}

/**
 * Check a file's bytes. Options: `key` (the log's verifier key as text, or several: one a line or
 * separated by spaces, as a key file holds them; or an array of keys), `witnesses` ("NAME=KEY"
 * strings) and `threshold`, or `policy` (a C2SP tlog-policy file, text or bytes). The report: `kind`, `ok` (every check ran and held), `step` and
 * `detail` of the first failure, `checks` (each with `status` pass, fail or skip), `hand` (what
 * to show of the hand), `keys` (how many log keys were given), `signedBy` (those that signed the
 * checkpoint: `{ key, position }`, 1-based in the list given), `inputError` (a key or witness
 * the user gave is not valid).
 */
export function verifyBytes(bytes, options = {}) {
  const started = performance.now();
  const report = isHandProof(bytes) ? checkAnyHandProof(bytes, options) : checkTranscript(bytes);
  report.millis = performance.now() - started;
  return report;
}

/**
 * A hand proof, read once; its parsed format says which (4: a co-dealt hand, checked against
 * `options.codealerKey`, codeal/report.js). A text that is no JSON value fails at step "format".
 */
function checkAnyHandProof(bytes, options) {
  let value;
  try {
    value = readHandProofValue(bytes);
  } catch (e) {
    if (!(e instanceof VerificationError)) throw e;
    return checkHandProof(null, options, e);
  }
  if (formatOf(value) === LOGGED_CODEAL_FORMAT) return checkCodealProof(value, options, logInputs(options));
  return formatOf(value) === CODEAL_FORMAT ? checkCodealProof(value, options) : checkHandProof(value, options);
}

/** The log keys and witness policy of `options`, as checkHandProof reads them, and an input error naming a bad one. */
function logInputs(options) {
  const out = { verifiers: [], policy: null, inputError: null };
  try {
    out.verifiers = keysOf(options.key);
    const witnesses = (options.witnesses ?? []).filter((w) => w.trim());
    out.policy = policyOf(witnesses.map((w) => w.trim()), options.threshold ?? null, options.policy ?? null);
  } catch (e) {
    if (!(e instanceof LogError)) throw e;
    out.inputError = e.message;
  }
  return out;
}

function newReport(kind, table) {
  return {
    kind,
    ok: false,
    step: null,
    detail: null,
    inputError: null,
    hand: null,
    keys: 0,
    signedBy: [],
    checks: table.map(([step, text]) => ({ step, text, status: "skip", detail: "" })),
  };
}

function mark(report, step, status, detail = "") {
  const check = report.checks.find((c) => c.step === step);
  if (check) {
    check.status = status;
    check.detail = detail;
  }
}

/**
 * The line `fairdeck verify` prints for this report: "OK: hand ... verified (...)" or
 * "FAILED at step STEP: DETAIL", word for word; null when the report is not a verdict (no log key).
 */
export function verdictLine(report) {
  if (report.step) return `FAILED at step ${report.step}: ${report.detail}`;
  if (!report.ok) return null;
  const h = report.hand;
  if (report.kind === "codeal-proof") return report.line;
  if (report.kind === "hand-proof") {
    return `OK: hand ${h.handId} verified (${h.deck}, ${h.dealt.length} of ${h.size} cards dealt, in the log at tree size ${h.treeSize})`;
  }
  return `OK: hand ${h.handId} verified (${h.deck}, ${h.size} cards, ${h.version})`;
}

/** Steps a hand proof can fail at that its table leaves out: the transcript's own step 6.2. */
const EXTRA_STEPS = {
  malformed: "The transcript's fields are well formed for its deck: hand id, seed sizes, number of cards.",
};

function failed(report, e) {
  if (!(e instanceof VerificationError)) throw e;
  report.step = e.step;
  report.detail = e.detail;
  if (e.newerFormat) report.newerFormat = e.newerFormat;
  if (!report.checks.some((c) => c.step === e.step)) {
    // Shown right after "format", where fairdeck verify checks it too.
    const at = report.checks.findIndex((c) => c.step === "format") + 1;
    report.checks.splice(at, 0, { step: e.step, text: EXTRA_STEPS[e.step] ?? e.step, status: "skip", detail: "" });
  }
  mark(report, e.step, "fail", e.detail);
  return report;
}

function handView(t, dealt) {
  const spec = deckSpec(t.deck);
  return {
    handId: t.handId,
    deck: t.deck,
    version: t.version,
    size: spec.ids.length,
    dealt: dealt ?? t.codes,
    deckCodes: t.codes,
    commitment: toHex(t.commitment),
    serverSeed: toHex(t.serverSeed),
    clientSeeds: t.clientSeeds.map(toHex),
  };
}

function checkTranscript(bytes) {
  const report = newReport("transcript", TRANSCRIPT_CHECKS);
  let t;
  try {
    t = transcriptFromBytes(bytes);
  } catch (e) {
    if (e instanceof VerificationError && e.step === "malformed") mark(report, "version", "skip", "the text was not read");
    return failed(report, e);
  }
  mark(report, "version", "pass");
  report.hand = handView(t, null);
  try {
    verifyTranscript(t);
  } catch (e) {
    for (const step of ["malformed", "commitment"]) {
      if (step === e.step) break;
      mark(report, step, "pass");
    }
    return failed(report, e);
  }
  for (const step of ["malformed", "commitment", "deck"]) mark(report, step, "pass");
  report.ok = true;
  return report;
}

/**
 * The witness policy of `witnesses` ("NAME=KEY" each) and `threshold` (null: all of them), or of a
 * C2SP tlog-policy file (`policy`: its text or bytes; policy.js), or null for none (or for a
 * policy's `quorum none`). A threshold with no witness is a LogError, as `fairdeck verify
 * --witness-threshold` without --witness is refused: it would check no cosignature at all; so
 * are witnesses or a threshold beside a policy file, as `fairdeck verify --policy` refuses them.
 */
export function policyOf(witnesses, threshold, policy = null) {
  if (policy !== null && policy !== undefined) {
    if (witnesses.length || (threshold !== null && threshold !== undefined)) {
      throw new LogError("give a tlog-policy file or witnesses NAME=KEY (and a threshold), not both");
    }
    return witnessPolicyOf(parsePolicyFile(policy));
  }
  if (witnesses.length) return parsePolicy(witnesses, threshold);
  if (threshold !== null && threshold !== undefined) throw new LogError("a witness threshold needs at least one witness NAME=KEY");
  return null;
}

/** The log keys of the `key` option: a text (keys one a line or separated by spaces), or an array. */
export function keysOf(key) {
  if (key === null || key === undefined) return [];
  return parseKeyList(Array.isArray(key) ? key.join("\n") : key);
}

/** "example.com/log+1dde4531": a key as reports name it. */
const keyName = (v) => `${v.name}+${v.keyId.toString(16).padStart(8, "0")}`;

/**
 * Which key signed, in words: "the log key example.com/log+1dde4531 (the 2nd of the 2 keys given)",
 * or, for a key the file's rotation statements led to, "the log key ...+37df3a34, which 2 key
 * rotation statements in the file lead to from the log key ...+1dde4531 (the 1st of the 2 keys given)".
 */
export function signedByWords(report) {
  const ordinal = (n) => n + (["th", "st", "nd", "rd"][(n % 100 > 10 && n % 100 < 14) || n % 10 > 3 ? 0 : n % 10]);
  const given = (key, position) => `the log key ${key}` + (report.keys > 1 ? ` (the ${ordinal(position)} of the ${report.keys} keys given)` : "");
  return report.signedBy
    .map(({ key, position, from, rotations }) =>
      from
        ? `the log key ${key}, which ${rotations} key rotation statement${rotations > 1 ? "s" : ""} in the file lead${rotations > 1 ? "" : "s"} to from ${given(from, position)}`
        : given(key, position),
    )
    .join(" and ");
}

function checkHandProof(value, options, unread = null) {
  const report = newReport("hand-proof", HAND_PROOF_CHECKS);
  let verifiers = [];
  let policy = null;
  const witnesses = (options.witnesses ?? []).filter((w) => w.trim());
  try {
    verifiers = keysOf(options.key);
    report.keys = verifiers.length;
    policy = policyOf(witnesses.map((w) => w.trim()), options.threshold ?? null, options.policy ?? null);
  } catch (e) {
    if (!(e instanceof LogError)) throw e;
    report.inputError = e.message;
  }
  let proof;
  try {
    if (unread) throw unread;
    proof = handProofFromValue(value);
  } catch (e) {
    return failed(report, e);
  }
  mark(report, "format", "pass");
  report.hand = handView(proof.transcript, proof.dealt);
  report.hand.logKeyInFile = proof.logKey;
  if (!policy) mark(report, "cosignatures", "skip", "no witness policy given: cosignatures not required");
  if (proof.format < 3) mark(report, "rotations", "skip", `a hand proof of format ${proof.format} carries no key rotation statement`);
  const onStep = (step, extra) => {
    let detail = "";
    if (step === "rotations") {
      if (proof.format < 3) return;
      detail = extra.length
        ? `${extra.length} statement${extra.length > 1 ? "s" : ""}, each signed by both keys: ${extra.map((r) => `${keyName(r.old)} -> ${keyName(r.new)}`).join(", ")}`
        : "no statement in the file: the checkpoint's key was not rotated to";
    }
    if (step === "checkpoint") {
      report.signedBy = extra.signedBy.map((v) =>
        v.via
          ? { key: keyName(v), position: verifiers.indexOf(v.via.from) + 1, from: keyName(v.via.from), rotations: v.via.rotations }
          : { key: keyName(v), position: verifiers.indexOf(v) + 1 },
      );
      detail = `${extra.origin}, tree size ${extra.size}, root ${b64encode(extra.root)}; signed by ${signedByWords(report)}`;
    }
    if (step === "inclusion") {
      detail = `commit entry ${proof.commit.index} and reveal entry ${proof.reveal.index} of ${extra.size}`;
      report.hand.treeSize = String(extra.size);
    }
    if (step === "cosignatures") detail = describePolicy(extra);
    mark(report, step, "pass", detail);
  };
  try {
    verifyHandProof(proof, verifiers, policy, onStep);
  } catch (e) {
    return failed(report, e);
  }
  if (!verifiers.length) {
    const why = report.inputError ? "a log key given is not valid" : "give the log's key to check this";
    for (const step of ["checkpoint", "inclusion"]) mark(report, step, "skip", `not checked: ${why}`);
  } else {
    report.ok = report.inputError === null;
  }
  return report;
}
