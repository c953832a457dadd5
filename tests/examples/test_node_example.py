"""examples/node/game_server.mjs, a game server on @grpc/grpc-js, against a live dealer on
127.0.0.1:0: it deals a hand and verifies it with @fairdeck/verifier, writes a hand proof that
`fairdeck verify` accepts with the same words, waits out a rate limit by its reason, stops on an
unknown deck by its reason, and catches a tampered proof."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.cli import main
from fairdeck.log.note import Signer
from tests.examples import EXAMPLES
from tests.support import browser
from tests.support.dealers import RunningDealer

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


def test_what_it_cannot_read_is_one_line_and_exit_2(
    installed: None, dealer: RunningDealer, key: str, tmp_path: Path
) -> None:
    """A proof file that is not there, or a --key that is no log key, ended in a Node stack trace
    (the key only after a whole hand had been dealt, whose proof then could not be checked)."""
    missing = run("--verify", str(tmp_path / "nowhere.json"), "--key", key)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert "nowhere.json" in missing.stderr and "ENOENT" in missing.stderr
    hand = tmp_path / "hand.json"
    assert deal(dealer.target, key, "--out", str(hand)).returncode == 0
    for bad in ("not-a-key", key.replace("+", "+0", 1)):
        done = run("--verify", str(hand), "--key", bad)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--key" in done.stderr, done.stderr
        dealt = deal(dealer.target, bad)
        assert dealt.returncode == 2 and dealt.stderr.count("\n") == 1, dealt.stderr
        assert dealt.stdout == "", "a hand was dealt that could not be checked"


def test_it_never_sends_a_token_in_plain_text_off_loopback(installed: None, key: str) -> None:
    """FAIRDECK_API_TOKEN went to any target over plain text; `fairdeck` refuses that without
    --insecure (docs/security.md)."""
    env = {**os.environ, "FAIRDECK_API_TOKEN": "fd_secret_token"}
    done = subprocess.run(
        ["node", str(SCRIPT), "--target", "192.0.2.1:50051", "--key", key],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "plain text" in done.stderr and "fd_secret_token" not in done.stderr + done.stdout


def test_it_deals_over_tls_with_a_token(installed: None, tmp_path: Path) -> None:
    """A dealer that requires credentials, as one off loopback is: TLS with the operator's CA."""
    from tests.support.pki import Pki

    pki = Pki.make(tmp_path / "pki")
    data = tmp_path / "data"
    assert main(["init", "--data", str(data)]) == 0
    token = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "token", "create", "--data", str(data), "--tenant", "casino",
         "--role", "dealer"], capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip
    running = RunningDealer(data, tls_cert=pki.server_cert, tls_key=pki.server_key, require_auth=True)
    target = running.start()
    try:
        key = Signer.parse((data / "log.key").read_text().strip()).verifier.to_string()
        env = {**os.environ, "FAIRDECK_API_TOKEN": token}
        args = ["node", str(SCRIPT), "--target", target, "--key", key]
        done = subprocess.run(
            [*args, "--ca", str(pki.ca_pem)], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[-1].startswith("OK: hand ")
        plain = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
        assert plain.returncode == 1 and plain.stderr.count("\n") == 1, plain.stderr
    finally:
        running.close()


def test_help_and_a_mistyped_option_are_one_line_not_a_stack_trace(installed: None, key: str) -> None:
    """`--help`, a mistyped option, an option without its value or a stray argument ended in an
    uncaught ERR_PARSE_ARGS_* stack trace from node:util's parseArgs."""
    helped = run("--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: node game_server.mjs"), helped.stderr
    assert "--proto DIR" in helped.stdout and helped.stderr == ""
    for args, named in (
        (["--tagret", "127.0.0.1:1", "--key", key], "'--tagret'"),
        (["--key", key, "--players"], "'--players <value>'"),
        (["--key", key, "hand.json"], "'hand.json'"),
        (["--tls=yes", "--key", key], "'--tls'"),
    ):
        done = run(*args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args, done.stderr)
        assert done.stderr.startswith("game_server: ") and named in done.stderr and "--help" in done.stderr
        assert "ERR_PARSE_ARGS" not in done.stderr and done.stdout == ""


@pytest.fixture
def copied(installed: None, tmp_path: Path) -> Path:
    """The example copied out of the repository, with its installed packages."""
    where = tmp_path / "elsewhere"
    where.mkdir()
    (where / "game_server.mjs").write_bytes(SCRIPT.read_bytes())
    (where / "node_modules").symlink_to(NODE / "node_modules")
    return where / "game_server.mjs"


def test_a_copy_outside_the_repository_says_where_its_protos_are_or_finds_them(
    copied: Path, dealer: RunningDealer, key: str, tmp_path: Path
) -> None:
    """The proto folder was ../../proto from the script: a copy anywhere else crashed with an
    ENOENT stack trace from @grpc/proto-loader once it started to deal."""
    env = {k: v for k, v in os.environ.items() if k != "FAIRDECK_PROTO"}

    def copy(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["node", str(copied), "--target", dealer.target, "--key", key, *args],
            capture_output=True, text=True, timeout=120, env={**env, **extra},
        )  # fmt: skip

    lost = copy()
    assert lost.returncode == 2 and lost.stderr.count("\n") == 1, lost.stderr
    assert "fairdeck/v1/dealer.proto" in lost.stderr and "--proto" in lost.stderr and lost.stdout == ""
    wrong = copy("--proto", str(tmp_path))
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1, wrong.stderr
    assert str(tmp_path) in wrong.stderr and "audit.proto" in wrong.stderr
    proto = str(EXAMPLES.parent / "proto")
    for done in (copy("--proto", proto), copy(FAIRDECK_PROTO=proto)):
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[-1].startswith("OK: hand ")


def test_an_out_file_it_cannot_write_stops_it_before_the_deal(
    installed: None, dealer: RunningDealer, key: str
) -> None:
    """`--out` in a folder that is not there dealt a whole hand, then ended in an ENOENT stack
    trace: the proof was lost."""
    done = deal(dealer.target, key, "--out", "/nonexistent/hand.json")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--out /nonexistent/hand.json" in done.stderr and done.stdout == ""


def test_a_device_a_fifo_or_a_bad_target_is_one_line_not_a_hang_or_a_stack_trace(
    installed: None, key: str, tmp_path: Path
) -> None:
    """`--verify /dev/zero`, `--key @/dev/zero` and `--ca /dev/zero` read without end (a FIFO
    hung too), and `--target ""` ended in grpc-js's "Could not parse target name" stack trace."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args, named in (
        (["--verify", "/dev/zero", "--key", key], "the hand proof /dev/zero"),
        (["--verify", str(fifo), "--key", key], f"the hand proof {fifo}"),
        (["--key", "@/dev/zero"], "the key file /dev/zero"),
        (["--key", key, "--ca", str(fifo), "--target", "127.0.0.1:1"], f"the CA file {fifo}"),
        (["--key", key, "--target", ""], '--target ""'),
    ):
        done = subprocess.run(["node", str(SCRIPT), *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args, done.stderr)
        assert named in done.stderr and done.stdout == "", (args, done.stderr)


def test_it_verifies_a_proof_of_format_3_from_the_key_before_a_rotation(
    installed: None, tmp_path: Path
) -> None:
    """@fairdeck/verifier follows a hand proof's key rotation statements, as `fairdeck verify` does."""
    vectors = json.loads((EXAMPLES.parent / "docs" / "vectors" / "fairdeck-hand-proofs-v3.json").read_text())
    hand = tmp_path / "hand.json"
    for case in [*vectors["valid"][:1], *[c for c in vectors["invalid"] if c["step"] == "rotations"][:2]]:
        hand.write_text(case["text"], encoding="utf-8")
        keys = [vectors["keys"][name] for name in case["keys"]]
        done = run("--verify", str(hand), "--key", keys[0])
        assert done.stdout.strip() == browser.python_line(hand.read_bytes(), tmp_path, keys), case["name"]
        assert done.returncode == (1 if "step" in case else 0), (case["name"], done.stderr)


def test_after_a_rotation_it_writes_a_proof_the_old_key_checks(installed: None, tmp_path: Path) -> None:
    """The game server wrote format 1 only: after `fairdeck rotate-key log`, a hand it dealt failed
    under the old key at step checkpoint, here and in `fairdeck verify`. Its proof now carries the
    rotation statement (format 3, handProofText's keyRotations)."""
    data = tmp_path / "data"
    running = RunningDealer(data, rate_limit=0)
    try:
        running.start()
        old = Signer.parse((data / "log.key").read_text().splitlines()[0].strip()).verifier.to_string()
        running.stop()
        assert main(["rotate-key", "log", "--data", str(data)]) == 0
        target = running.start()
        hand = tmp_path / "hand.json"
        done = deal(target, old, "--out", str(hand))
    finally:
        running.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(hand.read_text())["format"] == 3
    assert done.stdout.splitlines()[-1] == browser.python_line(hand.read_bytes(), tmp_path, old)
    assert done.stdout.splitlines()[-1].startswith("OK: hand ")
