// The lines of docs/vectors/fairdeck-codeal-proofs-v1.json (co-dealt hand proofs, format 4) and
// -v2.json (format 5, with the log keys given) on Node,
// through the package's two doors: check (the page's report) and verifyCodealProof.
//
//   node codeal-proofs.mjs VECTORS.json > RESULT.json
//
// RESULT: {name: {check, api}}: the line each gives, "OK: ..." or "FAILED at step ...: ...", as
// `fairdeck verify --codealer-key` prints it (proof-lines.mjs).
import { readFileSync } from "node:fs";
import * as api from "../src/index.js";
import { proofLines } from "./proof-lines.mjs";

process.stdout.write(JSON.stringify(proofLines(JSON.parse(readFileSync(process.argv[2], "utf8")), api)));
