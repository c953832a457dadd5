"""The auditor blames the dealer only on evidence: its own files (the checkpoint saved with
``--since``, a ``--key @FILE``, a ``--policy`` file) that cannot be read or used are exit 2, named,
in one line, and say nothing about the log; a damaged saved checkpoint is never overwritten."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from fairdeck.log.note import Signer
from tests.support.logs import (
    LONG_LIFETIME,
    BuiltLog,
    CliResult,
    fairdeck,
    read_checkpoints,
    sign_tree,
    verifier_key,
)


def audit(data: Path, *extra: str, key: str) -> CliResult:
    return fairdeck("audit", "--data", str(data), "--key", key, "--max-hand-lifetime", LONG_LIFETIME, *extra)


def _flip_signature(note: bytes) -> bytes:
    text, _, sig_line = note.rstrip(b"\n").rpartition(b"\n")
    head, _, sig64 = sig_line.rpartition(b" ")
    raw = bytearray(base64.b64decode(sig64))
    raw[-1] ^= 1
    return text + b"\n" + head + b" " + base64.b64encode(bytes(raw)) + b"\n"


def _other_log(note: bytes) -> bytes:
    return sign_tree(Signer.generate("other.example/log"), 1, b"\x00" * 32)


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda note: b"",
    "cut": lambda note: note[: len(note) // 2],
    "cut in the signature": lambda note: note[:-20],
    "not a checkpoint": lambda note: b"hello\n\n\xe2\x80\x94 x AAAAAAAA\n",
    "a flipped bit": _flip_signature,
    "another log's": _other_log,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_since_file_is_exit_2_naming_it_not_a_bad_log(
    damage: str, built_log: BuiltLog, tmp_path: Path
) -> None:
    """An empty or cut --since file was reported as "BAD log: saved checkpoint (--since) does not
    verify", exit 1: the auditor's own file blamed on the dealer."""
    key = verifier_key(built_log.data_dir)
    saved = tmp_path / "saved.checkpoint"
    saved.write_bytes(DAMAGE[damage](read_checkpoints(built_log.data_dir)[-1][2]))
    before = saved.read_bytes()
    result = audit(built_log.data_dir, "--since", str(saved), key=key)
    assert result.rc == 2, result.out + result.err
    assert "BAD" not in result.out and "FAILED" not in result.out
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fairdeck audit: cannot use --since {saved}: "), (
        result.err
    )
    assert saved.read_bytes() == before


def test_a_good_since_file_still_audits(built_log: BuiltLog, tmp_path: Path) -> None:
    saved = tmp_path / "saved.checkpoint"
    saved.write_bytes(read_checkpoints(built_log.data_dir)[3][2])
    result = audit(built_log.data_dir, "--since", str(saved), key=verifier_key(built_log.data_dir))
    assert result.rc == 0, result.err
    assert "the log only grew" in result.out


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "holds no verifier key"),
        (b"# only a comment\n", "holds no verifier key"),
        (b"\x7fELF\x02\x01\x01\x00\xd0\xff", "is not UTF-8 text"),
        (b"fairdeck.log/abc+0000", "line 1: malformed verifier key"),
    ],
)
def test_a_key_file_that_holds_no_key_is_named(
    content: bytes, says: str, built_log: BuiltLog, tmp_path: Path
) -> None:
    """A binary --key @FILE ended in a UnicodeDecodeError traceback; an empty one said "no
    verifier key given" without naming the file."""
    path = tmp_path / "keys.txt"
    path.write_bytes(content)
    result = audit(built_log.data_dir, key=f"@{path}")
    assert result.rc == 2
    assert result.err.startswith(f"fairdeck audit: bad --key: @{path} {says}"), result.err
    assert "\n" not in result.err.strip()


def test_a_policy_file_that_cannot_be_used_is_named(built_log: BuiltLog, tmp_path: Path) -> None:
    path = tmp_path / "policy"
    path.write_bytes(b"\x7fELF")
    result = audit(built_log.data_dir, "--policy", str(path), key=verifier_key(built_log.data_dir))
    assert result.rc == 2
    assert result.err.startswith(f"fairdeck audit: bad --policy or --witness: --policy {path}: "), result.err


NOT_REGULAR = "a device, a FIFO or a socket"


def test_a_since_fifo_or_a_key_device_is_refused_not_read(built_log: BuiltLog, tmp_path: Path) -> None:
    """--since naming a FIFO hung the audit (open() waits for a writer) and --key @/dev/zero read
    until memory ran out."""
    fifo = tmp_path / "saved.fifo"
    os.mkfifo(fifo)
    key = verifier_key(built_log.data_dir)
    done: list[CliResult] = []
    auditing = threading.Thread(
        target=lambda: done.append(audit(built_log.data_dir, "--since", str(fifo), key=key))
    )
    auditing.daemon = True
    auditing.start()
    auditing.join(timeout=60)  # a bound, not a wait: it returns at once, or hangs for ever
    assert not auditing.is_alive(), "the audit hangs on a --since FIFO"
    assert (
        done[0].rc == 2
        and done[0].err
        == f"fairdeck audit: cannot read --since {fifo}: it is not a regular file ({NOT_REGULAR})\n"
    )
    device = audit(built_log.data_dir, key="@/dev/zero")
    assert (
        device.rc == 2
        and device.err
        == f"fairdeck audit: bad --key: cannot read @/dev/zero: it is not a regular file ({NOT_REGULAR})\n"
    )
