"""Every vector of docs/vectors that a player's page can meet, through the page in real headless
Chromium and Firefox: the same verdict, the same failed step and the same words as
`fairdeck verify` (and the step the vector names).

Transcripts (fairdeck-v1.json, valid and invalid), raw texts (fairdeck-v1-texts.json), hand proofs
of format 1 (fairdeck-hand-proofs-v1.json), format 2 (fairdeck-hand-proofs-v2.json) and format 3,
with key rotation statements followed from the keys each case gives (fairdeck-hand-proofs-v3.json), and,
through the page's own log functions, the log's entries, inclusion proofs, checkpoints and
receipts (fairdeck-log-v1.json), single tlog-proof texts (fairdeck-hand-proofs-v2.json, read as
fairdeck.log.tlog_proof reads them, in its words) and the witnesses' cosignatures and policies
(fairdeck-witness-v1.json). Not here: consistency proofs and tiles, which a hand proof never holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import browser
from tests.support.page_vectors import LOG, PROOFS_V2, WITNESS, Key, cases


def tlog_proof_reading(text: str) -> dict[str, Any]:
    """What fairdeck.log.tlog_proof.parse makes of a text: the receipt's numbers, or its error."""
    from fairdeck.core.errors import VerificationError
    from fairdeck.log import tlog_proof

    try:
        r = tlog_proof.parse(text)
    except VerificationError as e:
        return {"error": e.detail}
    return {
        "index": str(r.index),
        "tree_size": str(r.tree_size),
        "hashes": len(r.hashes),
        "entry": r.entry.hex(),
    }


@pytest.fixture(scope="module", params=browser.ENGINES)
def page_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    engine: str = request.param
    browser.require_browser(engine)
    job = {
        "verify": [{"id": i, "bytes_b64": browser.b64(data), "key": key} for i, data, key, _ in cases()],
        "log_vectors": {"log": LOG, "witness": WITNESS, "tlog_proofs": PROOFS_V2["tlog_proofs"]},
    }
    return browser.run_shared(job, tmp_path_factory, engine=engine)


@pytest.mark.parametrize("case", cases(), ids=lambda c: c[0])
def test_the_page_gives_the_verdict_and_step_of_fairdeck_verify(
    page_run: dict[str, Any], case: tuple[str, bytes, Key, str | None], tmp_path: Path
) -> None:
    name, data, key, want = case
    line = browser.python_line(data, tmp_path, key)
    ok, step = browser.python_verdict(data, tmp_path, key)
    assert (ok, step) == (want is None, want), "the vector and fairdeck verify disagree"
    got = page_run["verify"][name]
    assert (got["ok"], got["step"]) == (ok, step), got
    assert got["line"] == line, "the page words the verdict otherwise than fairdeck verify"


def test_the_page_reads_every_log_and_witness_vector(page_run: dict[str, Any]) -> None:
    r = page_run["log_vectors"]
    assert [e["ok"] and e["leaf_ok"] and e["type_ok"] for e in r["entries"]] == [True] * len(LOG["entries"])
    assert not [e["name"] for e in r["invalid_entries"] if e["ok"]], "invalid entries the page accepted"
    assert len(r["invalid_entries"]) == len(LOG["invalid_entries"])
    assert all(p["ok"] for p in r["inclusion"]) and len(r["inclusion"]) == len(LOG["inclusion_proofs"])
    assert all(p["flipped"] is False for p in r["inclusion"] if p["flipped"] is not None)
    assert [c["ok"] for c in r["checkpoints"]] == [c["valid"] for c in LOG["checkpoints"]]
    assert [c["ok"] for c in r["receipts"]] == [c["valid"] for c in LOG["receipts"]]
    assert [(c["ok"], c["timestamp"]) for c in r["cosignatures"]] == [
        (True, str(c["timestamp"])) for c in WITNESS["cosignatures"]
    ]
    assert [c["ok"] for c in r["invalid_cosignatures"]] == [False] * len(WITNESS["invalid_cosignatures"])
    for got, want in zip(r["policies"], WITNESS["policies"], strict=True):
        if "ok" in want:
            assert (got["ok"], got["signed"], got["missing"]) == (
                want["ok"],
                want["signed"],
                want["missing"],
            ), got
        else:  # a known witness's bad cosignature rejects the note
            assert got["ok"] is False and "invalid cosignature" in got["error"], got


def test_the_page_reads_every_tlog_proof_text_as_the_python_reader(page_run: dict[str, Any]) -> None:
    """The format-2 receipts alone: the same numbers from a valid text, the same words for a bad one."""
    got = page_run["log_vectors"]["tlog_proofs"]
    want = [tlog_proof_reading(v["text"]) for v in PROOFS_V2["tlog_proofs"]]
    assert got == want
    assert [("error" in w) for w in want] == [bool(v.get("error")) for v in PROOFS_V2["tlog_proofs"]]


def test_the_page_made_no_request_and_raised_no_error(page_run: dict[str, Any]) -> None:
    assert page_run["requests"] == [] and page_run["errors"] == []
