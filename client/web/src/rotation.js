// Log key rotation statements (docs/log-format.md, "Key rotation"), as a hand proof of format 3
// carries them (docs/hand-proof.md): read and checked exactly as the Python reader
// (fairdeck.log.rotation) does, in the same words. A statement is a signed note of four lines,
// signed by the old key and by the new one; a proof's statements must each be valid, each hand
// over from the key the one before handed over to, and the last one's key must sign the checkpoint.
// Only then are they followed, from a key the player gave, old to new.
import { equalBytes } from "./spec.js";
import { LogError, openNote, parseVerifierKey } from "./log.js";

export const ROTATION_HEADER = "fairdeck log key rotation v1";
/** The most statements a hand proof carries. */
export const MAX_CHAIN = 64;

/** "example.com/log+1dde4531": a key as the statements' words name it. */
export const shortKey = (v) => `${v.name}+${v.keyId.toString(16).padStart(8, "0")}`;

/** The same key: name, ID and public key (as Python compares its Verifier objects). */
export const sameKey = (a, b) => a.name === b.name && a.keyId === b.keyId && equalBytes(a.publicKey, b.publicKey);

const rotationText = (oldKey, newKey) => `${ROTATION_HEADER}\n${oldKey.name}\n${oldKey.text}\n${newKey.text}\n`;

/** Parse and verify one statement (its note's bytes): { old, new }; LogError, as open_rotation words it. */
export function openRotation(note) {
  const text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(note); // a U+FEFF stays, as in Python
  const lines = text.slice(0, text.indexOf("\n\n") + 1).split("\n");
  if (lines.length !== 5 || lines[0] !== ROTATION_HEADER || lines[4] !== "") {
    throw new LogError("a rotation statement is four lines: header, origin, old key, new key");
  }
  let oldKey;
  let newKey;
  try {
    oldKey = parseVerifierKey(lines[2]);
    newKey = parseVerifierKey(lines[3]);
  } catch (e) {
    if (e instanceof LogError) throw new LogError(`rotation statement: ${e.message}`);
    throw e;
  }
  if (!(oldKey.name === newKey.name && newKey.name === lines[1])) {
    throw new LogError("rotation statement: both keys must be named for the origin line");
  }
  if (oldKey.keyId === newKey.keyId) throw new LogError("rotation statement: the new key is the old key");
  for (const [key, which] of [[oldKey, "old"], [newKey, "new"]]) {
    let opened;
    try {
      opened = openNote(note, [key]);
    } catch (e) {
      if (e instanceof LogError) throw new LogError(`rotation statement is not signed by the ${which} key: ${e.message}`);
      throw e;
    }
    if (opened.text !== rotationText(oldKey, newKey)) throw new LogError("rotation statement: the signed text is not the statement");
  }
  return { old: oldKey, new: newKey };
}

/**
 * A hand proof's statements (step "rotations"): each valid, each following the one before, the
 * last one's new key a signer of the note `signed` (the checkpoint). The chain; LogError naming
 * the statement that fails.
 */
export function checkChain(notes, signed) {
  const n = notes.length;
  const chain = [];
  notes.forEach((note, i) => {
    let r;
    try {
      r = openRotation(note);
    } catch (e) {
      if (e instanceof LogError) throw new LogError(`key rotation statement ${i + 1} of ${n}: ${e.message}`);
      throw e;
    }
    const before = chain[chain.length - 1];
    if (before && !sameKey(r.old, before.new)) {
      throw new LogError(
        `key rotation statement ${i + 1} of ${n} does not follow statement ${i}: it hands over ` +
          `from ${shortKey(r.old)}, not from ${shortKey(before.new)}`,
      );
    }
    chain.push(r);
  });
  if (chain.length) {
    const last = chain[chain.length - 1].new;
    try {
      openNote(signed, [last]);
    } catch (e) {
      if (e instanceof LogError) {
        throw new LogError(`the key rotation statements lead to ${shortKey(last)}, and the checkpoint does not verify under it: ${e.message}`);
      }
      throw e;
    }
  }
  return chain;
}

/**
 * The keys given, then each new key of a checked chain from the first statement whose old key is
 * trusted on (old to new only). Each key added carries `via`: the key given it was reached from,
 * and how many statements led there.
 */
export function followedKeys(trusted, chain) {
  const keys = [...trusted];
  const has = (k) => keys.some((t) => sameKey(t, k));
  for (const r of chain) {
    if (!has(r.old) || has(r.new)) continue;
    const start = trusted.find((t) => sameKey(t, r.old));
    const before = keys.find((k) => sameKey(k, r.old)).via;
    keys.push({ ...r.new, via: start ? { from: start, rotations: 1 } : { from: before.from, rotations: before.rotations + 1 } });
  }
  return keys;
}

/**
 * The valid statements among `notes` that lead, one after the other, from the log's first key to
 * the key that signed the note `signed` (a checkpoint), oldest first; empty when no valid
 * statement names that key as the new one (as fairdeck.log.rotation.chain_to). The newest
 * MAX_CHAIN at most.
 */
export function chainTo(notes, signed) {
  const valid = [];
  for (const note of notes) {
    try {
      valid.push({ ...openRotation(note), note });
    } catch (e) {
      if (!(e instanceof LogError)) throw e;
    }
  }
  const signs = (key) => {
    try {
      openNote(signed, [key]);
      return true;
    } catch (e) {
      if (e instanceof LogError) return false;
      throw e;
    }
  };
  let current = valid.find((r) => signs(r.new))?.new ?? null;
  const chain = [];
  const seen = current ? [current] : [];
  while (current) {
    const before = valid.find((r) => sameKey(r.new, current) && !seen.some((k) => sameKey(k, r.old)));
    if (!before) break;
    chain.unshift(before);
    seen.push(before.old);
    current = before.old;
  }
  return chain.slice(-MAX_CHAIN);
}
