// The line the package (src/index.js, the page's own code) gives for each case, on Node:
//
//   node lines.mjs JOB.json > RESULT.json
//
// JOB: [{id, bytes_b64, key, witnesses, threshold}]; RESULT: {id: line}, where line is what
// `fairdeck verify` would print ("OK: ..." or "FAILED at step ...: ..."), or "INPUT: why" for a
// key or witness that is not valid. With `signed_by` set, a verified proof's line is followed, as
// `fairdeck verify` prints it, by "  signed by ..." when a key the file's statements led to signed.
import { readFileSync } from "node:fs";
import { check, verdictLine } from "../src/index.js";
import { signedByWords } from "../src/verify.js";

const out = {};
for (const c of JSON.parse(readFileSync(process.argv[2], "utf8"))) {
  const report = check(Buffer.from(c.bytes_b64, "base64"), { key: c.key ?? "", witnesses: c.witnesses ?? [], threshold: c.threshold ?? null });
  const followed = c.signed_by && report.ok && report.signedBy.some((s) => s.from);
  out[c.id] = report.inputError ? `INPUT: ${report.inputError}` : verdictLine(report) + (followed ? `\n  signed by ${signedByWords(report)}` : "");
}
process.stdout.write(JSON.stringify(out));
