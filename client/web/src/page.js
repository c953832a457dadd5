// The verifier page's user interface. Everything runs here, in the browser: no request leaves
// the page (its Content-Security-Policy forbids any), and nothing is stored.
import { verifyBytes, isHandProof, signedByWords, verdictLine } from "./verify.js";
import * as spec from "./spec.js";
import * as log from "./log.js";
import * as handproof from "./handproof.js";
import * as tlogproof from "./tlogproof.js";
import * as policy from "./policy.js";
import * as strictjson from "./strictjson.js";
import { vectorApi as codeal } from "./codeal/index.js";
import { HandSeat } from "./codeal/handseat.js";

const $ = (id) => document.getElementById(id);
const SUIT = { c: "\u2663", d: "\u2666", h: "\u2665", s: "\u2660" };
const RANK = { T: "10" };
// What a screen reader says of a card (the glyphs alone read as "A black heart suit").
const RANK_NAME = { A: "Ace", K: "King", Q: "Queen", J: "Jack", T: "10" };
const SUIT_NAME = { c: "clubs", d: "diamonds", h: "hearts", s: "spades" };
// The policy file's bytes as chosen (its octets are read as they are: names may be any octets),
// or as typed in its box; null when neither holds anything.
const state = { bytes: null, name: "", policy: null };

function cardElement(code) {
  const el = document.createElement("span");
  el.className = "card";
  el.title = code;
  el.setAttribute("role", "img");
  if (code === "X1" || code === "X2") {
    el.classList.add("joker");
    el.textContent = `Joker ${code[1]}`;
    el.setAttribute("aria-label", el.textContent);
    return el;
  }
  const [face, deckNo] = code.split(".");
  const name = `${RANK_NAME[face[0]] ?? face[0]} of ${SUIT_NAME[face[1]]}`;
  el.setAttribute("aria-label", deckNo ? `${name}, deck ${deckNo}` : name);
  el.classList.add(face[1] === "h" || face[1] === "d" ? "red" : "black");
  el.textContent = (RANK[face[0]] ?? face[0]) + SUIT[face[1]];
  if (deckNo) {
    const sub = document.createElement("sub");
    sub.textContent = `deck ${deckNo}`;
    el.append(sub);
  }
  return el;
}

/** The banner: the verdict in the words `fairdeck verify` prints, then what it means. */
function renderVerdict(report) {
  const verdict = $("verdict");
  verdict.className = "verdict";
  let line;
  let help = "";
  if (report.ok) {
    verdict.classList.add("pass");
    line = {
      "hand-proof": "\u2714 Every check passed: this hand was dealt fairly from the committed seed, and it is in the signed log.",
      "codeal-proof": "\u2714 Every check passed: the dealer and the co-dealer you named both shuffled this deck, and every proof holds.",
      transcript: "\u2714 Every check passed: this deck is the one the committed seed and the players' seeds give.",
    }[report.kind];
    help = verdictLine(report);
    // Which of the keys given signed the checkpoint (after a rotation, the player may give several).
    if (report.signedBy.length) help += ` The checkpoint is signed by ${signedByWords(report)}.`;
  } else if (report.step) {
    verdict.classList.add("fail");
    line = `\u2718 ${verdictLine(report)}`;
    const check = report.checks.find((c) => c.step === report.step);
    help = report.newerFormat
      ? `This hand is NOT verified by this page: it reads hand proof formats 1 to 4 (4: a co-dealt hand), and the file is of format ` +
        `${report.newerFormat}, which may be newer than this copy of the page. Check it with the dealer's ` +
        "current verifier page, or with fairdeck verify, before you judge the hand."
      : `This hand is NOT verified. The check that failed: ${check.text}`;
  } else {
    verdict.classList.add("incomplete");
    const codeal = report.kind === "codeal-proof";
    line = report.inputError
      ? `Not fully checked: ${report.inputError}.`
      : codeal
        ? "Not fully checked: paste the co-dealer's identity key (from its operator), under \u201cCo-dealt hands\u201d below, to check who shuffled."
        : "Not fully checked: paste the log's key (from the dealer's operator) to check the log steps.";
    if (codeal) $("codealer-box").open = true;
    help = "Until every check has run, this hand is not verified.";
  }
  $("verdict-line").textContent = line;
  $("verdict-help").textContent = help;
  $("announce").textContent = `${line} ${help}`;
  verdict.dataset.step = report.step ?? "";
  verdict.dataset.ok = String(report.ok);
}

function render(report) {
  $("result").hidden = false;
  renderVerdict(report);

  const list = $("checks");
  list.replaceChildren();
  for (const c of report.checks) {
    const li = document.createElement("li");
    li.className = c.status;
    li.dataset.step = c.step;
    li.dataset.status = c.status;
    const mark = { pass: "\u2714", fail: "\u2718", skip: "\u2013" }[c.status];
    const head = document.createElement("div");
    head.innerHTML = `<span class="mark"></span> <code></code> <span class="text"></span>`;
    head.querySelector(".mark").textContent = mark;
    head.querySelector("code").textContent = c.step;
    head.querySelector(".text").textContent = c.text;
    li.append(head);
    if (c.detail) {
      const d = document.createElement("div");
      d.className = "detail";
      d.textContent = c.detail;
      li.append(d);
    }
    list.append(li);
  }

  // A co-dealt hand that checked out: no single party could have read its cards (and who could, together).
  const codealHeld = Boolean(report.codeal) && !report.step;
  $("codeal").hidden = !codealHeld;
  $("codeal-summary").textContent = codealHeld ? report.codeal.summary : "";
  const hand = $("hand");
  hand.hidden = !report.hand;
  // Cards shown from a file that did not verify are marked as such, on each card and above them.
  hand.classList.toggle("unverified", !report.ok);
  $("hand-warning").textContent = report.ok
    ? ""
    : report.step
      ? `\u2718 Not verified: these are the cards the file claims, and the check failed at step ${report.step}.`
      : "Not verified yet: these are the cards the file claims; the log steps have not been checked.";
  if (report.hand) {
    const h = report.hand;
    const codeal = report.kind === "codeal-proof";
    const cards = `${h.dealt.length} card${h.dealt.length === 1 ? "" : "s"}`;
    $("hand-summary").textContent = codeal
      ? `Hand ${h.handId}: deck ${h.deck} (${h.size} cards), co-dealt by ${h.holders} key holders; ${cards} in this proof`
      : `Hand ${h.handId}: deck ${h.deck} (${h.size} cards), ${h.version}` + (report.kind === "hand-proof" ? `, ${cards} dealt` : "");
    $("dealt").replaceChildren(
      ...h.dealt.map((code) => {
        const el = cardElement(code);
        el.dataset.verified = String(report.ok);
        return el;
      }),
    );
    $("dealt-title").textContent =
      (codeal ? "Your cards" : report.kind === "hand-proof" ? "The cards dealt, in order" : "The deck, top card first") +
      (report.ok ? "" : " (not verified)");
    $("deck").replaceChildren(...h.deckCodes.map(cardElement));
    $("deck-box").hidden = report.kind !== "hand-proof";
    const facts = h.facts ?? [
      ["Commitment (published before the deal)", h.commitment],
      ["Server seed (revealed after the hand)", h.serverSeed],
      ["Players' seeds, in order", h.clientSeeds.length ? h.clientSeeds.join("\n") : "none"],
    ];
    if (h.logKeyInFile !== undefined) facts.push(["Log key written in the file (not trusted, for comparison)", h.logKeyInFile]);
    $("facts").replaceChildren(
      ...facts.flatMap(([k, v]) => {
        const dt = document.createElement("dt");
        dt.textContent = k;
        const dd = document.createElement("dd");
        dd.textContent = v;
        return [dt, dd];
      }),
    );
  }
  $("timing").textContent = `Checked in ${report.millis.toFixed(1)} ms, in this browser, with no network.`;
}

function options() {
  const threshold = $("threshold").value.trim();
  return {
    key: $("key").value,
    codealerKey: $("codealer-key").value,
    witnesses: $("witnesses").value.split("\n"),
    threshold: threshold ? Number(threshold) : null,
    policy: state.policy,
  };
}

/** A banner that is no verdict about the dealer: the page could not read or check the input. */
function notChecked(line) {
  $("result").hidden = false;
  $("hand").hidden = true;
  $("checks").replaceChildren();
  $("verdict").className = "verdict incomplete";
  $("verdict-line").textContent = line;
  $("verdict-help").textContent = "";
  $("announce").textContent = line;
}

function check() {
  if (state.bytes === null) return; // nothing given yet (an empty file is something: it gets its verdict)
  try {
    render(verifyBytes(state.bytes, options()));
  } catch (e) {
    // A defect of this page, never a verdict about the dealer: say so plainly.
    notChecked(`This page could not check the file (an error in the page: ${e && e.message}).`);
  }
}

/** Nothing to check any more (the text box was emptied): no verdict of what it held before stays. */
function clear() {
  state.bytes = null;
  $("result").hidden = true;
  $("verdict-line").textContent = "";
  $("verdict-help").textContent = "";
  $("announce").textContent = "";
}

/** The key boxes grow to hold every key (each wraps anywhere), so no part of one is hidden. */
function fitKey() {
  for (const key of [$("key"), $("codealer-key")]) {
    key.style.height = "auto";
    const borders = key.offsetHeight - key.clientHeight; // the box's height counts its borders too
    key.style.height = `${key.scrollHeight + borders}px`;
  }
}

/**
 * Bytes read of a file: one more than the most either format allows, so that a larger file fails
 * on its size, as `fairdeck verify` says, without being read whole (a file of gigabytes cannot be).
 */
const READ_AT_MOST = 1024 * 1024 + 1;
/** The same for a policy file: one byte past the most the policy reader takes (1 MiB). */
const POLICY_AT_MOST = 1024 * 1024 + 1;

async function loadFile(file) {
  $("source").textContent = `${file.name} (${file.size} bytes)`;
  let bytes;
  try {
    bytes = new Uint8Array(await file.slice(0, READ_AT_MOST).arrayBuffer());
  } catch (e) {
    state.bytes = null;
    notChecked(`This browser could not read ${file.name} (${e && e.name}): nothing was checked. Choose the file again, or paste its text.`);
    return;
  }
  state.bytes = bytes;
  state.name = file.name;
  $("text").value = new TextDecoder("utf-8").decode(bytes);
  check();
  // On a small screen, bring the verdict into view (it does not move when it is in view already).
  $("verdict").scrollIntoView({ block: "nearest" });
  holdWindow();
}

/**
 * After a file is checked the window stays where the page put it, the verdict in view, until the
 * player moves it: for HOLD_MS a scroll that no input of theirs made is undone. In headless
 * Firefox under load the window moved 15-40 ms after the verdict was shown (to 1449-1589 on a
 * phone, the verdict far above), with no call of the page's and no focus event: about 1 in 30
 * loaded runs of the phone test (tests/web/test_page_live.py). Whether Firefox or the driver
 * (WebDriver BiDi's setFiles) made it is not known. A scrollbar drag is held back too, a second.
 */
const HOLD_MS = 1000;
const PLAYERS_INPUT = ["wheel", "touchstart", "keydown", "pointerdown"];
let releaseHold = () => {};

function holdWindow() {
  releaseHold();
  const at = window.scrollY;
  const until = performance.now() + HOLD_MS;
  const onScroll = () => {
    if (performance.now() > until) releaseHold();
    else if (window.scrollY !== at) window.scrollTo({ top: at, behavior: "instant" });
  };
  releaseHold = () => {
    window.removeEventListener("scroll", onScroll);
    for (const type of PLAYERS_INPUT) window.removeEventListener(type, releaseHold, true);
    releaseHold = () => {};
  };
  window.addEventListener("scroll", onScroll);
  for (const type of PLAYERS_INPUT) window.addEventListener(type, releaseHold, true);
}

function init() {
  const drop = $("drop");
  for (const ev of ["dragenter", "dragover"]) {
    drop.addEventListener(ev, (e) => {
      e.preventDefault();
      drop.classList.add("over");
    });
  }
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  // A file dropped anywhere on the page is checked (the text box is the largest target), and the
  // browser does not navigate away to it.
  window.addEventListener("dragover", (e) => e.preventDefault());
  window.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    const file = e.dataTransfer && e.dataTransfer.files[0];
    if (file) loadFile(file);
  });
  $("file").addEventListener("change", (e) => {
    const file = e.target.files[0];
    if (file) loadFile(file);
  });
  $("text").addEventListener("input", () => {
    const text = $("text").value;
    if (!text) {
      $("source").textContent = "";
      clear();
      return;
    }
    state.bytes = new TextEncoder().encode(text);
    $("source").textContent = "pasted or edited text";
    check();
  });
  for (const id of ["key", "codealer-key", "witnesses", "threshold"]) $(id).addEventListener("input", check);
  $("policy").addEventListener("input", () => {
    const text = $("policy").value;
    state.policy = text.trim() ? new TextEncoder().encode(text) : null;
    $("policy-file-label").textContent = "Choose a tlog-policy file";
    check();
  });
  $("policy-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    try {
      state.policy = new Uint8Array(await file.slice(0, POLICY_AT_MOST).arrayBuffer());
    } catch (err) {
      state.policy = null;
      notChecked(`This browser could not read ${file.name} (${err && err.name}): choose the policy file again, or paste its text.`);
      return;
    }
    $("policy").value = new TextDecoder("utf-8").decode(state.policy);
    $("policy-file-label").textContent = `${file.name} (${file.size} bytes), read as chosen`;
    check();
  });
  $("key").addEventListener("input", fitKey);
  $("codealer-key").addEventListener("input", fitKey);
  $("codealer-box").addEventListener("toggle", fitKey);
  window.addEventListener("resize", fitKey);
  $("check").addEventListener("click", check);
  // `fairdeck verifier-page --key` pins the log's keys (several after a rotation, separated by spaces).
  const pinned = document.querySelector('meta[name="fairdeck-log-key"]');
  if (pinned && pinned.content.trim()) $("key").value = pinned.content.trim().split(/\s+/).join("\n");
  // `fairdeck verifier-page --codealer-key` pins the co-dealers' identity keys the same way.
  const codealers = document.querySelector('meta[name="fairdeck-codealer-key"]');
  if (codealers && codealers.content.trim()) $("codealer-key").value = codealers.content.trim().split(/\s+/).join("\n");
  fitKey();
}

/**
 * The seat's section: its hand, its cards, and whether it released the hand (no key, no token).
 * `sent` is where the tokens are: "none" (no release yet), "sending" (the game's onrelease is at
 * work), "sent" (it took them), or "unsent" (no onrelease, or it failed: the button stays on, so the
 * player can try again; the page says so rather than that the hand can be closed).
 */
function renderSeat(s, sent) {
  const n = `${s.tokens} release token${s.tokens === 1 ? "" : "s"}`;
  $("seat").hidden = false;
  $("seat-hand").textContent = `Hand ${s.handId}, co-dealt: only this device can open your cards.`;
  $("seat-cards").replaceChildren(...s.cards.map(cardElement));
  $("seat-status").textContent = !s.released
    ? s.cards.length === 0
      ? "Not released: no card of yours is open yet, so there is nothing to release. The co-dealer keeps its seed and the house cannot learn your cards."
      : "Not released: until you release your seat (or the co-dealer's hold passes), the co-dealer keeps its seed and the house cannot learn your cards."
    : sent === "sent"
      ? `Released: your play is over. ${n} went to the game, so the hand can be closed and revealed now; no further card of this hand is opened on this page.`
      : sent === "sending"
        ? `Released: your play is over. Sending ${n} to the game; no further card of this hand is opened on this page.`
        : `Released on this page, but the ${n} did not reach the game, so the hand cannot be closed yet: press the button to send them again. No further card of this hand is opened on this page.`;
  $("seat-release").textContent = s.released && sent === "unsent" ? "Send my release to the game again" : "My play is over: release my seat";
  $("seat-release").disabled = s.cards.length === 0 || (s.released && sent !== "unsent");
  // Said through the page's one live region (rendered from the start, so a change is announced).
  $("announce").textContent = $("seat-status").textContent;
}

/**
 * A co-dealt hand's seat on this page, for a game's own page (same origin) that embeds it in a
 * frame or opened it as a window of its own (the page frames nothing: its policy loads no frame): the
 * options of HandSeat (deck, handId, keys, shuffles or finalDeck, identityKeys) and `onrelease(tokens)`,
 * the game's function that sends the release tokens to its server (in a request body, for CloseHand's
 * seat_releases; it may return a promise). The page itself sends nothing: its policy allows no request. The tokens are made
 * only when the player presses "My play is over" or the game calls release() at the seat's fold or
 * showdown, and are never shown, logged or put in the address. The page says the hand can be closed
 * only once onrelease took them; without one, or when it throws or its promise fails, it says they
 * did not reach the game and the button sends them again. release() refuses (SeatStateError) while
 * no card is open, and throws what onrelease threw.
 */
function seat({ onrelease = null, ...hand }) {
  let sent = "none";
  let held = null;
  const render = (s) => renderSeat(s, sent);
  const settle = (to) => {
    sent = to;
    render(held.state());
  };
  held = new HandSeat({ ...hand, onchange: render });
  const release = () => {
    const before = sent;
    sent = "sending";
    let tokens;
    try {
      tokens = held.release();
    } catch (e) {
      sent = before; // refused (no card open yet): nothing was made
      throw e;
    }
    let result;
    try {
      if (!onrelease) throw new Error("no game is connected to take the release tokens (onrelease)");
      result = onrelease(tokens.map((t) => t.slice()));
    } catch (e) {
      settle("unsent");
      throw e;
    }
    if (result && typeof result.then === "function") {
      render(held.state());
      result.then(() => settle("sent"), () => settle("unsent"));
    } else settle("sent");
    return tokens;
  };
  $("seat-release").onclick = () => {
    try {
      release();
    } catch {
      // The section says what happened; nothing of the tokens goes to the console.
    }
  };
  render(held.state());
  return { publicKey: held.publicKey, open: (cards) => held.open(cards), release, state: () => held.state() };
}

// For tests, benchmarks and curious players: the same functions the page uses.
window.fairdeck = {
  verifyBytes,
  verdictLine,
  isHandProof,
  verifyText: (text, opts) => verifyBytes(new TextEncoder().encode(text), opts),
  spec,
  log,
  handproof,
  tlogproof,
  policy,
  strictjson,
  codeal,
  seat,
};

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
