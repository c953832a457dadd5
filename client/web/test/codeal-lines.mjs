// The co-dealt verifier's lines on every vector of docs/vectors/fairdeck-codeal-v1.json, on Node:
//
//   node codeal-lines.mjs VECTORS.json > RESULT.json
//
// RESULT: what runCodealVectors (codeal-cases.mjs) gives: a line per hand and per case, each
// seal's share or step, whether the points and the derivations match.
import { readFileSync } from "node:fs";
import { vectorApi } from "../src/codeal/index.js";
import { runCodealVectors } from "./codeal-cases.mjs";

process.stdout.write(JSON.stringify(runCodealVectors(JSON.parse(readFileSync(process.argv[2], "utf8")), vectorApi)));
