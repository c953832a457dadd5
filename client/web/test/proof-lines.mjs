// The lines of co-dealt hand proofs, format 4 (docs/vectors/fairdeck-codeal-proofs-v1.json) and
// format 5 (-v2.json, with the log keys given), through the package's two doors: check (the page's
// report, the co-dealers' keys given as the text a player pastes) and verifyCodealProof. For
// codeal-proofs.mjs and codeal.test.mjs.
//
// proofLines(vectors, api) -> {name: {check, api}}: the line each gives, "OK: ..." or "FAILED at
// step ...: ...", as `fairdeck verify --codealer-key` prints it; an error that is not a
// VerificationError becomes "THROWN: ..." (no vector's line).
export function proofLines(vectors, { VerificationError, check, verdictLine, verifyCodealProof }) {
  const out = {};
  for (const c of [...vectors.valid, ...vectors.invalid]) {
    // Format-5 cases (fairdeck-codeal-proofs-v2.json) carry the log keys a player gives.
    const key = c.log_keys === undefined ? undefined : c.log_keys.join("\n");
    const report = check(c.text, { codealerKey: c.codealer_keys.join("\n"), key });
    let api;
    try {
      api = verifyCodealProof(c.text, { codealerKeys: c.codealer_keys, key }).line;
    } catch (e) {
      api = e instanceof VerificationError ? `FAILED at step ${e.step}: ${e.detail}` : `THROWN: ${e}`;
    }
    out[c.name] = { check: report.inputError ? `INPUT: ${report.inputError}` : verdictLine(report), api };
  }
  return out;
}
