// Drive the verifier page in a real headless browser, for tests/web and bench/.
//
//   node harness.mjs JOB.json > RESULT.json     one job, in a browser launched for it
//   node harness.mjs --serve                    many jobs: one JSON job a line on stdin, one JSON
//                                               line on stdout for each, in the order they came
//
// JOB: { page, engine: "chromium" | "firefox", browser: PATH, color_scheme: "light" | "dark" | null,
//        font_size: the browser's default text size in CSS px | null,
//        verify: [{id, bytes_b64, key (a key, a text of keys, or a list), witnesses, threshold, policy_b64}],
//        ui: [{id, file, key, witnesses, threshold, policy (text), policy_file, drop, scroll_to, moved, viewport, edit: {find, replace}}],
//        (edit: the first `find` in the text box replaced by `replace`, as a player edits: one input event)
//        (drop: true drops the file on the drop zone, a selector on that element instead;
//         scroll_to: a selector, the window scrolled to that element before the file comes;
//         moved: {to, by_player}, the window scrolled to `to` once the verdict is shown, after a
//         wheel event where by_player (a player's scroll), else as a browser's own scroll;
//         open_details: true opens every <details> once the verdict is shown)
//        log_vectors: {log, witness} | null, control: PATH | null, bench: {cases, rounds} | null,
//        codeal_vectors: {vectors} | null, codeal_bench: {hand, rounds} | null,
//        seal_vectors: {vectors} | null, seat_release_vectors: {vectors} | null,
//        page_seats: [{deck, hand_id, keys, shuffles, identity_keys, secret, cards}] | null,
//        frame_cases: {seat, seal_vectors, release_vectors, codeal_vectors, proofs, popup} | null: `page` is then a game's
//        page with the verifier page in <iframe id="verifier"> or, popup: true, a window it opens (frame-cases.mjs) }
// Every request the page makes (but its own file) is recorded in `requests` and refused.
//
// --serve keeps each browser it launched open between jobs, one per set of launch options (engine,
// binary, and what drivers.mjs takes at launch only: Firefox's color_scheme and font_size; Chromium
// takes them for each page), and answers each job with
// {ok: true, result} or {ok: false, error, restarted}. No state passes from one job to the next:
// every page of a job opens in a fresh browser context (cookies, storage, permissions), its request
// and error logs are the job's own, and its contexts are closed when it ends, failed or not. A job
// that failed with its browser gone drops that browser (restarted: true); the next job launches one.
// It ends, closing its browsers, when its stdin ends or its parent is gone (drivers.mjs's endWithParent).
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { DEFAULT_SCHEME, endWithParent, launch, PER_PAGE } from "./drivers.mjs";
import { runCodealVectors } from "./codeal-cases.mjs";
import { runSealVectors } from "./seal-cases.mjs";
import { runPageSeats, runSeatReleases } from "./release-cases.mjs";
import { runFrameCases, runPopupCases } from "./frame-cases.mjs";

const pageOptions = (job) => ({ colorScheme: job.color_scheme ?? undefined, fontSize: job.font_size ?? undefined });
// What a browser must be launched with: the options its engine cannot take for each page, but the
// default scheme, which every browser is launched with (browser.py's LAUNCH_DEFAULTS).
const launchOptions = (job) => {
  const all = pageOptions(job);
  for (const name of PER_PAGE[job.engine ?? "chromium"] ?? []) delete all[name];
  if (all.colorScheme === DEFAULT_SCHEME) delete all.colorScheme;
  return all;
};
const launchJob = (job) => launch(job.engine ?? "chromium", job.browser ?? job.chromium, launchOptions(job));

if (process.argv[2] === "--serve") {
  await serve();
} else {
  const job = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const browser = await launchJob(job);
  const out = await runJob(browser, job);
  await browser.close();
  process.stdout.write(JSON.stringify(out));
}

async function serve() {
  // A driver's late rejection (a request routed as its context closed) must not end the server:
  // it is said on stderr; a job's own failures reach its answer through the awaits.
  process.on("unhandledRejection", (e) => process.stderr.write(`unhandled: ${e?.stack ?? e}\n`));
  const browsers = new Map(); // launch options, as JSON -> a promise of the browser
  endWithParent(async () => {
    for (const held of browsers.values()) await (await held.catch(() => null))?.close().catch(() => {});
  });
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let answer;
    let key = null;
    try {
      const job = JSON.parse(line);
      key = JSON.stringify([job.engine ?? "chromium", job.browser ?? job.chromium ?? null, launchOptions(job)]);
      if (!browsers.has(key)) browsers.set(key, launchJob(job));
      const browser = await browsers.get(key);
      answer = { ok: true, result: await runJob(browser, job) };
    } catch (e) {
      let restarted = false;
      const held = key === null ? undefined : browsers.get(key);
      const browser = held && (await held.catch(() => null));
      if (held && !(browser && (await healthy(browser)))) {
        browsers.delete(key);
        restarted = true;
        if (browser) await browser.close().catch(() => {});
      }
      answer = { ok: false, error: String(e?.stack ?? e), restarted };
    }
    process.stdout.write(JSON.stringify(answer) + "\n");
  }
}

// Whether `browser` still opens a page, after a job failed in it (a driver may learn late that its
// browser is gone).
async function healthy(browser) {
  if (!browser.alive()) return false;
  let timer;
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("no page in 20 s")), 20000)));
  try {
    const page = await Promise.race([browser.open("about:blank", { onRequest: () => {}, onError: () => {} }), late]);
    await page.close();
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

// One job in `browser`: every page it opens is closed when it ends, failed or not.
async function runJob(browser, job) {
  const opened = new Set();
  const open = async (url, options) => {
    const p = await browser.open(url, { ...pageOptions(job), ...options });
    opened.add(p);
    return {
      ...p,
      close: () => {
        opened.delete(p);
        return p.close();
      },
    };
  };
  try {
    return await runPages(open, job);
  } finally {
    for (const p of opened) await p.close().catch(() => {});
  }
}

async function runPages(open, job) {
  const pageUrl = pathToFileURL(job.page).href;
  const out = { requests: [], errors: [], verify: {}, ui: {}, log_vectors: null, control: null, bench: null, codeal_vectors: null, codeal_bench: null, seal_vectors: null, seat_releases: null, page_seats: null, frame_cases: null };
  const record = { onRequest: (u) => out.requests.push(u), onError: (e) => out.errors.push(e) };

  // The page the job's other parts run in: opened when first needed (a job of UI cases alone opens
  // one page per case, not one more that no case uses), and at least once a job.
  let page = null;
  let fresh = null; // what the job's first document of the page held, before any step
  const openPage = async (viewport) => {
    page = await open(pageUrl, { ...record, viewport });
    fresh = JSON.stringify(await page.evaluate(formState));
  };
  const mainPage = async () => (page ?? (await openPage(undefined), page));

  // The verify cases many to a round trip, not one each: the page takes a batch's cases in order
  // until a second has passed (a slow case is never held up behind many), and the rest go next.
  const pending = [...(job.verify ?? [])];
  while (pending.length) {
    const answers = await (await mainPage()).evaluate(verifyCases, batch(pending));
    pending.splice(0, answers.length).forEach((c, i) => (out.verify[c.id] = answers[i]));
  }

  for (const c of job.ui ?? []) {
    // A fresh document for each case, at its screen size: the job's tab navigated to the page again
    // (a new tab costs a renderer process). A reload would keep what a browser restores of a form
    // (Firefox keeps the file chosen, and choosing it again is then no change); a navigation keeps
    // nothing, which `formState` makes sure of.
    if (!page) await openPage(c.viewport);
    else {
      await page.reopen(pageUrl, { viewport: c.viewport });
      const now = JSON.stringify(await page.evaluate(formState));
      if (now !== fresh) throw new Error(`case ${JSON.stringify(c.id)}: the page kept some of the case before: ${now}, not ${fresh}`);
    }
    if (c.key !== undefined) await page.fill("#key", c.key);
    if (c.witnesses) {
      await page.evaluate(() => (document.getElementById("witnesses").closest("details").open = true));
      await page.fill("#witnesses", c.witnesses.join("\n"));
    }
    if (c.threshold !== undefined && c.threshold !== null) await page.fill("#threshold", String(c.threshold));
    if (c.codealer_key !== undefined) {
      await page.evaluate(() => (document.getElementById("codealer-key").closest("details").open = true));
      await page.fill("#codealer-key", c.codealer_key);
    }
    if (c.policy !== undefined || c.policy_file) {
      await page.evaluate(() => (document.getElementById("policy").closest("details").open = true));
      if (c.policy !== undefined) await page.fill("#policy", c.policy);
      if (c.policy_file) {
        await page.setFile("#policy-file", c.policy_file);
        await page.waitFor(() => document.getElementById("policy-file-label").textContent.includes("read as chosen"));
      }
    }
    // The player is back at the top of the page, where the file is chosen or dropped, by a tap on
    // the chooser: the focus leaves the key box fill typed in for it. `focused`: where the focus
    // is as the file comes (a drop's: nowhere, after the chooser had it). With `scroll_to`, the
    // player has scrolled on until that element is at the top of the window.
    const focused = await page.evaluate(([drop, to]) => {
      document.activeElement?.blur();
      window.scrollTo({ top: 0, behavior: "instant" });
      document.getElementById("file").focus();
      if (drop) document.activeElement.blur();
      if (to) window.scrollTo({ top: document.querySelector(to).getBoundingClientRect().top, behavior: "instant" });
      return document.activeElement?.id || null;
    }, [Boolean(c.drop), c.scroll_to ?? null]);
    const initial = await page.evaluate(readAccess);
    if (c.drop) {
      // A real drop event with a real File, as a player's drag and drop makes one.
      const b64 = readFileSync(c.file).toString("base64");
      await page.evaluate(([b64, name, where]) => {
        const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
        const dt = new DataTransfer();
        dt.items.add(new File([bytes], name, { type: "application/json" }));
        document.querySelector(where).dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
      }, [b64, "hand.json", typeof c.drop === "string" ? c.drop : "#drop"]);
    } else {
      await page.setFile("#file", c.file);
    }
    await page.waitFor(() => !document.getElementById("result").hidden);
    if (c.moved) {
      await page.evaluate(({ to, by_player }) => {
        if (by_player) window.dispatchEvent(new WheelEvent("wheel", { deltaY: to }));
        window.scrollTo({ top: to, behavior: "instant" });
      }, c.moved);
    }
    // What a player sees once the page has painted: two frames on, after a scroll made before
    // the first of them and the page's answer to it.
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
    if (c.open_details) await page.evaluate(() => document.querySelectorAll("details").forEach((d) => (d.open = true)));
    const result = { initial, focused, before: await read(page) };
    if (c.edit) {
      const text = await page.evaluate(() => document.getElementById("text").value);
      const at = text.indexOf(c.edit.find);
      result.edit_found = at >= 0;
      const from = Math.max(at, 0);
      // The input events the edit makes, counted (edit_inputs): a player's edit makes one.
      await page.evaluate(() => {
        window.harnessInputs = 0;
        document.getElementById("text").addEventListener("input", () => window.harnessInputs++);
      });
      await page.edit("#text", from, from + c.edit.find.length, c.edit.replace);
      const want = text.slice(0, from) + c.edit.replace + text.slice(from + c.edit.find.length);
      const [now, inputs] = await page.evaluate(() => [document.getElementById("text").value, window.harnessInputs]);
      result.edit_inputs = inputs;
      if (now !== want) throw new Error(`case ${JSON.stringify(c.id)}: the edit left the text box holding ${JSON.stringify(now.slice(0, 200))}...`);
      await page.waitFor(
        (before) => document.getElementById("verdict").textContent !== before || document.getElementById("result").hidden,
        result.before.verdict,
      );
      result.after = await read(page);
    }
    out.ui[c.id] = result;
  }

  page = await mainPage();

  if (job.log_vectors) {
    out.log_vectors = await page.evaluate(runLogVectors, job.log_vectors);
  }

  if (job.codeal_vectors) {
    // docs/vectors/fairdeck-codeal-v1.json through the page's own functions (codeal-cases.mjs's
    // function, its source text run in the page as an expression: the page's policy allows no eval).
    const { vectors } = job.codeal_vectors;
    out.codeal_vectors = await page.evaluate(`(${runCodealVectors.toString()})(${JSON.stringify(vectors)}, window.fairdeck.codeal)`);
  }

  if (job.seal_vectors) {
    // docs/vectors/fairdeck-codeal-seal-v1.json through the page's own seat functions (seal-cases.mjs).
    const { vectors } = job.seal_vectors;
    out.seal_vectors = await page.evaluate(`(${runSealVectors.toString()})(${JSON.stringify(vectors)}, window.fairdeck.codeal)`);
  }

  if (job.seat_release_vectors) {
    // docs/vectors/fairdeck-codeal-seat-releases-v1.json through the page's seatReleases (release-cases.mjs).
    const { vectors } = job.seat_release_vectors;
    out.seat_releases = await page.evaluate(`(${runSeatReleases.toString()})(${JSON.stringify(vectors)}, window.fairdeck.codeal)`);
  }

  if (job.page_seats) {
    // Co-dealt seats played through the page's window.fairdeck.seat, released by its button.
    out.page_seats = await page.evaluate(`(${runPageSeats.toString()})(${JSON.stringify(job.page_seats)}, window)`);
  }

  if (job.frame_cases) {
    // The verifier page in a game page's frame, or in a window the game opened, driven from the game's window with its own arrays.
    const runners = [runSealVectors, runSeatReleases, runCodealVectors].map(String).join(", ");
    out.frame_cases = await page.evaluate(`(${job.frame_cases.popup ? runPopupCases : runFrameCases})(${JSON.stringify(job.frame_cases)}, window, [${runners}])`);
  }

  if (job.codeal_bench) {
    // One co-dealt hand (as the vectors write it), verified `rounds` times after a warm-up: the time
    // of each step of docs/codealing-spec.md section 10, in ms.
    out.codeal_bench = await page.evaluate(({ hand, rounds }) => {
      const api = window.fairdeck.codeal;
      const h = api.codealHandFromVector(hand);
      const run = () => {
        const times = {};
        let t = performance.now();
        const start = t;
        api.verifyCodealHand(h, (step) => {
          const now = performance.now();
          times[step] = now - t;
          t = now;
        });
        times.total = performance.now() - start;
        return times;
      };
      run();
      return Array.from({ length: rounds }, run);
    }, job.codeal_bench);
  }

  if (job.bench) {
    out.bench = await page.evaluate(({ cases, rounds }) => {
      const res = {};
      const inputs = cases.map((c) => [c, Uint8Array.from(atob(c.bytes_b64), (ch) => ch.charCodeAt(0))]);
      for (const [c, bytes] of inputs) {
        window.fairdeck.verifyBytes(bytes, { key: c.key, codealerKey: c.codealer_key }); // warm-up
        res[c.id] = { ok: true, times: [] };
      }
      for (let i = 0; i < rounds; i++) {
        for (const [c, bytes] of inputs) {
          // The cases take turns, so that a slow stretch of the machine falls on both.
          const t0 = performance.now();
          const ok = window.fairdeck.verifyBytes(bytes, { key: c.key, codealerKey: c.codealer_key }).ok;
          res[c.id].times.push(performance.now() - t0);
          res[c.id].ok = res[c.id].ok && ok;
        }
      }
      return res;
    }, job.bench);
  }

  await page.close();

  if (job.control) {
    // The recorder's own check: a page that does make requests must be seen making them.
    const before = out.requests.length;
    const c = await open(pathToFileURL(job.control).href, { ...record, onError: () => {} });
    await c.evaluate(() => new Promise((resolve) => setTimeout(resolve, 500)));
    out.control = out.requests.slice(before);
    out.requests = out.requests.slice(0, before);
    await c.close();
  }

  return out;
}

// Runs inside the page: what a document's form holds (every control's value, file count or check,
// which <details> are open), where its window is scrolled, and whether a verdict is shown.
function formState() {
  return {
    controls: [...document.querySelectorAll("input, textarea, select")].map((el) => [el.id, el.type === "file" ? el.files.length : el.type === "checkbox" ? el.checked : el.value]),
    open: [...document.querySelectorAll("details")].map((d) => d.open),
    scroll: [window.scrollX, window.scrollY],
    result: document.getElementById("result")?.hidden ?? null,
  };
}

// The first of `cases` up to 1 MiB characters of input (at least one, however long).
function batch(cases) {
  let size = 0;
  const n = cases.findIndex((c) => (size += (c.bytes_b64?.length ?? 0) + (c.policy_b64?.length ?? 0)) > 1 << 20);
  return cases.slice(0, Math.max(1, n < 0 ? cases.length : n));
}

// Runs inside the page: each case's bytes through verifyBytes, in order, until a second has passed
// (the first case always).
function verifyCases(cases) {
  const start = performance.now();
  const out = [];
  for (const c of cases) {
    if (out.length && performance.now() - start > 1000) break;
    const bytes = Uint8Array.from(atob(c.bytes_b64), (ch) => ch.charCodeAt(0));
    const policy = c.policy_b64 ? Uint8Array.from(atob(c.policy_b64), (ch) => ch.charCodeAt(0)) : null;
    const r = window.fairdeck.verifyBytes(bytes, { key: c.key, witnesses: c.witnesses ?? [], threshold: c.threshold ?? null, policy, codealerKey: c.codealer_key });
    out.push({
      kind: r.kind,
      ok: r.ok,
      step: r.step,
      detail: r.detail,
      line: window.fairdeck.verdictLine(r),
      input_error: r.inputError,
      signed_by: r.signedBy ?? [],
      checks: Object.fromEntries(r.checks.map((x) => [x.step, x.status])),
      details: Object.fromEntries(r.checks.map((x) => [x.step, x.detail])),
    });
  }
  return out;
}

// What a player sees and what assistive technology gets: each function runs in the page on its own,
// one after the other in one round trip.
function read(page) {
  return page.evaluate(`({ ...(${readPage})(), access: (${readAccess})(), contrast: (${readContrast})(), text_sizes: (${readTextSizes})() })`);
}

// Runs inside the page: the log and witness vectors through the page's own functions.
function runLogVectors({ log: L, witness: W, tlog_proofs: T, policies: P }) {
  const f = window.fairdeck.log;
  const b64 = (s) => Uint8Array.from(atob(s), (ch) => ch.charCodeAt(0));
  const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const enc = (s) => new TextEncoder().encode(s);
  const attempt = (fn) => {
    try {
      fn();
      return true;
    } catch (e) {
      if (e instanceof f.LogError) return false;
      throw e;
    }
  };
  const key = f.parseVerifierKey(L.key.verifier_key);
  const r = { entries: [], invalid_entries: [], inclusion: [], checkpoints: [], receipts: [], cosignatures: [], invalid_cosignatures: [], policies: [], tlog_proofs: [], policy_files: [] };
  // tlog-policy files, as the page reads them: what each holds, what its quorum makes of each set
  // of witnesses asked about, and of each checkpoint note given; or the error naming the line.
  for (const c of P ?? []) {
    const pol = window.fairdeck.policy;
    try {
      const p = pol.parsePolicyFile(b64(c.bytes_b64));
      const wp = pol.witnessPolicyOf(p);
      const notes = (wp ? c.notes ?? [] : []).map((n) => {
        try {
          const res = f.checkPolicy(wp, enc(n));
          return { signed: res.signed, ok: res.ok, describe: f.describePolicy(res) };
        } catch (e) {
          if (!(e instanceof f.LogError)) throw e;
          return { error: e.message };
        }
      });
      r.policy_files.push({
        logs: p.logs.map((k) => k.text),
        witnesses: [...p.witnesses].map(([n, k]) => [n, k.text]),
        quorum: p.quorum ? f.describeQuorum(p.quorum) : null,
        used: wp ? [...wp.witnesses.keys()] : null,
        urls: Object.fromEntries(p.urls),
        met: (c.subsets ?? []).map((s) => (p.quorum ? f.quorumMet(p.quorum, new Set(s)) : true)),
        notes,
      });
    } catch (e) {
      if (!(e instanceof f.LogError)) throw e;
      r.policy_files.push({ error: e.message, policy_error: e instanceof window.fairdeck.policy.PolicyFileError });
    }
  }
  // A name of octets that are not UTF-8 holds lone surrogates, which no browser driver carries
  // intact: each is written as Python's backslashreplace writes it, "\udce9".
  const esc = (v) =>
    typeof v === "string"
      ? v.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, (m) => `\\u${m.charCodeAt(0).toString(16)}`)
      : Array.isArray(v)
        ? v.map(esc)
        : v && typeof v === "object"
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [esc(k), esc(x)]))
          : v;
  r.policy_files = esc(r.policy_files);
  for (const t of T ?? []) {
    try {
      const p = window.fairdeck.tlogproof.parseTlogProof(t.text);
      r.tlog_proofs.push({ index: String(p.index), tree_size: String(p.treeSize), hashes: p.hashes.length, entry: toHex(p.entry) });
    } catch (e) {
      if (!(e instanceof f.LogError)) throw e;
      r.tlog_proofs.push({ error: e.message });
    }
  }
  const entries = L.entries.map((e) => hex(e.entry));
  for (const e of L.entries) {
    const bytes = hex(e.entry);
    let decoded = null;
    const ok = attempt(() => (decoded = f.decodeEntry(bytes)));
    r.entries.push({ name: e.name, ok, leaf_ok: toHex(f.leafHash(bytes)) === e.leaf_hash, type_ok: decoded && decoded.type === e.type });
  }
  for (const e of L.invalid_entries) r.invalid_entries.push({ name: e.name, ok: attempt(() => f.decodeEntry(hex(e.entry))) });
  const roots = Object.fromEntries(L.roots.map((x) => [x.size, hex(x.root)]));
  for (const p of L.inclusion_proofs) {
    const ok = attempt(() =>
      f.verifyInclusion(BigInt(p.index), BigInt(p.tree_size), f.leafHash(entries[p.index]), p.proof.map(hex), roots[p.tree_size]),
    );
    // The same proof with its first hash flipped must fail (where it has one).
    let flipped = null;
    if (p.proof.length) {
      const bad = p.proof.map(hex);
      bad[0][0] ^= 1;
      flipped = attempt(() => f.verifyInclusion(BigInt(p.index), BigInt(p.tree_size), f.leafHash(entries[p.index]), bad, roots[p.tree_size]));
    }
    r.inclusion.push({ index: p.index, tree_size: p.tree_size, ok, flipped });
  }
  for (const c of L.checkpoints) r.checkpoints.push({ name: c.name, ok: attempt(() => f.openCheckpoint(enc(c.note), key)) });
  for (const c of L.receipts) r.receipts.push({ name: c.name, ok: attempt(() => f.verifyReceiptText(enc(c.text), key)) });
  for (const c of W.cosignatures) {
    const v = f.parseVerifierKey(c.vkey, 0x04);
    const note = enc(`${c.checkpoint}\n${c.line.endsWith("\n") ? c.line : c.line + "\n"}`);
    const res = f.checkPolicy({ witnesses: new Map([["w", v]]), threshold: 1 }, note);
    r.cosignatures.push({ name: c.name, ok: res.ok, timestamp: String(res.timestamps.get("w")) });
  }
  for (const c of W.invalid_cosignatures) {
    let ok;
    try {
      const v = f.parseVerifierKey(c.vkey, 0x04);
      ok = f.checkPolicy({ witnesses: new Map([["w", v]]), threshold: 1 }, enc(`${c.checkpoint}\n${c.line.endsWith("\n") ? c.line : c.line + "\n"}`)).ok;
    } catch (e) {
      if (!(e instanceof f.LogError)) throw e;
      ok = false;
    }
    r.invalid_cosignatures.push({ name: c.name, ok });
  }
  for (const p of W.policies) {
    let res;
    try {
      const policy = f.parsePolicy(Object.entries(p.witnesses).map(([n, k]) => `${n}=${k}`), p.threshold);
      const logKey = f.parseVerifierKey(W.log_vkey);
      f.openCheckpoint(enc(p.note), logKey);
      const got = f.checkPolicy(policy, enc(p.note));
      res = { ok: got.ok, signed: got.signed, missing: got.missing };
    } catch (e) {
      if (!(e instanceof f.LogError)) throw e;
      res = { ok: false, error: e.message };
    }
    r.policies.push({ name: p.name, ...res });
  }
  return r;
}

// Runs inside the page: what a player sees, read from the DOM.
function readPage() {
  const $ = (id) => document.getElementById(id);
  const v = $("verdict");
  const rect = v.getBoundingClientRect();
  const key = $("key");
  const root = document.documentElement;
  // Ordinary words (letters only, up to 20) that the layout split over two lines.
  const broken = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (const m of n.data.matchAll(/\S+/g)) {
      if (!/^[\p{L}'’(),.:;!?-]+$/u.test(m[0])) continue;
      for (const w of m[0].matchAll(/\p{L}{2,20}/gu)) {
        const range = document.createRange();
        range.setStart(n, m.index + w.index);
        range.setEnd(n, m.index + w.index + w[0].length);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) broken.push(w[0]);
      }
    }
  }
  const cards = [...document.querySelectorAll("#dealt .card")];
  return {
    ok: v.dataset.ok === "true",
    step: v.dataset.step || null,
    verdict: v.textContent,
    verdict_line: ($("verdict-line") ?? v).textContent,
    verdict_help: $("verdict-help")?.textContent ?? "",
    checks: Object.fromEntries([...document.querySelectorAll("#checks li")].map((li) => [li.dataset.step, li.dataset.status])),
    check_details: Object.fromEntries([...document.querySelectorAll("#checks li")].map((li) => [li.dataset.step, li.querySelector(".detail")?.textContent ?? ""])),
    key_box: $("key").value,
    dealt: cards.map((el) => el.title),
    shown: cards.map((el) => el.textContent),
    cards_verified: cards.map((el) => el.dataset.verified),
    card_style: cards.length ? (({ borderTopStyle, opacity, textDecorationLine }) => ({ borderTopStyle, opacity, textDecorationLine }))(getComputedStyle(cards[0])) : null,
    dealt_title: $("dealt-title").textContent,
    hidden: $("result").hidden,
    font_px: {
      root: parseFloat(getComputedStyle(root).fontSize),
      verdict: parseFloat(getComputedStyle($("verdict-line")).fontSize),
      key: parseFloat(getComputedStyle(key).fontSize),
    },
    hand_warning: $("hand-warning")?.textContent ?? "",
    codeal: $("codeal")
      ? { hidden: $("codeal").hidden, summary: $("codeal-summary").textContent, font_px: parseFloat(getComputedStyle($("codeal-summary")).fontSize) }
      : null,
    // The smallest text drawn in the result: every element drawn that holds text of its own.
    min_result_px: Math.min(
      ...[...$("result").querySelectorAll("*")]
        .filter((el) => el.getClientRects().length && [...el.childNodes].some((n) => n.nodeType === 3 && n.data.trim()))
        .map((el) => parseFloat(getComputedStyle(el).fontSize)),
    ),
    summary: $("hand-summary").textContent,
    layout: {
      scroll_width: root.scrollWidth,
      client_width: root.clientWidth,
      client_height: root.clientHeight,
      scroll_y: window.scrollY,
      verdict_top: rect.top,
      verdict_bottom: rect.bottom,
      key_hidden: Math.max(0, key.scrollHeight - key.clientHeight) + Math.max(0, key.scrollWidth - key.clientWidth),
      broken_words: broken,
    },
  };
}

// Runs inside the page: what assistive technology gets. Every form control's accessible name
// (its labels, aria-labelledby or aria-label; a file input's own "Browse..." is no name), and the
// live regions: a screen reader announces a change only in a region that was rendered before it.
function readAccess() {
  const rendered = (el) => el.getClientRects().length > 0 || getComputedStyle(el).position === "absolute";
  const visible = (el) => {
    for (let e = el; e; e = e.parentElement) if (e.hidden || getComputedStyle(e).display === "none") return false;
    return getComputedStyle(el).visibility !== "hidden" && rendered(el);
  };
  const name = (el) => {
    const by = (el.getAttribute("aria-labelledby") ?? "").split(/\s+/).filter(Boolean);
    const parts = [
      ...[...(el.labels ?? [])].map((l) => l.textContent),
      ...by.map((id) => document.getElementById(id)?.textContent ?? ""),
      el.getAttribute("aria-label") ?? "",
      el.tagName === "BUTTON" ? el.textContent : "",
    ];
    return parts.join(" ").replace(/\s+/g, " ").trim();
  };
  return {
    unnamed: [...document.querySelectorAll("input, textarea, select, button")].filter((el) => !name(el)).map((el) => el.id || el.tagName),
    names: Object.fromEntries([...document.querySelectorAll("input, textarea, select, button")].map((el) => [el.id, name(el)])),
    // Each card drawn, as [its code, its role, the name a screen reader says].
    cards: [...document.querySelectorAll("#dealt .card, #deck .card")].map((el) => [el.title, el.getAttribute("role"), el.getAttribute("aria-label")]),
    live: [...document.querySelectorAll('[role=status], [role=alert], [aria-live]:not([aria-live="off"])')].map((el) => ({
      id: el.id,
      visible: visible(el),
      text: el.textContent,
    })),
  };
}

// Runs inside the page: the contrast of each text that says something about the verdict, against
// what is behind it (WCAG 2.2, 1.4.3: 4.5:1, or 3:1 for large text), in the scheme the page is in.
function readContrast() {
  const parse = (c) => {
    const m = c.match(/[\d.]+/g).map(Number);
    return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 };
  };
  const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a),
    g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a),
    a: 1,
  });
  const probe = document.createElement("div");
  probe.style.background = "Canvas";
  document.body.append(probe);
  const canvas = parse(getComputedStyle(probe).backgroundColor);
  probe.remove();
  const behind = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) layers.push(parse(getComputedStyle(e).backgroundColor));
    return layers.reverse().reduce((under, top) => over(top, under), canvas);
  };
  const lum = ({ r, g, b }) => {
    const f = (v) => ((v /= 255) <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const out = [];
  const selectors = ["#verdict-line", "#verdict-help", "#hand-warning", "#hand-summary", "#checks li .text", "#checks li .detail", "#checks li .mark", "p.lead", ".hint", "#timing", "label"];
  for (const sel of selectors) {
    for (const el of document.querySelectorAll(sel)) {
      if (!el.textContent.trim() || !el.getClientRects().length) continue;
      const style = getComputedStyle(el);
      const bg = behind(el);
      const fg = over(parse(style.color), bg);
      const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
      const ratio = (hi + 0.05) / (lo + 0.05);
      const px = parseFloat(style.fontSize);
      const large = px >= 24 || (px >= 18.66 && Number(style.fontWeight) >= 700);
      out.push({ sel, text: el.textContent.slice(0, 40), ratio: Math.round(ratio * 100) / 100, need: large ? 3 : 4.5, color: style.color });
    }
  }
  return out;
}

// Runs inside the page: the computed font size of every text a player can see, each text node's
// (by its element) and each form control's own; the text read by screen readers alone is left out.
function readTextSizes() {
  const drawn = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden" && !el.closest(".visually-hidden");
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.data.trim() || !el || el.closest("script, style") || !drawn(el)) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    if (![...range.getClientRects()].some((r) => r.width > 0 && r.height > 0)) continue;
    const path = [];
    for (let e = el; e && e !== document.body; e = e.parentElement) path.unshift(e.id ? `${e.tagName.toLowerCase()}#${e.id}` : e.tagName.toLowerCase());
    out.push({ where: path.join(" > "), text: n.data.trim().slice(0, 30), px: parseFloat(getComputedStyle(el).fontSize) });
  }
  for (const el of document.querySelectorAll("input, textarea, button, select")) {
    if (!drawn(el)) continue;
    out.push({ where: el.id ? `${el.tagName.toLowerCase()}#${el.id}` : el.tagName.toLowerCase(), text: "(control)", px: parseFloat(getComputedStyle(el).fontSize) });
  }
  return out;
}
