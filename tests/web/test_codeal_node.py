"""docs/codealing-spec.md read a second time, in JavaScript: client/web/test/codeal_vectors.mjs
verifies every co-dealt vector with @noble/curves (the page's library) from the spec's formulas,
and must reach the vectors' own answer on every hand and every case, step for step."""

from __future__ import annotations

import json
import subprocess

from tests.web import browser

VECTORS = browser.ROOT / "docs" / "vectors" / "fairdeck-codeal-v1.json"


def test_an_independent_javascript_verifier_agrees_with_every_codeal_vector() -> None:
    browser.require(browser.node_missing())
    done = subprocess.run(
        ["node", str(browser.WEB / "test" / "codeal_vectors.mjs"), str(VECTORS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    vectors = json.loads(VECTORS.read_text())
    assert {name: h["step"] for name, h in got["hands"].items()} == dict.fromkeys(vectors["hands"])
    assert got["cases"] == {c["name"]: c["step"] for c in vectors["cases"]}
