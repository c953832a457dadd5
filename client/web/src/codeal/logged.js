// Format 5 of docs/hand-proof.md: the co-dealt hand proof with its log receipts and the co-dealers'
// seal statements (docs/codealing-spec.md section 11.1). Format 4's content (handfile.js) with each
// dealt position's seat key, every co-dealer's seal statements, and C2SP tlog-proof receipts of the
// hand's setup, seals and seeds entries to one signed checkpoint (tlogproof.js, and the steps
// rotations, checkpoint and inclusion of formats 1 to 3: handproof.js's checkReceipts). The same
// order, steps and words as the Python reference (fairdeck.codeal.logged_proof).
import { ed25519 } from "@noble/curves/ed25519.js";
import { VerificationError, ascii, concat, equalBytes, lp, u32, validHandId } from "../spec.js";
import { LogError, checkPolicy, describePolicy } from "../log.js";
import { parseTlogProof } from "../tlogproof.js";
import { MAX_CHAIN } from "../rotation.js";
import { checkReceipts } from "../handproof.js";
import { MAX_HOLDERS, MIN_HOLDERS, V, fail } from "./group.js";
import { codealSpec, decodeKeyRecord, handContext } from "./hand.js";
import { sealStatement } from "./seat.js";
import { codealRecordFromValue, hex, int, list, names, str, verifyCodealProof } from "./handfile.js";

export const LOGGED_FORMAT = 5;
const NAMES = ["type", "format", "deck", "hand_id", "codeal", "seals", "receipts", "key_rotations", "log_key"];
const STATEMENT = ["position", "seat_key", "sealed_sha256", "signature"];
const SETUP = 3;
const SEEDS = 6;
const SEALS = 7;
const KINDS = { setup: SETUP, seals: SEALS, seeds: SEEDS };
const MAGIC = ascii("FDL1");

/** Steps format 5 adds after section 10, in order. */
export const LOGGED_STEPS = ["seal", "entries", "rotations", "checkpoint", "inclusion", "order", "cosignatures"];

const bad = (detail) => fail("encoding", detail);

function receiptOf(value, what) {
  if (typeof value !== "string") throw bad(`${what}: want a tlog-proof text`);
  try {
    return parseTlogProof(value);
  } catch (e) {
    if (e instanceof LogError) throw bad(`${what}: ${e.message}`);
    throw e;
  }
}

/**
 * Step "encoding": a format-5 proof from its strict value (readHandProofValue): format 4's
 * { hand, identities } (each dealt position with `seatKey`), `seals` ([{ holder, statements:
 * [{ position, seatKey, sealedSha256, signature }] }]), `receipts` ({ setup, seals: [], seeds }),
 * `keyRotations` (bytes) and `logKey` (for display only).
 */
export function loggedProofFromValue(top) {
  names(top, NAMES, "hand proof");
  const { hand, identities } = codealRecordFromValue(top, LOGGED_FORMAT);
  if (!hand.seeds) throw bad("codeal.seeds: a proof of format 5 is of a closed hand, with its seeds");
  const seals = list(top.seals, "seals").map((item, i) => {
    names(item, ["holder", "statements"], `seals[${i}]`);
    const statements = list(item.statements, `seals[${i}].statements`).map((s, j) => {
      const what = `seals[${i}].statements[${j}]`;
      names(s, STATEMENT, what);
      const st = {
        position: int(s.position, `${what}.position`),
        seatKey: hex(s.seat_key, `${what}.seat_key`),
        sealedSha256: hex(s.sealed_sha256, `${what}.sealed_sha256`),
        signature: hex(s.signature, `${what}.signature`),
      };
      if (st.seatKey.length !== 32 || st.sealedSha256.length !== 32 || st.signature.length !== 64) {
        throw bad(`${what}: a seat key is 32 bytes, a digest 32 and a signature 64`);
      }
      return st;
    });
    return { holder: int(item.holder, `seals[${i}].holder`), statements };
  });
  const r = top.receipts;
  names(r, ["setup", "seals", "seeds"], "receipts");
  const receipts = {
    setup: receiptOf(r.setup, "receipts.setup"),
    seals: list(r.seals, "receipts.seals").map((t, i) => receiptOf(t, `receipts.seals[${i}]`)),
    seeds: receiptOf(r.seeds, "receipts.seeds"),
  };
  const rotations = list(top.key_rotations, "key_rotations");
  if (!rotations.every((n) => typeof n === "string") || rotations.length > MAX_CHAIN) {
    throw bad(`key_rotations: want at most ${MAX_CHAIN} signed notes, each a string`);
  }
  const keyRotations = rotations.map((n) => new TextEncoder().encode(n));
  const logKey = str(top.log_key, "log_key");
  return { hand, identities, seals, receipts, keyRotations, logKey };
}

/** The receipts in log order, with the names the checks use: setup, seals 1 .. seals K-1, seeds. */
export function namedReceipts(proof) {
  return [["setup", proof.receipts.setup], ...proof.receipts.seals.map((r, i) => [`seals ${i + 1}`, r]), ["seeds", proof.receipts.seeds]];
}

const verifies = (key, message, signature) => {
  try {
    return ed25519.verify(signature, message, key, { zip215: false });
  } catch {
    return false;
  }
};

/** Step seal: every statement is its co-dealer's, and each sealed position names its seat key. */
function checkSeals(proof, pinned) {
  const { hand } = proof;
  const spec = codealSpec(hand.deck);
  const n = spec.ids.length;
  const ctx = handContext(spec, hand.handId, hand.keys.map((b, k) => decodeKeyRecord(b, k)));
  const holders = hand.keys.length;
  if (proof.seals.length !== holders - 1 || proof.seals.some((s, i) => s.holder !== i + 1)) {
    throw fail("seal", `want one list of seal statements per co-dealer, holders 1..${holders - 1} in order`);
  }
  const byPosition = proof.seals.map((s) => {
    const k = s.holder;
    const keys = new Map();
    let last = -1;
    for (const st of s.statements) {
      const p = st.position;
      if (!(last < p && p < n)) throw fail("seal", `co-dealer ${k}'s seal statements: positions ascend, distinct, in 0..${n - 1}`);
      if (!verifies(pinned[k - 1], sealStatement(ctx, p, k, st.seatKey, st.sealedSha256), st.signature)) {
        throw fail("seal", `position ${p}: co-dealer ${k}'s seal statement does not verify under its pinned identity key`);
      }
      last = p;
      keys.set(p, st.seatKey);
    }
    return keys;
  });
  for (const d of hand.dealt) {
    const p = d.position;
    byPosition.forEach((keys, i) => {
      const k = i + 1;
      const named = keys.get(p);
      if (!d.seatKey.length && named !== undefined) throw fail("seal", `position ${p} is a public card, but co-dealer ${k} sealed it`);
      if (d.seatKey.length && named === undefined) throw fail("seal", `position ${p}: co-dealer ${k} made no seal statement for it`);
      if (d.seatKey.length && !equalBytes(named, d.seatKey)) {
        throw fail("seal", `position ${p} was sealed by co-dealer ${k} to another key: the dealer may have read this card`);
      }
    });
  }
}

/** A co-dealt entry's type and hand id when it is a strictly valid entry of type `kind` (3, 6 or 7; log-format.md), else null. */
function decodeKind(data, kind) {
  const view = new DataView(data.buffer, data.byteOffset, data.length);
  let at = 0;
  const take = (count) => {
    if (count < 0 || at + count > data.length) throw new RangeError("past the end");
    const out = data.subarray(at, at + count);
    at += count;
    return out;
  };
  const number = () => {
    take(4);
    return view.getUint32(at - 4);
  };
  const holders = () => {
    const k = number();
    if (!(k >= MIN_HOLDERS && k <= MAX_HOLDERS)) throw new RangeError("K");
    return k;
  };
  try {
    if (!equalBytes(take(4), MAGIC) || take(1)[0] !== kind) return null;
    take(8);
    const id = take(number());
    if (!id.every((b) => b < 0x80)) return null;
    const handId = String.fromCharCode(...id);
    if (!validHandId(handId)) return null;
    if (kind === SETUP) {
      if (!equalBytes(take(number()), ascii(V))) return null;
      take(number());
      take(128 * holders());
    } else if (kind === SEEDS) {
      const k = holders();
      for (let i = 0; i < k; i++) take(number());
    } else {
      const holder = number();
      if (!(holder >= 1 && holder < MAX_HOLDERS)) return null;
      const m = number();
      if (m * 132 !== data.length - at) return null;
      take(m * 132);
    }
    return at === data.length ? handId : null;
  } catch (e) {
    if (e instanceof RangeError) return null;
    throw e;
  }
}

/** The entry the proof's fields give, with time 0 (log-format.md, "Co-dealt entries"). */
function expectedEntry(hand, name, seals) {
  const kind = KINDS[name.split(" ")[0]];
  const headPart = concat(MAGIC, Uint8Array.of(kind), new Uint8Array(8), lp(ascii(hand.handId)));
  if (kind === SETUP) return concat(headPart, lp(ascii(V)), lp(ascii(hand.deck)), u32(hand.keys.length), ...hand.keys);
  if (kind === SEEDS) return concat(headPart, u32(hand.seeds.length), ...hand.seeds.map(lp));
  const s = seals[Number(name.split(" ")[1]) - 1];
  const records = s.statements.map((st) => concat(u32(st.position), st.seatKey, st.sealedSha256, st.signature));
  return concat(headPart, u32(s.holder), u32(records.length), ...records);
}

/** Step entries: each receipt's entry is the one this proof's fields give, but for its time. */
function checkEntries(proof) {
  const { hand } = proof;
  const holders = hand.keys.length;
  if (proof.receipts.seals.length !== holders - 1) throw new VerificationError("entries", `want one seals receipt per co-dealer, holders 1..${holders - 1}`);
  for (const [name, receipt] of namedReceipts(proof)) {
    const kind = name.split(" ")[0];
    const entry = receipt.entry;
    if (decodeKind(entry, KINDS[kind]) !== hand.handId) throw new VerificationError("entries", `the ${name} receipt is not of this hand's ${kind} entry`);
    const want = expectedEntry(hand, name, proof.seals);
    if (want.length !== entry.length || want.some((b, i) => (i < 5 || i >= 13) && b !== entry[i])) {
      throw new VerificationError("entries", `the logged ${name} entry differs from this proof's`);
    }
  }
}

/**
 * Every check of a format-5 proof, in order: format 4's (the identities against `pinned`, then
 * section 10), seal, entries, then the receipts' rotations, checkpoint and inclusion under
 * `verifiers` (the log keys the player gave), order and, with `policy`, cosignatures. `onStep(step,
 * extra)` is told of each step that holds. Returns { holders, checkpoint } (checkpoint null when no
 * log key was given: the log steps after rotations are not run); raises VerificationError.
 */
export function verifyLoggedProof(proof, pinned, verifiers, policy = null, onStep = () => {}) {
  const r = verifyCodealProof(proof, pinned, onStep);
  checkSeals(proof, pinned);
  onStep("seal");
  checkEntries(proof);
  onStep("entries");
  const named = namedReceipts(proof);
  const cp = checkReceipts(named, proof.keyRotations, verifiers, onStep);
  if (cp === null) return { holders: r.holders, checkpoint: null };
  for (let i = 1; i < named.length; i++) {
    const [before, a] = named[i - 1];
    const [after, b] = named[i];
    if (b.index <= a.index) throw new VerificationError("order", `the ${after} entry (index ${b.index}) is not after the ${before} entry (index ${a.index})`);
  }
  onStep("order");
  if (policy) {
    let result;
    try {
      result = checkPolicy(policy, proof.receipts.seeds.signedCheckpoint);
    } catch (e) {
      if (e instanceof LogError) throw new VerificationError("cosignatures", e.message);
      throw e;
    }
    if (!result.ok) throw new VerificationError("cosignatures", describePolicy(result));
    onStep("cosignatures", result);
  }
  return { holders: r.holders, checkpoint: cp };
}

/** "OK: co-dealt hand H verified (..., in the log at tree size T)", the line `fairdeck verify` prints for a format-5 proof that holds. */
export function loggedProofOkLine(hand, holders, checkpoint) {
  return `OK: co-dealt hand ${hand.handId} verified (${hand.deck}, ${hand.dealt.length} cards dealt, ${holders} key holders, seeds revealed, in the log at tree size ${checkpoint.size})`;
}
