// The hand proof's "codeal" object (docs/codealing-spec.md section 11) on the page: reading it
// strictly, the checks of section 10 in plain words, and who would have had to collude to read a
// card. The field's shape is owned here alone, so a change to it is a change to this module.
import { VerificationError, belongs, fromHex, idForCode, deckSpec } from "../spec.js";
import { JNumber, isObject } from "../strictjson.js";
import { pylist } from "../words.js";
import { V } from "./group.js";
import { verifyCodealHand } from "./hand.js";

/** The checks of section 10, in order, with what each means (the page's words). */
export const CODEAL_CHECKS = [
  ["encoding", "The co-dealt record is well formed: every key, deck, proof and share is a valid ristretto255 encoding."],
  ["key", "Each key holder proved it knows its own secret key, so no key was made up to cancel another's."],
  ["transcript", "Every key holder shuffled the deck, in turn, and every card opened has a share from every key holder."],
  ["shuffle", "Each shuffle is proven to be a re-encryption of a reordering of the deck before it (no card added, dropped or copied), and is signed by the key holder who made it."],
  ["share", "Every decryption share is proven to be made with its key holder's own key."],
  ["open", "The shares of each card dealt open to exactly that card."],
  ["seed", "Each key holder's seed, revealed after the hand, opens its commitment and re-derives its shuffle exactly."],
];
const NAMES = ["version", "keys", "shuffles", "dealt", "seeds"];
const DEALT_NAMES = ["position", "card", "shares"];
const HEX = /^(?:[0-9a-f]{2})+$/;

const bad = (detail) => new VerificationError("format", `codeal: ${detail}`);

function hexList(value, name) {
  if (!Array.isArray(value) || !value.every((h) => typeof h === "string" && HEX.test(h))) throw bad(`${name} must be a list of lower-case hex strings`);
  return value.map(fromHex);
}

/**
 * Step "format" for the hand proof's "codeal" object: exactly the names of section 11, version
 * fairdeck-codeal-v1, hex byte strings, dealt positions as whole numbers and cards as this deck's
 * codes. The deck spec and hand id are the hand proof's transcript's. Returns the hand for
 * verifyCodealHand; its bytes are checked there.
 */
export function readCodeal(value, transcript, proofDealt) {
  if (!isObject(value) || Object.keys(value).length !== NAMES.length || !NAMES.every((k) => k in value)) {
    throw bad(`an object with exactly the names ${pylist(NAMES)}`);
  }
  if (value.version !== V) throw bad(`version must be "${V}"`);
  const spec = deckSpec(transcript.deck);
  if (!Array.isArray(value.dealt)) throw bad("dealt must be a list");
  const dealt = value.dealt.map((d, i) => {
    if (!isObject(d) || Object.keys(d).length !== DEALT_NAMES.length || !DEALT_NAMES.every((k) => k in d)) {
      throw bad(`dealt ${i}: an object with exactly the names ${pylist(DEALT_NAMES)}`);
    }
    if (!(d.position instanceof JNumber) || !/^(0|[1-9][0-9]{0,8})$/.test(d.position.text)) throw bad(`dealt ${i}: position must be a whole number`);
    if (typeof d.card !== "string" || !spec || !belongs(spec, d.card)) throw bad(`dealt ${i}: card must be a card code of deck ${transcript.deck}`);
    return { position: Number(d.position.text), card: idForCode(d.card), code: d.card, shares: hexList(d.shares, `dealt ${i} shares`) };
  });
  return {
    deck: transcript.deck,
    handId: transcript.handId,
    keys: hexList(value.keys, "keys"),
    shuffles: hexList(value.shuffles, "shuffles"),
    dealt,
    seeds: hexList(value.seeds, "seeds"),
    proofDealt,
  };
}

/**
 * Section 11: the cards the co-dealt record opens are the cards the hand proof says were dealt,
 * position p being the hand proof's dealt[p], every one of them. Without it a proof could show the
 * player cards the dealer dealt alone, beside a co-dealt record of other cards, and the page would
 * still say nobody could have read them. Run once the record's own cards are opened (step open).
 */
export function checkDealtIsCodealt(hand) {
  const want = hand.proofDealt;
  if (!Array.isArray(want)) return;
  if (hand.dealt.length !== want.length) {
    throw new VerificationError("open", `the hand proof deals ${want.length} cards, the co-dealt record opens ${hand.dealt.length}`);
  }
  for (const d of hand.dealt) {
    if (want[d.position] !== d.code) {
      throw new VerificationError("open", `position ${d.position}: the hand proof deals ${want[d.position] ?? "no card"} there, the shares open ${d.code}`);
    }
  }
}

/** "the dealer (key holder 0) and the co-dealer (key holder 1)", or with several co-dealers. */
export function holdersWords(holders) {
  if (holders === 2) return "the dealer (key holder 0) and the co-dealer (key holder 1)";
  const co = Array.from({ length: holders - 1 }, (_, i) => `co-dealer ${i + 1}`);
  return `the dealer (key holder 0) and all ${holders - 1} co-dealers (${co.slice(0, -1).join(", ")} and ${co[co.length - 1]}, key holders 1 to ${holders - 1})`;
}

/** The co-dealt checks, as rows of a report (skipped until checkCodeal runs them). */
export function addCodealRows(report) {
  for (const [step, text] of CODEAL_CHECKS) report.checks.push({ step, text, status: "skip", detail: "" });
}

/**
 * Runs the co-dealt checks of a hand proof's report (addCodealRows first): each step passes, fails or is
 * skipped; on a failure, report.step and report.detail name it. On success report.codeal says
 * how many key holders there were and who would have had to collude.
 */
export function checkCodeal(report, hand) {
  const mark = (step, status, detail = "") => Object.assign(report.checks.find((c) => c.step === step), { status, detail });
  try {
    const r = verifyCodealHand(hand, (step) => {
      if (step === "open") checkDealtIsCodealt(hand);
      mark(step, "pass");
    });
    report.codeal = {
      holders: r.holders,
      colluders: holdersWords(r.holders),
      summary:
        `No single party could have read your cards. Every card was encrypted under the joint key of ${r.holders} key holders ` +
        `and shuffled by each of them in turn; to read a card before it reached its seat, ${holdersWords(r.holders)} ` +
        "would all have had to collude. (The file proves the keys are distinct and each holder's own; that each " +
        "co-dealer is independent of the house rests on who runs it: docs/codealing-spec.md section 13.4.)",
    };
    return true;
  } catch (e) {
    if (!(e instanceof VerificationError)) throw e;
    report.step = e.step;
    report.detail = e.detail;
    mark(e.step, "fail", e.detail);
    return false;
  }
}
