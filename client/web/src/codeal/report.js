// A co-dealt hand's proof (docs/hand-proof.md, format 4) on the page: the checks of
// docs/codealing-spec.md section 10 in plain words, each marked as it holds or fails, and what the
// player may conclude after the hand: that no single party could have read their cards.
import { VerificationError, deckSpec, toHex } from "../spec.js";
import { CodealerKeyError, codealProofFromValue, codealProofOkLine, codealerKeysOf, verifyIdentities } from "./handfile.js";
import { verifyCodealHand } from "./hand.js";
import { LOGGED_FORMAT, loggedProofFromValue, loggedProofOkLine, verifyLoggedProof } from "./logged.js";
import { formatOf } from "../handproof.js";

/** The checks of section 10, in order, with what each means (the page's words). */
export const CODEAL_CHECKS = [
  ["encoding", "The co-dealt hand proof is well formed: every key, deck, proof, share and signature is a valid encoding."],
  ["key", "Each key holder proved it knows its own secret key, so no key was made up to cancel another's; and each co-dealer's key record is signed by the co-dealer identity key you gave."],
  ["transcript", "Every key holder shuffled the deck, in turn, and every card opened has a share from every key holder."],
  ["shuffle", "Each shuffle is proven to be a re-encryption of a reordering of the deck before it (no card added, dropped or copied), and is signed by the key holder who made it (a co-dealer's also by its identity key)."],
  ["share", "Every decryption share is proven to be made with its key holder's own key."],
  ["open", "The shares of each card dealt open to exactly that card."],
  ["seed", "Each key holder's seed, revealed after the hand, opens its commitment and re-derives its shuffle exactly."],
];

/** The checks format 5 adds (docs/hand-proof.md, "Format 5"), in order, in the page's words. */
export const LOGGED_CHECKS = [
  ["seal", "Each co-dealer signed, under the identity key you gave, which seat key it sealed each card to; every card dealt to a seat was sealed to that seat's key, and no public card was sealed."],
  ["entries", "The log entries the receipts prove are exactly this hand's setup (its keys and seed commitments), its co-dealers' seal statements and its seeds."],
  ["rotations", "The log key rotation statements in the file, if any, are valid and lead to the key that signed the checkpoint."],
  ["checkpoint", "Every receipt leads to the same checkpoint of the dealer's log, signed by the log key you gave."],
  ["inclusion", "Each of those entries is in the signed log."],
  ["order", "In the log, the seed commitments come before the seal statements, and they before the seeds: the seeds were committed before they were revealed."],
  ["cosignatures", "Only with a witness policy: the checkpoint carries enough valid cosignatures from the witnesses given."],
];

const and = (items) => (items.length < 2 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`);

/** "the co-dealer KEY" or "the co-dealers KEY1 and KEY2": who shuffled beside the dealer. */
export function codealersWords(keys) {
  const hex = keys.map(toHex);
  return hex.length === 1 ? `the co-dealer ${hex[0]}` : `the co-dealers ${and(hex)}`;
}

/** What the player may conclude of a proof that held: who shuffled, and what the seeds show. */
function summary(hand, keys) {
  const who = `The dealer and ${codealersWords(keys)} (the identity key${keys.length > 1 ? "s" : ""} you gave)`;
  const both = keys.length > 1 ? "all" : "both";
  const said =
    `${who} ${both} shuffled the deck under encryption, one after the other, and each shuffle's proof was checked: ` +
    `each card was encrypted under all their keys together, and opened with a share from each of them.`;
  if (!hand.seeds) {
    return `${said} The seeds are not revealed yet: check this hand again once it is over, when they are.`;
  }
  return (
    `No single party could have read your cards. ${said} After the hand ${both} seeds were revealed, and they match: ` +
    `each opens the commitment made before the deal and re-derives its shuffle exactly. To read a card before it ` +
    `reached its seat, the dealer and ${codealersWords(keys)} would all have had to collude.`
  );
}

function newReport(logged = false) {
  const table = logged ? [...CODEAL_CHECKS, ...LOGGED_CHECKS] : CODEAL_CHECKS;
  return {
    kind: "codeal-proof",
    ok: false,
    step: null,
    detail: null,
    inputError: null,
    hand: null,
    keys: 0,
    signedBy: [],
    codealerKeys: 0,
    checks: table.map(([step, text]) => ({ step, text, status: "skip", detail: "" })),
  };
}

function handView(proof) {
  const { hand, identities } = proof;
  const spec = deckSpec(hand.deck);
  const positions = hand.dealt.map((d) => d.position);
  return {
    handId: hand.handId,
    deck: hand.deck,
    size: spec.ids.length,
    holders: hand.keys.length,
    dealt: hand.dealt.map((d) => d.code),
    positions,
    deckCodes: [],
    facts: [
      ["Dealt positions in this proof (0 is the top of the co-dealt deck)", positions.join(", ") || "none"],
      ["Seeds (revealed after the hand), holder order", hand.seeds ? hand.seeds.map(toHex).join("\n") : "not revealed yet"],
      ["Co-dealer identity keys written in the file (not trusted, for comparison)", identities.map((i) => `holder ${i.holder}: ${toHex(i.key)}`).join("\n") || "none"],
    ],
  };
}

/**
 * Check a format-4 proof's strict value (readHandProofValue) against `options.codealerKey`: the
 * co-dealers' identity keys (hex text, one a line or separated by spaces, or an array; holder
 * order). Without one, the record's own checks run and the report says the co-dealer was not
 * checked; it is never ok. The report is verifyBytes's, with `kind` "codeal-proof", `line` (the
 * OK line `fairdeck verify` prints) and, when it held, `codeal.summary` in plain words.
 */
export function checkCodealProof(value, options = {}, log = { verifiers: [], policy: null, inputError: null }) {
  if (formatOf(value) === LOGGED_FORMAT) return checkLoggedProof(value, options, log);
  const report = newReport();
  let pinned = [];
  try {
    pinned = codealerKeysOf(options.codealerKey);
    report.codealerKeys = pinned.length;
  } catch (e) {
    if (!(e instanceof CodealerKeyError)) throw e;
    report.inputError = e.message;
  }
  const mark = (step, status, detail = "") => Object.assign(report.checks.find((c) => c.step === step), { status, detail });
  let proof;
  try {
    proof = codealProofFromValue(value);
    report.hand = handView(proof);
    const checked = pinned.length > 0 && report.inputError === null;
    if (checked) verifyIdentities(proof.hand, proof.identities, pinned);
    const r = verifyCodealHand(proof.hand, (step) => mark(step, "pass"));
    if (!proof.hand.seeds) mark("seed", "skip", "the seeds are not revealed yet: the hand is not over");
    if (!checked) {
      const why = report.inputError ? "a co-dealer key given is not valid" : "give the co-dealer's identity key to check it";
      for (const step of ["key", "shuffle"]) mark(step, "pass", `the co-dealer's identity signatures not checked: ${why}`);
      return report;
    }
    report.ok = true;
    report.line = codealProofOkLine(proof.hand, r.holders);
    report.codeal = { holders: r.holders, summary: summary(proof.hand, pinned) };
  } catch (e) {
    if (!(e instanceof VerificationError)) throw e;
    report.step = e.step;
    report.detail = e.detail;
    mark(e.step, "fail", e.detail);
  }
  return report;
}

/**
 * A format-5 proof's strict value: as checkCodealProof, and its receipts against the log keys
 * `log.verifiers` (parsed from `options.key` by verify.js, with `log.policy` and `log.inputError`).
 * Without a co-dealer key the record's own checks run; without a log key the log steps after
 * rotations are not run; neither report is ok.
 */
function checkLoggedProof(value, options, log) {
  const report = newReport(true);
  report.format = LOGGED_FORMAT;
  report.keys = log.verifiers.length;
  report.inputError = log.inputError;
  let pinned = [];
  let codealerError = null;
  try {
    pinned = codealerKeysOf(options.codealerKey);
    report.codealerKeys = pinned.length;
  } catch (e) {
    if (!(e instanceof CodealerKeyError)) throw e;
    codealerError = e.message;
    report.inputError = e.message;
  }
  const mark = (step, status, detail = "") => Object.assign(report.checks.find((c) => c.step === step), { status, detail });
  if (!log.policy) mark("cosignatures", "skip", "no witness policy given: cosignatures not required");
  try {
    const proof = loggedProofFromValue(value);
    report.hand = handView(proof);
    report.hand.facts.push(["Seat key of each dealt position (empty: a public card)", proof.hand.dealt.map((d) => `${d.position}: ${toHex(d.seatKey) || "public"}`).join("\n")]);
    report.hand.logKeyInFile = proof.logKey;
    if (!pinned.length || codealerError !== null) {
      verifyCodealHand(proof.hand, (step) => mark(step, "pass"));
      const why = codealerError ? "a co-dealer key given is not valid" : "give the co-dealer's identity key to check it";
      for (const step of ["key", "shuffle", "seal"]) mark(step, "pass", `the co-dealer's identity signatures not checked: ${why}`);
      return report;
    }
    const onStep = (step, extra) => {
      if (step === "inclusion") report.hand.treeSize = String(extra.size);
      mark(step, "pass", step === "checkpoint" ? `${extra.origin}, tree size ${extra.size}` : "");
    };
    const r = verifyLoggedProof(proof, pinned, log.verifiers, log.policy, onStep);
    if (r.checkpoint === null) {
      const why = report.inputError ? "a log key given is not valid" : "give the log's key to check this";
      for (const step of ["checkpoint", "inclusion", "order"]) mark(step, "skip", `not checked: ${why}`);
      return report;
    }
    report.ok = report.inputError === null;
    report.line = loggedProofOkLine(proof.hand, r.holders, r.checkpoint);
    report.codeal = {
      holders: r.holders,
      summary:
        `${summary(proof.hand, pinned)} The dealer's log, signed under the log key you gave (tree size ${r.checkpoint.size}), ` +
        `holds this hand's seed commitments before its seeds, and each co-dealer's signed word of the seat key each card was sealed to.`,
    };
  } catch (e) {
    if (!(e instanceof VerificationError)) throw e;
    report.step = e.step;
    report.detail = e.detail;
    mark(e.step, "fail", e.detail);
  }
  return report;
}
