// Inside a game's page that drives the verifier page in another window of its origin (harness.mjs,
// as source text): runFrameCases for the page in an iframe of the game's page (the game page is
// tests/web/test_codeal_iframe.py's), runPopupCases for the page in a top window the game opened
// (tests/web/test_codeal_popup.py's). Each must use nothing but its arguments and the vector runners
// passed to it (runSealVectors, runSeatReleases, runCodealVectors, made from their source texts in
// the game's window too), so that every byte array they make is the game's, not the verifier's
// (another realm: `instanceof` there is false for it). Through that window's window.fairdeck: the
// page's seat (HandSeat) opens and releases a co-dealt hand, the seal, seat-release and (in the
// frame) co-dealt vectors run, a proof file is checked, and bytes given in any form but a
// Uint8Array (text, a list of numbers, another typed array) are refused.
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

// The verifier page as a window of its own: the game's window.open, then the page's text written
// into it. A file: page is an origin of its own in both engines, so the game cannot open the page's
// file and still call it; the window it opens (about:blank) takes the game's origin, and the page's
// text (the game's <textarea id="verifier-page">, as the game would have fetched it from its own
// origin) is written there: the same windows, realms and origin as a window.open of the page's
// address on the game's origin. The page's own errors are caught in its window (the browser driver
// hears only the game's). Polls for the page with a deadline; closes the window at the end.
export async function runPopupCases(data, win, runners) {
  const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const line = (fn) => {
    try {
      fn();
      return "accepted";
    } catch (e) {
      if (!e.step) return `${e.name}: ${e.message}`;
      return `FAILED at step ${e.step}: ${e.detail}`;
    }
  };
  const pw = win.open("", "fairdeck-verifier");
  if (!pw) throw new Error("the game's window.open was refused");
  const errors = [];
  pw.document.open(); // erases the window's listeners: those below are set after it
  pw.addEventListener("error", (e) => errors.push(String(e.message)));
  pw.addEventListener("unhandledrejection", (e) => errors.push(String(e.reason)));
  pw.document.write(win.document.getElementById("verifier-page").value);
  pw.document.close();
  const deadline = Date.now() + 30000;
  while (!(pw.fairdeck && pw.document.readyState === "complete")) {
    if (Date.now() > deadline) throw new Error("the verifier page did not load in the game's window in 30 s");
    await new Promise((resolve) => win.setTimeout(resolve, 20));
  }
  const fd = pw.fairdeck;
  const doc = pw.document;
  const [runSeal, runRelease] = runners;
  const out = {
    realms: {
      own_uint8array: pw.Uint8Array === win.Uint8Array,
      instanceof_there: fromHex("00") instanceof pw.Uint8Array,
      top: pw.top === pw && pw.parent === pw,
      opener: pw.opener === win,
      title: doc.title,
    },
  };

  const { hand, cards, seat_secret: secret, identity_keys: identity } = data.seat;
  const cardMessage = (c) => ({
    position: c.position,
    shares: c.sealed.map(fromHex),
    seals: c.seals.map((s) => ({ holder: s.holder, seatPublicKey: fromHex(s.seat_public_key), sealedShareSha256: fromHex(s.sealed_share_sha256), signature: fromHex(s.signature) })),
  });
  const options = { deck: hand.deck, handId: hand.hand_id, keys: hand.keys.map(fromHex), finalDeck: fromHex(hand.final_deck), identityKeys: identity.map(fromHex) };
  let given = null;
  const seat = fd.seat({ ...options, secretKey: fromHex(secret), onrelease: (tokens) => (given = tokens) });
  let opened;
  try {
    opened = seat.open(cards.map(cardMessage)).map((c) => c.code).join(" ");
  } catch (e) {
    opened = `${e.name}: ${e.message}`;
  }
  const shown = doc.getElementById("seat-cards").textContent;
  doc.getElementById("seat-release").click(); // the player, in the page's window
  const tokens = given ?? [];
  out.seat = {
    public_key: toHex(seat.publicKey),
    opened,
    shown,
    status: doc.getElementById("seat-status").textContent,
    released: ["OK: releases", ...tokens.map(toHex)].join(" "),
    // What the game holds: the page's arrays (its realm's), which its own Blob reads as they are.
    tokens_are_the_games: tokens.map((t) => t instanceof win.Uint8Array),
    sent: toHex(new Uint8Array(await new win.Blob(tokens).arrayBuffer())),
  };
  // Bytes in any form but a Uint8Array, the game's own: refused in the seat's words, never read.
  const first = cards[0];
  const sealed = fromHex(first.sealed[1]);
  out.seat.refused = {
    secret_as_numbers: line(() => fd.seat({ ...options, secretKey: Array.from(fromHex(secret)) })),
    key_as_int8array: line(() => fd.seat({ ...options, keys: [new win.Int8Array(options.keys[0].buffer), ...options.keys.slice(1)] })),
    identity_key_as_clamped: line(() => fd.seat({ ...options, identityKeys: options.identityKeys.map((k) => new win.Uint8ClampedArray(k)) })),
    share_as_numbers: line(() => fd.seat({ ...options, secretKey: fromHex(secret) }).open([{ ...cardMessage(first), shares: first.sealed.map((s) => Array.from(fromHex(s))) }])),
    release_of_numbers: line(() => fd.codeal.sealRelease({ deck: hand.deck, handId: hand.hand_id, position: first.position, holder: 1, sealed: Array.from(sealed), secretKey: fromHex(secret) })),
  };
  out.seal_vectors = runSeal(data.seal_vectors, fd.codeal);
  out.seat_releases = runRelease(data.release_vectors, fd.codeal);
  // The other way round, the game in a frame of the page: the page's policy loads no frame. The
  // directive each refusal names, once one came (or 10 s passed). The game is a data: address here:
  // Firefox lets a file: page frame a file: address whatever the policy says (a file: game would
  // load), which an http(s) game is not.
  const refusals = [];
  doc.addEventListener("securitypolicyviolation", (e) => refusals.push(e.effectiveDirective));
  const frame = doc.createElement("iframe");
  frame.src = "data:text/html,<title>A card game</title><h1>A card game</h1>";
  doc.body.append(frame);
  const until = Date.now() + 10000;
  while (!refusals.length && Date.now() < until) await new Promise((resolve) => win.setTimeout(resolve, 20));
  out.game_framed = refusals;
  out.errors = errors;
  pw.close();
  return out;
}
