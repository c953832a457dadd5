"""examples/node/game_server.mjs, a game server on @grpc/grpc-js, against a live dealer on
127.0.0.1:0: it deals a hand and verifies it with @fairdeck/verifier, writes a hand proof that
`fairdeck verify` accepts with the same words, waits out a rate limit by its reason, stops on an
unknown deck by its reason, and catches a tampered proof."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.log.note import Signer
from tests.examples import EXAMPLES
from tests.support.dealers import RunningDealer
from tests.web import browser

NODE = EXAMPLES / "node"
SCRIPT = NODE / "game_server.mjs"


@pytest.fixture(scope="module")
def installed() -> None:
    """client/web's packages (the linked @fairdeck/verifier needs them), then the example's."""
    browser.require(browser.npm_ci(browser.WEB) or browser.npm_ci(NODE))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["node", str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def deal(target: str, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run("--target", target, "--key", key, *args)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A dealer that admits 4 calls a second after a burst of 2: a hand takes about ten."""
    running = RunningDealer(tmp_path_factory.mktemp("limited") / "data", rate_limit=4, rate_burst=2)
    target = running.start()
    key = Signer.parse((running.data_dir / "log.key").read_text().strip()).verifier.to_string()
    yield target, key
    running.close()


def test_it_deals_a_hand_and_verifies_it_as_fairdeck_verify_does(
    installed: None, dealer: RunningDealer, key: str, tmp_path: Path
) -> None:
    hand = tmp_path / "hand.json"
    done = deal(dealer.target, key, "--players", "3", "--out", str(hand))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[2:6]] == ["seat 1", "seat 2", "seat 3", "flop"]
    # The proof the Node program wrote is one Python verifies, in the same words.
    assert lines[-1] == browser.python_line(hand.read_bytes(), tmp_path, key)
    assert lines[-1].startswith("OK: hand ") and "(standard, 10 of 52 cards dealt," in lines[-1]
    proof = json.loads(hand.read_text())
    assert proof["transcript"]["hand_id"] in lines[0] and proof["log_key"] == key


def test_it_catches_a_tampered_proof(
    installed: None, dealer: RunningDealer, key: str, tmp_path: Path
) -> None:
    hand = tmp_path / "hand.json"
    assert deal(dealer.target, key, "--out", str(hand)).returncode == 0
    proof = json.loads(hand.read_text())
    seed = proof["transcript"]["server_seed"]
    proof["transcript"]["server_seed"] = ("01" if seed.startswith("00") else "00") + seed[2:]
    hand.write_text(json.dumps(proof))
    done = run("--verify", str(hand), "--key", key)
    assert done.returncode == 1
    assert done.stdout.strip() == browser.python_line(hand.read_bytes(), tmp_path, key)
    assert done.stdout.startswith("FAILED at step commitment: ")


def test_it_waits_out_a_rate_limit_by_its_reason(installed: None, limited: tuple[str, str]) -> None:
    target, key = limited
    done = deal(target, key)
    assert done.returncode == 0, done.stdout + done.stderr
    waits = [line for line in done.stdout.splitlines() if "RATE_LIMITED, waiting" in line]
    assert waits, done.stdout
    assert done.stdout.splitlines()[-1].startswith("OK: hand ")


def test_an_unknown_deck_stops_it_by_its_reason(installed: None, dealer: RunningDealer, key: str) -> None:
    done = deal(dealer.target, key, "--deck", "standard-52")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "UNKNOWN_DECK (field deck)" in done.stderr
    assert 'does not deal deck "standard-52"' in done.stderr


def test_a_missing_key_is_one_line_and_exit_2(installed: None) -> None:
    done = run("--target", "127.0.0.1:1")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--key" in done.stderr
