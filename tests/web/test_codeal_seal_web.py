"""The JavaScript seat (client/web/src/codeal/seat.js) against the Python reference on every case of
docs/vectors/fairdeck-codeal-seal-v1.json: the same line (verdict, step and words) on Node and
inside the page in headless Chromium and Firefox, for the device's check of the co-dealers' seal
statements (docs/codealing-spec.md 9.2) and what follows it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import browser, node_runs
from tests.support.codeal_seal_vectors import SEAL_VECTORS, device_line, flipped_seal_cases


def python_lines() -> dict[str, str]:
    return {c["name"]: device_line(c) for c in SEAL_VECTORS["cases"]}


def test_node_gives_the_python_line_on_every_seal_vector(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The lines of client/web's own test runner, which computes them once a session."""
    got = node_runs.package_run(tmp_path_factory).lines("seals")
    assert got == python_lines() == {c["name"]: c["line"] for c in SEAL_VECTORS["cases"]}


def test_node_refuses_a_statement_naming_another_key_in_the_words_of_the_spec(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The case the check exists for, each co-dealer of a three-holder hand in turn."""
    got = node_runs.package_run(tmp_path_factory).lines("seals")
    assert got["sealed to the house's key, the genuine statement relayed"] == (
        "FAILED at step seal: position 0 was sealed by co-dealer 1 to another key: "
        "the dealer may have read this card"
    )
    assert got["three holders, co-dealer 2 sealed to the house's key"].startswith(
        "FAILED at step seal: position 1 was sealed by co-dealer 2 to another key"
    )


@pytest.mark.parametrize("engine", browser.ENGINES)
def test_the_page_gives_the_python_line_on_every_seal_vector(
    engine: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    browser.require_browser(engine)
    tmp = tmp_path_factory.mktemp(f"seal-{engine}")
    result: dict[str, Any] = browser.run(
        {"seal_vectors": {"vectors": SEAL_VECTORS}}, tmp, engine=engine, timeout=600
    )
    assert result["seal_vectors"] == python_lines()
    assert result["requests"] == [] and result["errors"] == []


def test_node_gives_the_python_line_on_a_flipped_bit_anywhere(tmp_path: Path) -> None:
    """Beyond the vectors: a bit flipped anywhere in a statement or a sealed share is refused by
    the JavaScript at the reference's step and in its words."""
    browser.require(browser.node_missing())
    cases = flipped_seal_cases(60, seed=36)
    path = tmp_path / "flips.json"
    path.write_text(json.dumps({**SEAL_VECTORS, "cases": cases}), encoding="utf-8")
    done = subprocess.run(
        ["node", "test/seal-lines.mjs", str(path)],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {c["name"]: device_line(c) for c in cases}
