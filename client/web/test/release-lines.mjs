// The seat device's release lines on every case of docs/vectors/fairdeck-codeal-release-v1.json, on Node:
//
//   node release-lines.mjs VECTORS.json > RESULT.json      (RESULT: case name -> line)
import { readFileSync } from "node:fs";
import { fromHex, toHex, VerificationError } from "../src/spec.js";
import { sealRelease } from "../src/codeal/seat.js";

const vectors = JSON.parse(readFileSync(process.argv[2], "utf8"));
const lines = {};
for (const c of vectors.cases) {
  const seal = vectors.seals[c.seal];
  try {
    const token = sealRelease({
      deck: c.deck,
      handId: c.hand_id,
      position: c.position,
      holder: c.holder,
      sealed: fromHex(seal.sealed),
      secretKey: fromHex(vectors.seats[c.seat]),
    });
    lines[c.name] = `OK: release ${toHex(token)}`;
  } catch (e) {
    if (!(e instanceof VerificationError)) throw e;
    lines[c.name] = `FAILED at step ${e.step}: ${e.detail}`;
  }
}
process.stdout.write(JSON.stringify(lines));
