// Drive the verifier page in real headless Chromium (Playwright), for tests/web and bench/.
//
//   node harness.mjs JOB.json > RESULT.json
//
// JOB: { page, chromium, verify: [{id, bytes_b64, key, witnesses, threshold}],
//        ui: [{id, file, key, drop, edit: {find, replace}}], log_vectors: {log, witness} | null,
//        control: PATH | null, bench: {cases: [{id, bytes_b64, key}], rounds} | null }
// Every request the browser makes is recorded; any but the page itself is refused.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const job = JSON.parse(readFileSync(process.argv[2], "utf8"));
const pageUrl = pathToFileURL(job.page).href;
const browser = await chromium.launch({
  executablePath: job.chromium,
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
const out = { requests: [], refused: [], errors: [], verify: {}, ui: {}, log_vectors: null, control: null, bench: null };

async function open(url, record = true) {
  const context = await browser.newContext({ serviceWorkers: "block" });
  await context.route("**/*", (route) => {
    const u = route.request().url();
    if (u === url) return route.continue();
    out.refused.push(u);
    return route.abort("blockedbyclient");
  });
  const page = await context.newPage();
  if (record) {
    page.on("request", (r) => out.requests.push(r.url()));
    page.on("pageerror", (e) => out.errors.push(String(e)));
    page.on("console", (m) => {
      if (m.type() === "error") out.errors.push(`console: ${m.text()}`);
    });
  }
  await page.goto(url);
  return { context, page };
}

const { context, page } = await open(pageUrl);

for (const c of job.verify ?? []) {
  out.verify[c.id] = await page.evaluate((c) => {
    const bytes = Uint8Array.from(atob(c.bytes_b64), (ch) => ch.charCodeAt(0));
    const r = window.fairdeck.verifyBytes(bytes, { key: c.key, witnesses: c.witnesses ?? [], threshold: c.threshold ?? null });
    return { kind: r.kind, ok: r.ok, step: r.step, detail: r.detail, input_error: r.inputError, checks: Object.fromEntries(r.checks.map((x) => [x.step, x.status])) };
  }, c);
}

for (const c of job.ui ?? []) {
  await page.reload();
  if (c.key !== undefined) await page.fill("#key", c.key);
  if (c.drop) {
    // A real drop event with a real File, as a player's drag and drop makes one.
    const b64 = readFileSync(c.file).toString("base64");
    await page.evaluate(([b64, name]) => {
      const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], name, { type: "application/json" }));
      document.getElementById("drop").dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, [b64, "hand.json"]);
  } else {
    await page.setInputFiles("#file", c.file);
  }
  await page.waitForFunction(() => !document.getElementById("result").hidden);
  const read = () =>
    page.evaluate(() => {
      const v = document.getElementById("verdict");
      return {
        ok: v.dataset.ok === "true",
        step: v.dataset.step || null,
        verdict: v.textContent,
        checks: Object.fromEntries([...document.querySelectorAll("#checks li")].map((li) => [li.dataset.step, li.dataset.status])),
        dealt: [...document.querySelectorAll("#dealt .card")].map((el) => el.title),
        shown: [...document.querySelectorAll("#dealt .card")].map((el) => el.textContent),
        summary: document.getElementById("hand-summary").textContent,
      };
    });
  const result = { before: await read() };
  if (c.edit) {
    const text = await page.inputValue("#text");
    const at = text.indexOf(c.edit.find);
    result.edit_found = at >= 0;
    await page.fill("#text", text.slice(0, at) + c.edit.replace + text.slice(at + c.edit.find.length));
    await page.waitForFunction((before) => document.getElementById("verdict").textContent !== before, result.before.verdict);
    result.after = await read();
  }
  out.ui[c.id] = result;
}

if (job.log_vectors) {
  out.log_vectors = await page.evaluate(runLogVectors, job.log_vectors);
}

if (job.bench) {
  out.bench = await page.evaluate(({ cases, rounds }) => {
    const res = {};
    const inputs = cases.map((c) => [c, Uint8Array.from(atob(c.bytes_b64), (ch) => ch.charCodeAt(0))]);
    for (const [c, bytes] of inputs) {
      window.fairdeck.verifyBytes(bytes, { key: c.key }); // warm-up
      res[c.id] = { ok: true, times: [] };
    }
    for (let i = 0; i < rounds; i++) {
      for (const [c, bytes] of inputs) {
        // The cases take turns, so that a slow stretch of the machine falls on both.
        const t0 = performance.now();
        const ok = window.fairdeck.verifyBytes(bytes, { key: c.key }).ok;
        res[c.id].times.push(performance.now() - t0);
        res[c.id].ok = res[c.id].ok && ok;
      }
    }
    return res;
  }, job.bench);
}

await context.close();

if (job.control) {
  // The recorder's own check: a page that does make a request must be seen making it.
  const before = out.refused.length;
  const c = await open(pathToFileURL(job.control).href, false);
  await c.page.waitForTimeout(500);
  out.control = out.refused.slice(before);
  out.refused = out.refused.slice(0, before);
  await c.context.close();
}

await browser.close();
process.stdout.write(JSON.stringify(out));

// Runs inside the page: the log and witness vectors through the page's own functions.
function runLogVectors({ log: L, witness: W }) {
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
  const r = { entries: [], invalid_entries: [], inclusion: [], checkpoints: [], receipts: [], cosignatures: [], invalid_cosignatures: [], policies: [] };
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
