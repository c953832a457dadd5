"""Local files a user names on the command line (a key file, a witness policy, a PEM): a device,
a FIFO, a directory, a file too large or not UTF-8 is one line naming the option and exit status 2,
never a read without end (fairdeck.client.local_files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairdeck.client.local_files import MAX_BYTES, LocalFileError, read_local

ROOT = Path(__file__).resolve().parents[2]
PROOFS = json.loads((ROOT / "docs" / "vectors" / "fairdeck-hand-proofs-v1.json").read_text())
KEY: str = PROOFS["log_key"]


@pytest.fixture
def odd(tmp_path: Path) -> dict[str, str]:
    """Files a user may name by mistake."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.txt"
    with big.open("wb") as f:  # sparse: no disk is used
        f.truncate(MAX_BYTES + 1)
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    return {
        "/dev/zero": "/dev/zero",
        "a FIFO": str(fifo),
        "a directory": str(tmp_path),
        "too large": str(big),
        "not UTF-8": str(binary),
    }


def fairdeck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args], capture_output=True, text=True, timeout=30
    )


def test_a_key_file_that_is_dev_zero_or_a_fifo_is_refused_not_read_forever(
    odd: dict[str, str], tmp_path: Path
) -> None:
    """`--key @/dev/zero` (or a FIFO) read without end, and `--policy /dev/zero` too; a directory
    said "[Errno 21] Is a directory" without naming the option."""
    proof = tmp_path / "hand.json"
    proof.write_text(PROOFS["valid"][0]["text"], encoding="utf-8")
    for what, path in odd.items():
        if what == "not UTF-8":
            continue
        for args, named in (
            (["verify", str(proof), "--key", f"@{path}"], f"@{path}"),
            (["verify", str(proof), "--key", KEY, "--policy", path], f"--policy {path}"),
            (["hand", "get", "h", "--target", "127.0.0.1:1", "--key", KEY, "--ca", path], f"CA file {path}"),
            (["health", "--target", "127.0.0.1:1", "--ca", path], f"--ca {path}"),
        ):
            done = fairdeck(*args)
            assert done.returncode == 2 and done.stderr.count("\n") == 1, (what, args, done.stderr)
            assert named in done.stderr and "Traceback" not in done.stderr, (what, done.stderr)
    done = fairdeck("verify", str(proof), "--key", f"@{odd['not UTF-8']}")
    assert done.returncode == 2 and "not UTF-8 text" in done.stderr, done.stderr


def test_read_local_reads_a_regular_file_whole_and_nothing_else(odd: dict[str, str], tmp_path: Path) -> None:
    ok = tmp_path / "keys.txt"
    ok.write_bytes(b"x" * MAX_BYTES)
    assert read_local(ok) == b"x" * MAX_BYTES
    for what in ("/dev/zero", "a FIFO", "a directory", "too large"):
        with pytest.raises(LocalFileError):
            read_local(odd[what])
    with pytest.raises(FileNotFoundError):
        read_local(tmp_path / "nowhere")


def test_deal_refuses_an_out_it_cannot_write_before_it_deals(tmp_path: Path) -> None:
    """`fairdeck deal --out` into a folder that is not there dealt and closed a whole hand first,
    then said it could not write the proof. Nothing listens on the target here: the old order
    failed at the connection (exit 1), the new one refuses the file first (exit 2)."""
    for out, said in ((tmp_path / "nowhere" / "hand.json", "no such directory"), (tmp_path, "a directory")):
        done = fairdeck("deal", "--target", "127.0.0.1:1", "--timeout", "5", "--out", str(out))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"cannot write --out {out}: " in done.stderr and said in done.stderr, done.stderr


def test_verify_of_a_fifo_or_a_device_is_refused_not_waited_on(odd: dict[str, str], tmp_path: Path) -> None:
    """`fairdeck verify FIFO` waited at the open for a writer that never came, and `verify
    /dev/zero` blamed the bytes it read ("FAILED at step malformed", exit 1) on a file that is no
    transcript. Either is now one line naming the file, exit 2; a regular file too large is still
    a finding about its bytes, and - still reads a pipe."""
    for what in ("a FIFO", "/dev/zero", "a directory"):
        done = fairdeck("verify", odd[what], "--key", KEY)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (what, done.stderr)
        assert f"cannot read {odd[what]}: " in done.stderr and done.stdout == "", (what, done.stderr)
    done = fairdeck("verify", odd["too large"], "--key", KEY)
    assert done.returncode == 1 and done.stdout.startswith("FAILED at step malformed: "), done.stdout
    piped = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "verify", "-", "--key", KEY],
        input=PROOFS["valid"][0]["text"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert piped.returncode == 0 and piped.stdout.startswith("OK: "), piped.stdout + piped.stderr


def test_audit_tiles_with_a_fifo_or_a_device_in_the_directory_is_refused_not_waited_on(
    tmp_path: Path,
) -> None:
    """`fairdeck audit --tiles DIR` opened DIR/checkpoint (and every tile) blocking: a FIFO planted
    there hung the auditor at the open. Now it is one line naming the file, exit 2."""
    for what in ("a FIFO", "/dev/zero"):
        tiles = tmp_path / what.replace("/", "_")
        tiles.mkdir()
        if what == "a FIFO":
            os.mkfifo(tiles / "checkpoint")
        else:
            (tiles / "checkpoint").symlink_to("/dev/zero")
        done = fairdeck("audit", "--tiles", str(tiles), "--key", KEY)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (what, done.stderr)
        assert f"{tiles / 'checkpoint'}" in done.stderr and "regular file" in done.stderr, (what, done.stderr)


def test_deal_refuses_an_out_whose_name_is_too_long_in_one_line(tmp_path: Path) -> None:
    """`fairdeck deal --out` with a file name longer than the system allows ended in an OSError
    traceback (ENAMETOOLONG) from the check that the file can be written."""
    out = tmp_path / ("x" * 300)
    done = fairdeck("deal", "--target", "127.0.0.1:1", "--timeout", "5", "--out", str(out))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot write --out {out}: File name too long" in done.stderr, done.stderr


def test_an_argument_that_is_not_utf8_is_one_line_not_a_traceback() -> None:
    """`fairdeck deal --target` or `--token` given bytes that are not UTF-8 ended in a
    UnicodeEncodeError traceback where the text was sent on."""
    for option in ("--target", "--token"):
        argv = [sys.executable.encode(), b"-m", b"fairdeck.cli", b"deal", b"--timeout", b"2", option.encode()]
        argv += [b"\xff" if option == "--target" else b"tok\xff"]
        if option == "--token":
            argv += [b"--target", b"127.0.0.1:1", b"--insecure"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (option, done.stderr)
        assert "not UTF-8" in done.stderr and "Traceback" not in done.stderr, (option, done.stderr)
