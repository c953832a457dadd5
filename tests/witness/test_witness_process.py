"""``fairdeck witness`` as operators run it: a real process on loopback, real HTTP, a real state file."""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from fairdeck.log.cosignature import CosignatureVerifier, WitnessPolicy, add_cosignatures
from tests.support.c2sp_log import MemLog, body_mutations
from tests.support.witnesses import WitnessProcess, init_witness, witness_cli


@pytest.fixture
def log() -> MemLog:
    return MemLog().grow(12)


@pytest.fixture
def witness(tmp_path: Path, log: MemLog) -> Iterator[WitnessProcess]:
    init_witness(tmp_path / "w1", "witness.example/w1", log.signer.verifier.to_string())
    process = WitnessProcess(tmp_path / "w1")
    yield process
    process.stop()


def test_cosigns_over_http_with_the_spec_codes(witness: WitnessProcess, log: MemLog) -> None:
    status, body = witness.add_checkpoint(log.body(0))
    assert status == 200, body
    policy = WitnessPolicy({"w1": CosignatureVerifier.parse(witness.vkey)}, 1)
    policy.require(add_cosignatures(log.checkpoint(), [body.decode()]))
    log.grow(4)
    status, data, headers = witness.request("POST", "/add-checkpoint", log.body(3))
    assert (status, data, headers["Content-Type"]) == (409, b"12\n", "text/x.tlog.size")
    assert witness.add_checkpoint(log.body(12))[0] == 200
    origin_hash = hashlib.sha256(log.origin.encode()).hexdigest()
    status, note, _ = witness.request("GET", f"/{origin_hash}/checkpoint")
    assert status == 200 and note.split(b"\n")[1] == b"16"
    policy.require(note)
    status, metrics, _ = witness.request("GET", "/metrics")
    assert f'fairdeck_witness_cosigned_size{{origin="{log.origin}"}} 16.0'.encode() in metrics
    assert b'fairdeck_witness_requests_total{code="409"} 1.0' in metrics
    assert witness.request("GET", "/healthz")[:2] == (200, b"SERVING\n")


def test_hostile_http_requests_get_4xx_and_the_witness_lives(witness: WitnessProcess, log: MemLog) -> None:
    # A huge Content-Length is refused on the header, before any byte of the body is read.
    with socket.create_connection(("127.0.0.1", witness.port), timeout=10) as s:
        s.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", witness.port), timeout=10) as s:
        head = b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        s.sendall(head + b"5\r\nhello\r\n0\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 411")
    with socket.create_connection(("127.0.0.1", witness.port), timeout=10) as s:
        s.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 411")
    with socket.create_connection(("127.0.0.1", witness.port), timeout=10) as s:
        s.sendall(b"GARBAGE\r\n\r\n")  # an HTTP/0.9-style line: the answer has no status line
        assert s.recv(64) == b"400 Bad request syntax ('GARBAGE')\n"
    assert witness.request("POST", "/elsewhere", b"x")[0] == 404
    assert witness.request("GET", "/" + "0" * 64 + "/checkpoint")[0] == 404
    assert witness.add_checkpoint(log.body(0))[0] == 200


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(body=body_mutations())
def test_fuzz_over_real_http_never_5xx(shared_witness: WitnessProcess, body: bytes) -> None:
    status, _ = shared_witness.add_checkpoint(body)
    assert status in (200, 400, 403, 404, 409, 422), status


@pytest.fixture(scope="module")
def shared_witness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WitnessProcess]:
    from tests.support.c2sp_log import FUZZ_LOG

    root = tmp_path_factory.mktemp("fuzz-http")
    init_witness(root / "w", "witness.example/fuzz", FUZZ_LOG.signer.verifier.to_string())
    process = WitnessProcess(root / "w")
    yield process
    assert process.request("GET", "/healthz")[0] == 200
    assert process.stop() == 0


def test_rollback_is_refused_after_a_restart(tmp_path: Path, log: MemLog) -> None:
    init_witness(tmp_path / "w", "witness.example/w", log.signer.verifier.to_string())
    first = WitnessProcess(tmp_path / "w")
    log.grow(8)
    assert first.add_checkpoint(log.body(0))[0] == 200  # size 20
    assert first.stop() == 0
    again = WitnessProcess(tmp_path / "w")
    try:
        assert again.add_checkpoint(log.body(0, size=15)) == (409, b"20\n")
        assert again.add_checkpoint(log.body(20, size=15, proof=[]))[0] == 400
        fork = MemLog().grow(19).append(b"forked")
        assert again.add_checkpoint(fork.body(20, proof=[]))[0] == 422
    finally:
        again.stop()


def test_kill_9_mid_stream_never_loses_an_answer_or_cosigns_two_roots(tmp_path: Path, log: MemLog) -> None:
    """Checkpoints stream in; the witness is killed with SIGKILL part way. Every checkpoint it
    answered 200 is on disk after the restart, and it never cosigns another root for a size."""
    init_witness(tmp_path / "w", "witness.example/w", log.signer.verifier.to_string())
    witness = WitnessProcess(tmp_path / "w")
    acked: list[int] = []
    stop = threading.Event()

    def stream() -> None:
        old = 0
        while not stop.is_set():
            log.grow(3)
            try:
                status, _ = witness.add_checkpoint(log.body(old))
            except (OSError, http.client.HTTPException):  # killed mid-answer: IncompleteRead
                return
            if status != 200:
                return
            acked.append(log.size)
            old = log.size

    sender = threading.Thread(target=stream)
    sender.start()
    while len(acked) < 25:
        threading.Event().wait(0.01)
    witness.kill()
    stop.set()
    sender.join(timeout=30)
    last_acked = acked[-1]

    again = WitnessProcess(tmp_path / "w")
    try:
        status, body = again.add_checkpoint(log.body(0, size=1))
        assert status == 409
        stored = int(body)
        # Durable before it answers: an acknowledged size is never lost. The one request in
        # flight at the kill may or may not have landed.
        assert stored in (last_acked, last_acked + 3)
        fork = MemLog().grow(stored - 1).append(b"a fork of the stored size")
        assert again.add_checkpoint(fork.body(stored, proof=[]))[0] == 422
        assert again.add_checkpoint(log.body(stored, size=stored, proof=[]))[0] == 200
    finally:
        again.stop()


# --- refusals: one line, exit 2 -------------------------------------------------------------------


def _one_line_refusal(done, *words: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_serve_refuses_a_missing_dir_key_or_state(tmp_path: Path, log: MemLog) -> None:
    _one_line_refusal(witness_cli("serve", "--dir", str(tmp_path / "nope")), "witness init")
    init_witness(tmp_path / "w", "witness.example/w", log.signer.verifier.to_string())
    os.rename(tmp_path / "w" / "witness.db", tmp_path / "saved.db")
    _one_line_refusal(witness_cli("serve", "--dir", str(tmp_path / "w")), "witness.db", "restore")
    os.rename(tmp_path / "saved.db", tmp_path / "w" / "witness.db")
    os.rename(tmp_path / "w" / "witness.key", tmp_path / "saved.key")
    _one_line_refusal(witness_cli("serve", "--dir", str(tmp_path / "w")), "witness.key", "witness init")
    os.rename(tmp_path / "saved.key", tmp_path / "w" / "witness.key")
    os.chmod(tmp_path / "w" / "witness.key", 0o644)
    _one_line_refusal(witness_cli("serve", "--dir", str(tmp_path / "w")), "witness.key", "chmod 600")


def test_serve_refuses_a_bad_log_list(tmp_path: Path, log: MemLog) -> None:
    init_witness(tmp_path / "w", "witness.example/w")
    _one_line_refusal(witness_cli("serve", "--dir", str(tmp_path / "w")), "logs.conf", "names no log")
    (tmp_path / "w" / "logs.conf").write_text("log not-a-key\n")
    _one_line_refusal(witness_cli("serve", "--dir", str(tmp_path / "w")), "logs.conf:1")
    (tmp_path / "w" / "logs.conf").write_text(f"witness {log.signer.verifier.to_string()}\n")
    _one_line_refusal(witness_cli("serve", "--dir", str(tmp_path / "w")), "logs.conf:1", "log VKEY")


def test_init_never_replaces_a_witness(tmp_path: Path) -> None:
    made = witness_cli("init", "--dir", str(tmp_path / "w"), "--name", "witness.example/w")  # not a copy
    assert made.returncode == 0, made.stderr
    key = (tmp_path / "w" / "witness.key").read_bytes()
    _one_line_refusal(witness_cli("init", "--dir", str(tmp_path / "w"), "--name", "x/y"), "never replaced")
    assert (tmp_path / "w" / "witness.key").read_bytes() == key
    assert oct((tmp_path / "w" / "witness.key").stat().st_mode & 0o777) == "0o600"
    _one_line_refusal(witness_cli("init", "--dir", str(tmp_path / "v"), "--name", "bad name"), "--name")


def test_a_second_witness_on_one_dir_and_a_taken_port_are_refused(witness: WitnessProcess) -> None:
    _one_line_refusal(witness_cli("serve", "--dir", str(witness.directory)), "in use by another witness")
    other = witness.directory.parent / "other"
    init_witness(other, "witness.example/other", MemLog().signer.verifier.to_string())
    _one_line_refusal(
        witness_cli("serve", "--dir", str(other), "--listen", f"127.0.0.1:{witness.port}"), "--listen"
    )


def test_witness_key_prints_the_vkey_and_creates_nothing(tmp_path: Path, witness: WitnessProcess) -> None:
    done = witness_cli("key", "--dir", str(witness.directory))
    assert done.returncode == 0 and done.stdout.strip() == witness.vkey
    _one_line_refusal(witness_cli("key", "--dir", str(tmp_path / "none")), "witness init")
    assert not (tmp_path / "none").exists()
