// Inside a game's page that embeds the verifier page in an iframe (harness.mjs, as source text; the
// game page is tests/web/test_codeal_iframe.py's): runFrameCases must use nothing but its arguments
// and the vector runners passed to it (runSealVectors, runSeatReleases, runCodealVectors, made from
// their source texts in the game's window too), so that every byte array they make is the game's,
// not the verifier's (another realm: `instanceof` there is false for it). Through the frame's
// window.fairdeck: the page's seat (HandSeat) opens and releases a co-dealt hand, the seal,
// seat-release and co-dealt vectors run, a proof file is checked, and bytes given as text or a list
// of numbers are refused.
export async function runFrameCases(data, win, runners) {
  const frame = win.document.getElementById("verifier");
  // The game's page ends loading after its frame has; waited for all the same, on its load event.
  const ready = () => Boolean(frame.contentWindow?.fairdeck) && frame.contentDocument.readyState === "complete";
  if (!ready()) await new Promise((resolve) => frame.addEventListener("load", resolve, { once: true }));
  const fw = frame.contentWindow;
  const fd = fw.fairdeck;
  const doc = fw.document;
  const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const line = (fn) => {
    try {
      return fn();
    } catch (e) {
      if (!e.step) return `${e.name}: ${e.message}`;
      return `FAILED at step ${e.step}: ${e.detail}`;
    }
  };
  const [runSeal, runRelease, runCodeal] = runners;
  const out = {
    realms: {
      own_uint8array: fw.Uint8Array === win.Uint8Array,
      instanceof_there: fromHex("00") instanceof fw.Uint8Array,
      // The game reads the frame's document: the same origin (a srcdoc frame takes its parent's).
      frame_address: fw.location.href,
      frame_title: doc.title,
    },
  };

  // The page's seat, every byte array the game's: opens the two sealed cards, then the player's
  // button releases it, and the game's onrelease gets the tokens.
  const { hand, cards, seat_secret: secret, identity_keys: identity } = data.seat;
  const cardMessage = (c) => ({
    position: c.position,
    shares: c.sealed.map(fromHex),
    seals: c.seals.map((s) => ({ holder: s.holder, seatPublicKey: fromHex(s.seat_public_key), sealedShareSha256: fromHex(s.sealed_share_sha256), signature: fromHex(s.signature) })),
  });
  const options = { deck: hand.deck, handId: hand.hand_id, keys: hand.keys.map(fromHex), finalDeck: fromHex(hand.final_deck), identityKeys: identity.map(fromHex) };
  let given = null;
  const seat = fd.seat({ ...options, secretKey: fromHex(secret), onrelease: (tokens) => (given = tokens) });
  const opened = line(() => seat.open(cards.map(cardMessage)).map((c) => c.code).join(" "));
  const shown = doc.getElementById("seat-cards").textContent;
  doc.getElementById("seat-release").click();
  out.seat = {
    public_key: toHex(seat.publicKey),
    opened,
    shown,
    status: doc.getElementById("seat-status").textContent,
    released: ["OK: releases", ...(given ?? []).map(toHex)].join(" "),
  };
  // Text where bytes are expected is refused in the seat's words, never read as bytes.
  out.seat.refused = {
    secret_as_hex: line(() => fd.seat({ ...options, secretKey: secret })),
    secret_as_numbers: line(() => fd.seat({ ...options, secretKey: Array.from(fromHex(secret)).map(String) })),
    share_as_hex: line(() => fd.seat({ ...options, secretKey: fromHex(secret) }).open([{ ...cardMessage(cards[0]), shares: cards[0].sealed }])),
  };

  // The vector runners, their arrays the game's.
  out.seal_vectors = runSeal(data.seal_vectors, fd.codeal);
  out.seat_releases = runRelease(data.release_vectors, fd.codeal);
  // verifyCodealHand (and decodePoint under it) on every co-dealt vector: the hand's records as the
  // game's arrays (a field that is not hex passed on as it is, as codealHandFromVector does).
  const HEX = /^(?:[0-9a-f]{2})*$/;
  const bytes = (h) => (typeof h === "string" && HEX.test(h) ? fromHex(h) : h);
  const gameHand = (v) => ({
    deck: v.deck,
    handId: v.hand_id,
    keys: v.keys.map(bytes),
    shuffles: v.shuffles.map(bytes),
    dealt: v.dealt.map((d) => ({ position: d.position, card: d.card, shares: d.shares.map(bytes) })),
    seeds: v.seeds === null || v.seeds === undefined ? null : v.seeds.map(bytes),
  });
  out.codeal_game = runCodeal(data.codeal_vectors, { ...fd.codeal, codealHandFromVector: gameHand });
  // Key records as text or as a list of numbers: refused at step encoding, as before.
  const v = data.codeal_vectors.hands["short-2"];
  out.codeal_refused = {
    as_hex: fd.codeal.codealLine({ ...gameHand(v), keys: v.keys }),
    as_numbers: fd.codeal.codealLine({ ...gameHand(v), keys: v.keys.map((k) => Array.from(fromHex(k))) }),
  };
  // A co-dealt hand's proof file, its bytes the game's (as a game hands the page a file it fetched).
  out.proofs = Object.fromEntries(
    data.proofs.map((p) => [p.name, fd.verdictLine(fd.verifyBytes(new TextEncoder().encode(p.text), { codealerKey: p.codealer_keys.join("\n") }))]),
  );
  return out;
}
