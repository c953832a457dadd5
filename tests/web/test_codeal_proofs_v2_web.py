"""Format 5, the co-dealt hand proof with its log receipts and seal statements, in @fairdeck/verifier
and the page: on every vector of docs/vectors/fairdeck-codeal-proofs-v2.json, Node.js, Chromium and
Firefox give the line ``fairdeck verify --codealer-key K --key L`` prints, word for word."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.support import browser
from tests.support.codeal_proof_vectors import CASES_V2 as CASES

VECTORS_FILE = browser.VECTORS / "fairdeck-codeal-proofs-v2.json"


def test_node_gives_fairdeck_verifys_line_on_every_format_5_vector() -> None:
    browser.require(browser.node_missing())
    done = subprocess.run(
        ["node", "test/codeal-proofs.mjs", str(VECTORS_FILE)],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    for case in CASES:
        assert got[case["name"]] == {"check": case["line"], "api": case["line"]}, case["name"]


@pytest.fixture(scope="module", params=browser.ENGINES)
def page_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    engine: str = request.param
    browser.require_browser(engine)
    tmp = tmp_path_factory.mktemp(f"codeal-proofs-v2-{engine}")
    verify = [
        {
            "id": c["name"],
            "bytes_b64": browser.b64(c["text"].encode()),
            "codealer_key": "\n".join(c["codealer_keys"]),
            "key": "\n".join(c["log_keys"]),
        }
        for c in CASES
    ]
    return browser.run({"verify": verify, "ui": []}, tmp, engine=engine, timeout=600)


def test_the_page_gives_fairdeck_verifys_line_on_every_format_5_vector(page_run: dict[str, Any]) -> None:
    for case in CASES:
        got = page_run["verify"][case["name"]]
        assert got["line"] == case["line"], case["name"]
        assert got["kind"] == ("hand-proof" if case.get("step") == "format" else "codeal-proof"), case["name"]
        assert (got["ok"], got["step"]) == ("step" not in case, case.get("step")), case["name"]
