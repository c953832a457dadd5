// The lines of docs/vectors/fairdeck-codeal-proofs-v1.json (co-dealt hand proofs, format 4) and
// -v2.json (format 5, with the log keys given) on Node,
// through the package's two doors: check (the page's report) and verifyCodealProof.
//
//   node codeal-proofs.mjs VECTORS.json > RESULT.json
//
// RESULT: {name: {check, api}}: the line each gives, "OK: ..." or "FAILED at step ...: ...", as
// `fairdeck verify --codealer-key` prints it.
import { readFileSync } from "node:fs";
import { VerificationError, check, verdictLine, verifyCodealProof } from "../src/index.js";

const vectors = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = {};
for (const c of [...vectors.valid, ...vectors.invalid]) {
  // Format-5 cases (fairdeck-codeal-proofs-v2.json) carry the log keys a player gives.
  const key = c.log_keys === undefined ? undefined : c.log_keys.join("\n");
  const report = check(c.text, { codealerKey: c.codealer_keys.join("\n"), key });
  let api;
  try {
    api = verifyCodealProof(c.text, { codealerKeys: c.codealer_keys, key }).line;
  } catch (e) {
    if (!(e instanceof VerificationError)) throw e;
    api = `FAILED at step ${e.step}: ${e.detail}`;
  }
  out[c.name] = { check: report.inputError ? `INPUT: ${report.inputError}` : verdictLine(report), api };
}
process.stdout.write(JSON.stringify(out));
