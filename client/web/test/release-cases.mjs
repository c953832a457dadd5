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

// Inside the page (harness.mjs, as source text): each seat of `seats` played through the page's own
// window.fairdeck.seat, as a game's page drives it. The seat opens its cards, then the player presses
// "My play is over"; what the seat section said with no card open, before and after, and after a first
// press whose onrelease failed (then the player presses again), the tokens the game's onrelease got,
// whether a card is still opened after the release, and every place a token or the seat's key showed
// up as hex, base64 or decimals (the document, the address, storage, anything written to the
// console: all must stay empty).
export async function runPageSeats(seats, win) {
  const doc = win.document;
  const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const b64 = (b) => win.btoa(Array.from(b, (x) => String.fromCharCode(x)).join(""));
  const logged = [];
  for (const m of ["log", "info", "warn", "error", "debug", "trace", "dir", "table"]) {
    win.console[m] = (...args) => logged.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a) ?? String(a))).join(" "));
  }
  const text = (id) => doc.getElementById(id).textContent;
  const cardMessage = (c) => ({
    position: c.position,
    shares: c.shares.map(fromHex),
    seals: c.seals.map((s) => ({ holder: s.holder, seat_public_key: fromHex(s.seat_public_key), sealed_share_sha256: fromHex(s.sealed_share_sha256), signature: fromHex(s.signature) })),
  });
  const out = { seats: [], leaks: [], logged };
  const secrets = [];
  for (const s of seats) {
    let given = null;
    let calls = 0;
    const seat = win.fairdeck.seat({
      deck: s.deck,
      handId: s.hand_id,
      keys: s.keys.map(fromHex),
      shuffles: s.shuffles.map(fromHex),
      identityKeys: s.identity_keys.map(fromHex),
      secretKey: fromHex(s.secret),
      onrelease: (tokens) => {
        if (++calls === 1) throw new Error("the game's server is offline");
        given = tokens;
      },
    });
    const fresh = { status: text("seat-status"), disabled: doc.getElementById("seat-release").disabled };
    let early = "released";
    try {
      seat.release();
    } catch (e) {
      early = e.name;
    }
    const cards = seat.open(s.cards.map(cardMessage)).map((c) => c.code);
    const before = { status: text("seat-status"), disabled: doc.getElementById("seat-release").disabled, given: given !== null, shown: text("seat-cards") };
    doc.getElementById("seat-release").click();
    const failed = { status: text("seat-status"), disabled: doc.getElementById("seat-release").disabled, given: given !== null };
    doc.getElementById("seat-release").click();
    const after = { status: text("seat-status"), disabled: doc.getElementById("seat-release").disabled, shown: text("seat-cards") };
    let afterRelease = "opened";
    try {
      seat.open(s.cards.slice(0, 1).map(cardMessage));
    } catch (e) {
      afterRelease = e.name;
    }
    const tokens = (given ?? []).map(toHex);
    secrets.push(s.secret, ...tokens, ...(given ?? []).map(b64), fromHex(s.secret).join(","), ...(given ?? []).map((t) => Array.from(t).join(",")));
    out.seats.push({ public_key: toHex(seat.publicKey), cards, fresh, early, before, failed, after, tokens, after_release: afterRelease, state: JSON.stringify(seat.state()) });
  }
  // No game connected (no onrelease): the page must not say the tokens went anywhere.
  const first = seats[0];
  const hand = {
    deck: first.deck,
    handId: first.hand_id,
    keys: first.keys.map(fromHex),
    shuffles: first.shuffles.map(fromHex),
    identityKeys: first.identity_keys.map(fromHex),
    secretKey: fromHex(first.secret),
  };
  const section = () => ({ status: text("seat-status"), disabled: doc.getElementById("seat-release").disabled });
  win.fairdeck.seat(hand).open(first.cards.map(cardMessage));
  doc.getElementById("seat-release").click();
  out.no_game = section();
  // A game whose onrelease answers later (a promise): "Sending" until it settles, then what it said.
  let answer = null;
  let fails = true;
  win.fairdeck.seat({ ...hand, onrelease: () => (answer = fails ? Promise.reject(new Error("offline")) : Promise.resolve()) }).open(first.cards.map(cardMessage));
  out.later = [];
  for (const failing of [true, false]) {
    fails = failing;
    doc.getElementById("seat-release").click();
    out.later.push(section());
    await answer.catch(() => {}); // the page's own handler was set first, so it has run by now
    out.later.push(section());
  }
  let stored = "";
  try {
    for (const store of [win.localStorage, win.sessionStorage]) for (let i = 0; i < store.length; i++) stored += store.getItem(store.key(i));
  } catch {
    stored = ""; // a file: page may have no storage at all
  }
  const places = { document: doc.documentElement.outerHTML, address: win.location.href, storage: stored, console: logged.join("\n"), states: out.seats.map((x) => x.state).join("\n") };
  for (const [where, body] of Object.entries(places)) {
    const decimals = body.replace(/"\d+":/g, "").replace(/\s+/g, ""); // {"0":171,...} and [ 171, ... ] as 171,...
    for (const secret of secrets) if (body.includes(secret) || decimals.includes(secret)) out.leaks.push(where);
  }
  return out;
}
