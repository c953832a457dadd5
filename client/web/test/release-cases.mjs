// docs/vectors/fairdeck-codeal-seat-releases-v1.json read the way an outsider's harness reads it, for
// node (release.test.mjs) and, as its source text, inside the page (harness.mjs): runSeatReleases must
// use nothing but its arguments. `api` holds the package's seatReleases; each case becomes the line
// "OK: releases HEX HEX ..." or "FAILED at step S: D", as the Python SDK's seat_releases gives it.
export function runSeatReleases(vectors, api) {
  const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const out = {};
  for (const c of vectors.cases) {
    try {
      const tokens = api.seatReleases({
        deck: c.deck,
        handId: c.hand_id,
        sealedCards: c.sealed_cards.map((s) => ({ position: s.position, shares: s.shares.map(fromHex) })),
        secretKey: fromHex(c.seat_secret ?? vectors.seat_secret),
      });
      out[c.name] = ["OK: releases", ...tokens.map(toHex)].join(" ");
    } catch (e) {
      if (!e.step) throw e;
      out[c.name] = `FAILED at step ${e.step}: ${e.detail}`;
    }
  }
  return out;
}
