// The co-dealt hand proofs' verify time on Node, for two checkouts side by side (bench/README.md,
// "Co-dealt proofs on Node: short batch terms through wNAF"):
//
//   node bench/codeal_verify_node.mjs OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]
//
// For each valid case of docs/vectors/fairdeck-codeal-proofs-v1.json and -v2.json (formats 4 and
// 5), verifyCodealProof of each checkout's client/web, alternately, after one warm-up: the median
// CPU milliseconds of ROUNDS (default 5) runs each, and the lines must be equal.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [oldTree, newTree, rounds = "5"] = process.argv.slice(2);
const load = async (tree) => import(pathToFileURL(join(tree, "client/web/src/index.js")).href);
const trees = { old: await load(oldTree), new: await load(newTree) };
const cpuMs = (f) => {
  const t = process.cpuUsage();
  const line = f();
  const u = process.cpuUsage(t);
  return [(u.user + u.system) / 1000, line];
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const file of ["fairdeck-codeal-proofs-v1.json", "fairdeck-codeal-proofs-v2.json"]) {
  const vectors = JSON.parse(readFileSync(join(newTree, "docs/vectors", file), "utf8"));
  for (const c of vectors.valid) {
    const key = c.log_keys === undefined ? undefined : c.log_keys.join("\n");
    const times = { old: [], new: [] };
    const lines = {};
    for (let r = 0; r <= Number(rounds); r++) {
      for (const name of ["old", "new"]) {
        const [ms, line] = cpuMs(() => trees[name].verifyCodealProof(c.text, { codealerKeys: c.codealer_keys, key }).line);
        if (r > 0) times[name].push(ms);
        lines[name] = line;
      }
    }
    if (lines.old !== lines.new) throw new Error(`${c.name}: ${lines.old} != ${lines.new}`);
    const [o, n] = [median(times.old), median(times.new)];
    console.log(`${file.slice(23, 25)} ${c.name.padEnd(48)} old ${o.toFixed(0).padStart(5)} ms  new ${n.toFixed(0).padStart(5)} ms  new/old ${(n / o).toFixed(2)}`);
  }
}
