"""The ``fairdeck replay`` and ``fairdeck verify`` commands.

The main cases run the real program in a subprocess (``python -m fairdeck.cli``
and the installed ``fairdeck`` console script), so argument parsing, output and
exit status are exercised end to end; the vector sweeps call ``main`` in
process to stay fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from fairdeck.cli import main
from fairdeck.log.note import Signer

ROOT = Path(__file__).resolve().parents[1]
VECTORS = json.loads((ROOT / "docs" / "vectors" / "fairdeck-v1.json").read_text(encoding="ascii"))
BY_NAME = {v["name"]: v for v in VECTORS["valid"]}
FIELDS = ("version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards")
EXAMPLE = BY_NAME["short/worked-example"]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def transcript_of(vector: dict[str, Any]) -> dict[str, Any]:
    """A fresh copy of the vector's transcript fields (tests mutate it)."""
    copy: dict[str, Any] = json.loads(json.dumps({key: vector[key] for key in FIELDS}))
    return copy


def write(tmp_path: Path, data: Any, name: str = "hand.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def replay_args(vector: dict[str, Any]) -> list[str]:
    args = ["replay", "--deck", vector["deck"], "--hand-id", vector["hand_id"]]
    args += ["--server-seed", vector["server_seed"]]
    for seed in vector["client_seeds"]:
        args += ["--client-seed-hex", seed]
    return args


# fairdeck replay


def test_replay_prints_the_worked_example_deck() -> None:
    result = run(
        "replay", "--deck", "short", "--hand-id", "example-1",
        "--server-seed", EXAMPLE["server_seed"], "--client-seed", "alice",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == " ".join(EXAMPLE["cards"]) + "\n"


def test_replay_json() -> None:
    result = run(*replay_args(EXAMPLE), "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out == {
        "version": "fairdeck-v1",
        "deck": "short",
        "hand_id": "example-1",
        "commitment": EXAMPLE["commitment"],
        "server_seed": EXAMPLE["server_seed"],
        "client_seeds": ["616c696365"],
        "cards": EXAMPLE["cards"],
    }


def test_replay_json_is_a_transcript_that_verify_accepts() -> None:
    replayed = run(*replay_args(EXAMPLE), "--json")
    checked = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "verify", "-"], input=replayed.stdout,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("OK: hand example-1 verified")


def test_replay_normalizes_text_client_seeds() -> None:
    vector = BY_NAME["standard/nfc-decomposed"]
    result = run(
        "replay", "--hand-id", vector["hand_id"], "--server-seed", vector["server_seed"],
        "--client-seed", "e\u0301", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["client_seeds"] == ["c3a9"]
    assert out["cards"] == vector["cards"]


def test_replay_keeps_text_and_hex_client_seeds_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    vector = BY_NAME["standard/several-client-seeds"]  # alice, bob, 00ff, carol
    args = ["replay", "--hand-id", vector["hand_id"], "--server-seed", vector["server_seed"], "--json"]
    args += [
        "--client-seed",
        "alice",
        "--client-seed",
        "bob",
        "--client-seed-hex",
        "00ff",
        "--client-seed",
        "carol",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["client_seeds"] == vector["client_seeds"]
    assert out["cards"] == vector["cards"]


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=[v["name"] for v in VECTORS["valid"]])
def test_replay_reproduces_every_valid_vector(
    vector: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(replay_args(vector)) == 0
    assert capsys.readouterr().out.split() == vector["cards"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--server-seed", "00" * 44], "must be 45 bytes, got 44"),
        (["--server-seed", "00" * 45, "--client-seed-hex", ""], "client seed must be 1..256 bytes"),
        (["--server-seed", "00" * 45, "--hand-id", "bad id"], "hand id"),
    ],
)
def test_replay_bad_input_exits_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay", "--hand-id", "h1", *args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fairdeck replay: ")
    assert message in err


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "--hand-id", "h1", "--server-seed", "zz"],
        ["replay", "--hand-id", "h1", "--server-seed", "00" * 45, "--deck", "shoe-9"],
        ["replay", "--server-seed", "00" * 45],
        ["replay", "--hand-id", "h1", "--server-seed", "00" * 45, "--version", "fairdeck-v2"],
    ],
)
def test_replay_usage_errors_exit_2(args: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(args)
    assert caught.value.code == 2


def test_replay_usage_error_from_the_real_program() -> None:
    result = run("replay", "--hand-id", "h1", "--server-seed", "00" * 45, "--deck", "shoe-9")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


# fairdeck verify


def test_verify_good_transcript_exits_0(tmp_path: Path) -> None:
    result = run("verify", str(write(tmp_path, transcript_of(EXAMPLE))))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "OK: hand example-1 verified (short, 36 cards, fairdeck-v1)\n"


def test_verify_reads_standard_input() -> None:
    result = run("verify", "-", stdin=json.dumps(transcript_of(BY_NAME["shoe-8/several-client-seeds"])))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "416 cards" in result.stdout


def test_verify_tampered_transcript_exits_1_with_the_step(tmp_path: Path) -> None:
    data = transcript_of(EXAMPLE)
    data["cards"][0], data["cards"][1] = data["cards"][1], data["cards"][0]
    result = run("verify", str(write(tmp_path, data)))
    assert result.returncode == 1
    assert result.stdout.startswith("FAILED at step deck: ")
    assert "first at position 0" in result.stdout


def test_verify_wrong_commitment_exits_1_with_the_step(tmp_path: Path) -> None:
    data = transcript_of(EXAMPLE)
    data["commitment"] = "00" * 32
    result = run("verify", str(write(tmp_path, data)))
    assert result.returncode == 1
    assert result.stdout.startswith("FAILED at step commitment: ")


def test_verify_text_that_is_not_json_exits_1_as_malformed(tmp_path: Path) -> None:
    path = tmp_path / "junk.json"
    path.write_text("{not json", encoding="utf-8")
    result = run("verify", str(path))
    assert result.returncode == 1
    assert result.stdout.startswith("FAILED at step malformed: ")


def test_verify_unreadable_file_exits_2(tmp_path: Path) -> None:
    result = run("verify", str(tmp_path / "missing.json"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "fairdeck verify: cannot read" in result.stderr


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--policy", "missing.policy"], "cannot read --policy"),
        (["--key", "not a key"], "malformed verifier key"),
        (["--witness", "w1=nonsense"], "fairdeck verify: "),
    ],
    ids=["a policy file that is not there", "a key that is not one", "a witness that is not one"],
)
def test_verify_a_transcript_with_an_unreadable_log_option_exits_2(
    tmp_path: Path, option: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A transcript has no log step; yet a --policy path that is not there (or a key that is not
    one) was silently ignored, and the player took "OK" for a check of the witnesses too."""
    path = write(tmp_path, transcript_of(EXAMPLE))
    args = [a.replace("missing.policy", str(tmp_path / "missing.policy")) for a in option]
    assert main(["verify", str(path), *args]) == 2
    out = capsys.readouterr()
    assert out.out == "" and says in out.err and len(out.err.strip().splitlines()) == 1, out


def test_verify_a_transcript_with_a_good_key_still_verifies(tmp_path: Path) -> None:
    key = Signer.generate("example.com/log").verifier.to_string()
    result = run("verify", str(write(tmp_path, transcript_of(EXAMPLE))), "--key", key)
    assert result.returncode == 0, result.stdout + result.stderr


def test_verify_a_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that cannot be read at all is exit 2; bytes that are not UTF-8 are a
    malformed transcript, exit 1 (tests/core/test_verify.py)."""
    assert main(["verify", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=[v["name"] for v in VECTORS["invalid"]])
def test_verify_rejects_every_invalid_vector_with_its_step(
    vector: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(write(tmp_path, vector["transcript"]))]) == 1
    assert capsys.readouterr().out.startswith(f"FAILED at step {vector['expected_step']}: ")


# The entry point


def test_console_script_entry_point_is_declared() -> None:
    (script,) = entry_points(group="console_scripts", name="fairdeck")
    assert script.value == "fairdeck.cli:main"


def test_installed_console_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("fairdeck")
    if not script.exists():
        found = shutil.which("fairdeck")
        if found is None:
            pytest.skip("the fairdeck console script is not installed")
        script = Path(found)
    result = subprocess.run(
        [str(script), "verify", str(write(tmp_path, transcript_of(EXAMPLE)))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: hand example-1 verified")


def test_a_reader_that_goes_away_gets_no_traceback() -> None:
    """`fairdeck replay ... | head -c1`: the pipe closes before fairdeck writes (regression: a
    BrokenPipeError traceback on stderr)."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "fairdeck.cli", "replay", "--deck", "shoe-8", "--hand-id", "h",
         "--server-seed", "00" * 395, "--client-seed", "x", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first byte is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
