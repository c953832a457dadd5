// docs/vectors/fairdeck-codeal-seal-v1.json read the way an outsider's harness reads it, for node
// (seal-lines.mjs) and, as its source text, inside the page (harness.mjs): runSealVectors must use
// nothing but its arguments. `api` holds the package's seatContext and openSeatCard; each case
// becomes the line the seat's device says: "OK: position P opens CODE" or "FAILED at step S: D".
export function runSealVectors(vectors, api) {
  const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
  const out = {};
  for (const c of vectors.cases) {
    const hand = vectors.hands[c.hand];
    try {
      const ctx = api.seatContext({ deck: hand.deck, handId: hand.hand_id, keys: hand.keys.map(fromHex), finalDeck: fromHex(hand.final_deck) });
      const seals = c.seals.map((s) => ({
        holder: s.holder,
        seatPublicKey: fromHex(s.seat_public_key),
        sealedSha256: fromHex(s.sealed_share_sha256),
        signature: fromHex(s.signature),
      }));
      const card = api.openSeatCard(ctx, c.position, c.sealed.map(fromHex), fromHex(vectors.seat_secret), seals, c.identity_keys.map(fromHex));
      out[c.name] = `OK: position ${c.position} opens ${card.code}`;
    } catch (e) {
      if (!e.step) throw e;
      out[c.name] = `FAILED at step ${e.step}: ${e.detail}`;
    }
  }
  return out;
}
