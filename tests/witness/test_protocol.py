"""add-checkpoint (c2sp.org/tlog-witness) answered in process: every status code the text names.

The witness's state is a real SQLite file; a second WitnessState on the same file is a restart.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.cosignature import Cosigner, WitnessPolicy, add_cosignatures, parse_line
from fairdeck.log.note import open_note
from fairdeck_server.witness.protocol import MAX_BODY_BYTES, MAX_PROOF_LINES, Witness
from fairdeck_server.witness.state import WitnessState
from tests.support.c2sp_log import FUZZ_LOG, MemLog, body_mutations

COSIGNER = Cosigner.from_seed("witness.example/w1", bytes([1]) * 32)


@pytest.fixture
def log() -> MemLog:
    return MemLog().grow(10)


def make_witness(path: Path, log: MemLog, now: float = 1_700_000_000.0) -> Witness:
    return Witness(COSIGNER, {log.origin: [log.signer.verifier]}, WitnessState(path), clock=lambda: now)


@pytest.fixture
def witness(tmp_path: Path, log: MemLog) -> Witness:
    return make_witness(tmp_path / "w.db", log)


def _cosigned(log: MemLog, size: int, answer_body: bytes) -> None:
    note = add_cosignatures(log.checkpoint(size), [answer_body.decode()])
    WitnessPolicy({"w1": COSIGNER.verifier}, 1).require(note)


def test_first_checkpoint_from_zero_is_cosigned(witness: Witness, log: MemLog) -> None:
    answer = witness.add_checkpoint(log.body(0))
    assert answer.status == 200, answer.body
    assert answer.body.startswith("— witness.example/w1 ".encode()) and answer.body.endswith(b"\n")
    _cosigned(log, 10, answer.body)


def test_growth_with_a_proof_is_cosigned(witness: Witness, log: MemLog) -> None:
    assert witness.add_checkpoint(log.body(0)).status == 200
    log.grow(7)
    answer = witness.add_checkpoint(log.body(10))
    assert answer.status == 200, answer.body
    _cosigned(log, 17, answer.body)
    assert witness.state.latest(log.origin).size == 17  # type: ignore[union-attr]


def test_stale_old_size_is_409_with_the_size(witness: Witness, log: MemLog) -> None:
    assert witness.add_checkpoint(log.body(0)).status == 200
    log.grow(3)
    answer = witness.add_checkpoint(log.body(5))
    assert (answer.status, answer.body, answer.content_type) == (409, b"10\n", "text/x.tlog.size")


def test_rollback_is_refused_and_stays_refused_after_a_restart(tmp_path: Path, log: MemLog) -> None:
    first = make_witness(tmp_path / "w.db", log)
    log.grow(10)
    assert first.add_checkpoint(log.body(0)).status == 200  # size 20
    # A smaller checkpoint: from the old size the witness holds it is a 400; from 0, a 409.
    assert first.add_checkpoint(log.body(20, size=15, proof=[])).status == 400
    assert first.add_checkpoint(log.body(0, size=15)).status == 409
    first.state.close()
    again = make_witness(tmp_path / "w.db", log)
    assert again.add_checkpoint(log.body(0, size=15)).status == 409
    assert again.add_checkpoint(log.body(20, size=15, proof=[])).status == 400
    assert again.state.latest(log.origin).size == 20  # type: ignore[union-attr]


def test_a_fork_of_the_same_size_is_422(witness: Witness, log: MemLog) -> None:
    assert witness.add_checkpoint(log.body(0)).status == 200
    fork = MemLog().grow(9).append(b"a different tenth entry")
    answer = witness.add_checkpoint(fork.body(10, proof=[]))
    assert answer.status == 422, answer.body
    assert witness.state.latest(log.origin).root == log.root(10)  # type: ignore[union-attr]


def test_a_forked_extension_is_422(witness: Witness, log: MemLog) -> None:
    assert witness.add_checkpoint(log.body(0)).status == 200
    fork = MemLog().grow(9).append(b"other").grow(5)
    assert witness.add_checkpoint(fork.body(10)).status == 422
    log.grow(5)
    assert witness.add_checkpoint(log.body(10)).status == 200


def test_proof_rules_from_zero_and_for_size_zero(witness: Witness, log: MemLog) -> None:
    assert witness.add_checkpoint(log.body(0, proof=[bytes(32)])).status == 422
    empty = MemLog()
    assert witness.add_checkpoint(empty.body(0)).status == 200
    bad_empty = sign_checkpoint(Checkpoint(log.origin, 0, bytes(32)), log.signer)
    assert witness.add_checkpoint(b"old 0\n\n" + bad_empty).status == 422


def test_wrong_proof_is_422(witness: Witness, log: MemLog) -> None:
    assert witness.add_checkpoint(log.body(0)).status == 200
    log.grow(6)
    proof = log.proof(10)
    proof[0] = bytes(32)
    assert witness.add_checkpoint(log.body(10, proof=proof)).status == 422
    assert witness.add_checkpoint(log.body(10, proof=log.proof(10)[:-1])).status == 422


def test_unknown_origin_is_404_and_bad_signatures_403(witness: Witness, log: MemLog) -> None:
    other = MemLog(origin="other.example/log").grow(3)
    assert witness.add_checkpoint(other.body(0)).status == 404
    impostor = MemLog(seed=bytes([5]) * 32).grow(10)  # the right origin, another key
    assert witness.add_checkpoint(impostor.body(0)).status == 403
    forged = bytearray(log.body(0))
    forged[-10] ^= 1  # a byte of the log's signature
    assert witness.add_checkpoint(bytes(forged)).status in (400, 403)
    tampered = log.body(0).replace(b"\n10\n", b"\n11\n")
    assert witness.add_checkpoint(tampered).status == 403


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"old 01\n\nx",
        b"old -1\n\n",
        b"old 5",
        b"OLD 0\n\n",
        b"old 0\nnot base64!\n\nexample.com/log\n",
        b"old 0\n" + base64.b64encode(bytes(31)) + b"\n\n",
        b"old 0\n" + (base64.b64encode(bytes(32)) + b"\n") * (MAX_PROOF_LINES + 1) + b"\n",
        b"old 0\n",
        b"old 0\n\n\xff\xfe\n",
        b"old 0\n\nexample.com/log\n",
        b"old 0\n\n" + b"x" * (MAX_BODY_BYTES + 1),
        b"old 99999999999999999999999\n\n",
    ],
)
def test_malformed_bodies_are_400(witness: Witness, body: bytes) -> None:
    assert witness.add_checkpoint(body).status == 400


def test_old_size_above_the_checkpoint_is_400(witness: Witness, log: MemLog) -> None:
    assert witness.add_checkpoint(log.body(11, proof=[])).status == 400


def test_the_monitor_checkpoint_carries_the_log_signature_and_ours(witness: Witness, log: MemLog) -> None:
    import hashlib

    assert witness.checkpoint_for(hashlib.sha256(log.origin.encode()).hexdigest()).status == 404
    extra = Cosigner.from_seed("someone.else/w9", bytes([9]) * 32)
    body = log.body(0)
    sent = add_cosignatures(
        log.checkpoint(), [extra.cosign(open_note(log.checkpoint(), log.signer.verifier).text, 5)]
    )
    body = body[: body.index(b"\n\n") + 2] + sent
    assert witness.add_checkpoint(body).status == 200
    got = witness.checkpoint_for(hashlib.sha256(log.origin.encode()).hexdigest())
    assert got.status == 200
    note = got.body
    assert open_note(note, log.signer.verifier).text.startswith(log.origin)
    WitnessPolicy({"w1": COSIGNER.verifier}, 1).require(note)
    assert b"someone.else" not in note  # only what the witness verified and signed


# --- fuzz ----------------------------------------------------------------------------------------


@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(body=body_mutations())
def test_fuzz_add_checkpoint_never_5xx_and_never_rolls_back(
    tmp_path_factory: pytest.TempPathFactory, body: bytes
) -> None:
    witness = _fuzz_witness(tmp_path_factory)
    before = witness.state.latest(FUZZ_LOG.origin)
    answer = witness.add_checkpoint(body)
    assert answer.status in (200, 400, 403, 404, 409, 422), answer
    after = witness.state.latest(FUZZ_LOG.origin)
    if answer.status != 200:
        assert after == before
    else:
        assert after is not None and (before is None or after.size >= before.size)
        assert after.root == FUZZ_LOG.root(after.size)  # only the real tree is ever cosigned


_FUZZ_WITNESS: list[Witness] = []


def _fuzz_witness(factory: pytest.TempPathFactory) -> Witness:
    if not _FUZZ_WITNESS:
        path = factory.mktemp("fuzz") / "w.db"
        _FUZZ_WITNESS.append(
            Witness(
                COSIGNER,
                {FUZZ_LOG.origin: [FUZZ_LOG.signer.verifier]},
                WitnessState(path),
                clock=lambda: 1.0,
            )
        )
    return _FUZZ_WITNESS[0]


def test_a_bad_signature_by_a_trusted_key_is_403(witness: Witness, log: MemLog) -> None:
    """tlog-witness (C2SP main, after v1.0.0): 403 when "a signature line's key name and ID match a
    trusted key but the signature itself fails to verify"; v1.0.0's "none verify" gives 403 too."""
    body = log.body(0)
    head, _, line = body.rpartition("\u2014 ".encode())
    name, _, sig64 = line.rstrip(b"\n").partition(b" ")
    raw = bytearray(base64.b64decode(sig64))
    raw[-1] ^= 1  # canonical base64 still: only the signature is wrong
    forged = head + "\u2014 ".encode() + name + b" " + base64.b64encode(bytes(raw)) + b"\n"
    assert witness.add_checkpoint(forged).status == 403


def test_extension_lines_are_in_the_cosigned_message(witness: Witness, log: MemLog) -> None:
    """tlog-cosignature v1.0.0: extension lines "if present MUST be included in the cosigned message"."""
    cp = Checkpoint(log.origin, log.size, log.root(), ("an extension line",))
    note = sign_checkpoint(cp, log.signer)
    answer = witness.add_checkpoint(b"old 0\n\n" + note)
    assert answer.status == 200
    cosig = parse_line(answer.body.decode(), COSIGNER.verifier)
    assert COSIGNER.verifier.verify(cp.to_text(), cosig.timestamp, cosig.signature)
    assert not COSIGNER.verifier.verify(
        Checkpoint(log.origin, log.size, log.root()).to_text(), cosig.timestamp, cosig.signature
    )


def test_the_cosignature_timestamp_is_never_zero(tmp_path: Path, log: MemLog) -> None:
    """tlog-witness (C2SP main): "the timestamp MUST NOT be zero", even with a clock at the epoch."""
    witness = make_witness(tmp_path / "w.db", log, now=0.0)
    answer = witness.add_checkpoint(log.body(0))
    assert answer.status == 200
    assert parse_line(answer.body.decode(), COSIGNER.verifier).timestamp == 1


def test_the_answer_is_signature_lines_only(witness: Witness, log: MemLog) -> None:
    """tlog-witness: the 200 body is "one or more note signature lines, each starting with the
    — character (U+2014) and ending with a newline character (U+000A)"."""
    body = witness.add_checkpoint(log.body(0)).body.decode()
    assert body.endswith("\n")
    assert all(line.startswith("\u2014 ") for line in body.removesuffix("\n").split("\n"))
