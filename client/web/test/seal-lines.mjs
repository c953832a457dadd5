// The seat device's lines on every case of docs/vectors/fairdeck-codeal-seal-v1.json, on Node:
//
//   node seal-lines.mjs VECTORS.json > RESULT.json      (RESULT: case name -> line)
import { readFileSync } from "node:fs";
import { vectorApi } from "../src/codeal/index.js";
import { runSealVectors } from "./seal-cases.mjs";

process.stdout.write(JSON.stringify(runSealVectors(JSON.parse(readFileSync(process.argv[2], "utf8")), vectorApi)));
