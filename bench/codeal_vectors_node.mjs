// The CPU of the co-dealt known-answer vectors on Node, as the tests run them, for two checkouts
// side by side (bench/README.md, "Co-dealt web tests: one batch a hand"):
//
//   node bench/codeal_vectors_node.mjs OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]
//
// Each round runs, for each checkout in turn, every vector of docs/vectors/fairdeck-codeal-v1.json
// through test/codeal-cases.mjs and every proof of -proofs-v1.json (format 4) and -proofs-v2.json
// (format 5) through test/proof-lines.mjs (check and verifyCodealProof), the new checkout's vectors
// and runners for both: process CPU seconds of each, the median of ROUNDS (default 1) after a
// warm-up of the generators, and the lines must be equal. Then each section 10 vector alone, in ms,
// grouped by where it ends (valid, before the equations, at an equation, after them).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [oldTree, newTree, rounds = "1"] = process.argv.slice(2);
const load = (tree, path) => import(pathToFileURL(join(tree, "client/web", path)).href);
const trees = {};
for (const [name, tree] of [["old", oldTree], ["new", newTree]]) {
  trees[name] = { codeal: await load(tree, "src/codeal/index.js"), api: await load(tree, "src/index.js") };
  trees[name].codeal.vectorApi.generators(104);
}
const { runCodealVectors } = await load(newTree, "test/codeal-cases.mjs");
const { proofLines } = await load(newTree, "test/proof-lines.mjs");
const vectors = (name) => JSON.parse(readFileSync(join(newTree, "docs/vectors", name), "utf8"));
const files = {
  "section 10 vectors": [vectors("fairdeck-codeal-v1.json"), (v, t) => runCodealVectors(v, t.codeal.vectorApi)],
  "format 4 proofs": [vectors("fairdeck-codeal-proofs-v1.json"), (v, t) => proofLines(v, t.api)],
  "format 5 proofs": [vectors("fairdeck-codeal-proofs-v2.json"), (v, t) => proofLines(v, t.api)],
};
const cpu = (f) => {
  const t = process.cpuUsage();
  const out = f();
  const u = process.cpuUsage(t);
  return [(u.user + u.system) / 1e6, out];
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const total = { old: 0, new: 0 };
for (const [label, [v, run]] of Object.entries(files)) {
  const times = { old: [], new: [] };
  const lines = {};
  for (let r = 0; r < Number(rounds); r++) {
    for (const name of ["old", "new"]) {
      const [s, out] = cpu(() => run(v, trees[name]));
      times[name].push(s);
      lines[name] = JSON.stringify(out);
    }
  }
  if (lines.old !== lines.new) throw new Error(`${label}: the lines differ`);
  const [o, n] = [median(times.old), median(times.new)];
  total.old += o;
  total.new += n;
  console.log(`${label.padEnd(20)} old ${o.toFixed(2).padStart(7)} s  new ${n.toFixed(2).padStart(7)} s  new/old ${(n / o).toFixed(2)}`);
}
console.log(`${"all".padEnd(20)} old ${total.old.toFixed(2).padStart(7)} s  new ${total.new.toFixed(2).padStart(7)} s  new/old ${(total.new / total.old).toFixed(2)}`);

// Each section 10 vector alone: where the batch of a whole hand saves and where it costs.
const v1 = vectors("fairdeck-codeal-v1.json");
const EQUATIONS = ["shuffle", "share", "seed"];
const groups = {};
const one = (kind, vector) => {
  for (const name of ["old", "new"]) {
    const api = trees[name].codeal.vectorApi;
    const [s, line] = cpu(() => api.codealLine(api.codealHandFromVector(vector)));
    const step = line.startsWith("OK") ? "valid" : /^FAILED at step ([a-z]+)/.exec(line)[1];
    const group = kind ?? (step === "valid" ? "valid" : EQUATIONS.includes(step) ? `fails at ${step}` : ["open"].includes(step) ? "fails at open" : "fails before the equations");
    groups[group] ??= { n: 0, old: 0, new: 0 };
    groups[group][name] += s * 1000;
    if (name === "new") groups[group].n += 1;
  }
};
for (const h of Object.values(v1.hands)) one("valid", h);
for (const c of v1.cases) one(null, editedHand(v1, c));
for (const [group, g] of Object.entries(groups)) {
  console.log(`${group.padEnd(28)} ${String(g.n).padStart(3)} vectors  old ${g.old.toFixed(0).padStart(6)} ms  new ${g.new.toFixed(0).padStart(6)} ms  new/old ${(g.new / g.old).toFixed(2)}`);
}

/** A case's hand, its edits applied as docs/vectors/fairdeck-codeal-v1.json's "format" says. */
function editedHand(v, c) {
  const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const hand = structuredClone(v.hands[c.base]);
  for (const e of c.edits) {
    const f = e.field;
    if (e.op === "set") hand[f] = structuredClone(e.value);
    else if (e.op === "take") hand[f] = e.indices.map((i) => hand[f][i]);
    else if (e.op === "from") hand[f] = structuredClone(v.hands[e.hand][f]);
    else if (e.op === "overwrite" || e.op === "cut") {
      const where = f === "dealt" ? hand.dealt[e.index].shares : hand[f];
      const key = f === "dealt" ? e.share : e.index;
      const data = Array.from(fromHex(where[key]));
      if (e.op === "overwrite") fromHex(e.hex).forEach((b, i) => (data[e.offset + i] = b));
      else data.splice(e.offset, e.length);
      where[key] = toHex(data);
    } else if (e.op === "shares") hand.dealt[e.index].shares = e.indices.map((i) => hand.dealt[e.index].shares[i]);
    else if (e.op === "card") hand.dealt[e.index].card = e.card;
  }
  return hand;
}
