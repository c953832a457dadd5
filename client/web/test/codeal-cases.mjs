// docs/vectors/fairdeck-codeal-v1.json read the way an outsider's harness reads it, for node
// (codeal.test.mjs, codeal-lines.mjs) and, as its source text, inside the page (harness.mjs):
// runCodealVectors must use nothing but its arguments. `api` holds the package's functions
// (codealHandFromVector, codealLine, openSealedShare, and the group's cardPoint, generators,
// hashToPoint), `hex` turns bytes to hex, `fromHex` the other way.
export function runCodealVectors(vectors, api) {
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
  const clone = (x) => JSON.parse(JSON.stringify(x));
  // The edits of a case, from the file's "format" text: set, take, from, overwrite, cut, shares, card.
  const edited = (c) => {
    const hand = clone(vectors.hands[c.base]);
    for (const e of c.edits) {
      const f = e.field;
      if (e.op === "set") hand[f] = clone(e.value);
      else if (e.op === "take") hand[f] = e.indices.map((i) => hand[f][i]);
      else if (e.op === "from") hand[f] = clone(vectors.hands[e.hand][f]);
      else if (e.op === "overwrite" || e.op === "cut") {
        const where = f === "dealt" ? hand.dealt[e.index].shares : hand[f];
        const key = f === "dealt" ? e.share : e.index;
        const data = Array.from(fromHex(where[key]));
        if (e.op === "overwrite") {
          const bytes = fromHex(e.hex);
          for (let i = 0; i < bytes.length; i++) data[e.offset + i] = bytes[i];
        } else data.splice(e.offset, e.length);
        where[key] = toHex(data);
      } else if (e.op === "shares") hand.dealt[e.index].shares = e.indices.map((i) => hand.dealt[e.index].shares[i]);
      else if (e.op === "card") hand.dealt[e.index].card = e.card;
      else throw new Error(`unknown edit ${e.op}`);
    }
    return hand;
  };
  const out = { hands: {}, cases: {}, seals: [], points: true, derivations: [] };
  for (const [name, v] of Object.entries(vectors.hands)) out.hands[name] = api.codealLine(api.codealHandFromVector(v));
  for (const c of vectors.cases) out.cases[c.name] = api.codealLine(api.codealHandFromVector(edited(c)));
  for (const s of vectors.seals) {
    try {
      const share = api.openSealedShare({
        deck: s.deck,
        handId: s.hand_id,
        position: s.position,
        holder: s.holder,
        sealed: fromHex(s.sealed),
        secretKey: fromHex(s.seat_secret),
      });
      out.seals.push({ share: toHex(share), step: null });
    } catch (e) {
      if (!e.step) throw e;
      out.seals.push({ share: null, step: e.step, detail: e.detail });
    }
  }
  const enc = (p) => toHex(p.toBytes());
  const gens = api.generators(vectors.generators.length - 1).map(enc);
  out.points =
    vectors.cards.every((v) => enc(api.cardPoint(v.id)) === v.point) &&
    vectors.generators.every((v, j) => gens[j] === v.point) &&
    vectors.hash_to_point.every((v) => enc(api.hashToPoint(fromHex(v.msg), v.dst)) === v.point);
  for (const v of vectors.derivations) {
    const seed = fromHex(v.seed);
    out.derivations.push({
      commitment: toHex(api.seedCommitment(v.deck, v.hand_id, v.k, seed)) === v.commitment,
      client_seed: toHex(api.shufflerClientSeed(v.k)) === v.client_seed,
      psi: JSON.stringify(api.permutation(v.deck, v.hand_id, v.k, seed)) === JSON.stringify(v.psi),
      randomness: JSON.stringify(api.randomness(v.deck, v.hand_id, v.k, seed).map((r) => toHex(api.le32(r)))) === JSON.stringify(v.randomness),
    });
  }
  // The seat side: a fresh X25519 key; the sealed vector opened with the seat's key and combined
  // with the other holders' shares into its card; every dealt card of a hand combined from its shares.
  const seat = api.newSeatKey();
  const sealed = vectors.seals.find((s) => s.step === null);
  const base = Object.values(vectors.hands).find((h) => h.hand_id === sealed.hand_id);
  const n = fromHex(base.shuffles[0]).length; // 4 + 64 n + 32 (5 n + 9) + 64 = 224 n + 356
  const context = api.seatContext({
    deck: base.deck,
    handId: base.hand_id,
    keys: base.keys.map(fromHex),
    finalDeck: fromHex(base.shuffles[base.shuffles.length - 1]).subarray(4, 4 + (64 * (n - 356)) / 224),
  });
  const mine = base.dealt.find((d) => d.position === sealed.position);
  const opened = api.openSealedShare({
    deck: base.deck,
    handId: base.hand_id,
    position: sealed.position,
    holder: sealed.holder,
    sealed: fromHex(sealed.sealed),
    secretKey: fromHex(sealed.seat_secret),
  });
  const shares = mine.shares.map((h, k) => (k === sealed.holder ? opened : fromHex(h)));
  out.seat = {
    key: seat.secretKey.length === 32 && toHex(api.seatPublicKey(seat.secretKey)) === toHex(seat.publicKey),
    mine: api.combineShares(context, sealed.position, shares).id === mine.card,
    every: base.dealt.every((d) => api.combineShares(context, d.position, d.shares.map(fromHex)).id === d.card),
  };
  return out;
}
