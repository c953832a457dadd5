"""Numbers read with ``str.isdigit()``, which takes "²" (and other Unicode digits) that ``int()``
refuses: each ended in a ValueError where a bad number should be refused. Here the witness's
--listen port, a Content-Length sent to it, and a witness's Retry-After."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck_server.publishing.cosigning import retry_after_seconds
from tests.support.c2sp_log import MemLog
from tests.support.witnesses import WitnessProcess, init_witness, witness_cli


@pytest.fixture
def witness(tmp_path: Path) -> Iterator[tuple[WitnessProcess, MemLog]]:
    log = MemLog().grow(4)
    init_witness(tmp_path / "w1", "witness.example/w1", log.signer.verifier.to_string())
    process = WitnessProcess(tmp_path / "w1")
    yield process, log
    process.stop()


def test_a_superscript_port_is_refused_in_one_line(tmp_path: Path) -> None:
    init_witness(tmp_path / "w", "witness.example/w", MemLog().signer.verifier.to_string())
    done = witness_cli("serve", "--dir", str(tmp_path / "w"), "--listen", "127.0.0.1:²")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "fairdeck witness serve: --listen '127.0.0.1:²': want HOST:PORT, for example 127.0.0.1:7380"
    )


def test_a_superscript_content_length_is_a_400_and_the_witness_lives(
    witness: tuple[WitnessProcess, MemLog],
) -> None:
    process, log = witness
    with socket.create_connection(("127.0.0.1", process.port), timeout=10) as s:
        s.sendall(
            b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\n\r\n"
        )  # "²" in Latin-1
        assert s.recv(64).startswith(b"HTTP/1.1 400")
    assert process.add_checkpoint(log.body(0))[0] == 200


def test_a_superscript_retry_after_is_no_retry_after() -> None:
    assert retry_after_seconds("²") == 0.0
    assert retry_after_seconds("7") == 7.0
