"""The dealer as a tlog-witness client (fairdeck_server.publishing.cosigning), held to tlog-witness v1.0.0 and
to the public witness network's budget, through a recording proxy (tests/support/witness_proxy.py) in
front of a real witness:

- each request is a POST to <prefix>/add-checkpoint whose body is the text's (old size line with
  no leading zero, at most 63 base64 proof lines, none from size 0, an empty line, a checkpoint
  with no extension line), over keep-alive connections;
- at most one request per ``--witness-interval`` per witness, however fast checkpoints come;
- a 429 or 503 with Retry-After (seconds or an HTTP-date) is honoured;
- cosignature lines by keys the dealer does not know are ignored, never stored.
"""

from __future__ import annotations

import base64
import email.utils
import itertools
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.log.checkpoint import Checkpoint, open_checkpoint
from fairdeck.log.cosignature import Cosigner
from fairdeck.log.note import Verifier
from fairdeck.v1 import audit_pb2, audit_pb2_grpc
from fairdeck_server.publishing.cosigning import MAX_RETRY_AFTER_S, retry_after_seconds
from tests.support.dealers import RunningDealer
from tests.support.waits import outlast, pace
from tests.support.witness_proxy import Answer, Proxy, Seen
from tests.support.witnesses import WitnessProcess, init_log, init_witness

OLD = re.compile(rb"old (0|[1-9][0-9]*)\n")
FOREIGN = Cosigner.from_seed("stranger.example/w9", bytes([9]) * 32)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, str, WitnessProcess]]:
    vkey = init_log(tmp_path / "data")
    init_witness(tmp_path / "w1", "witness.test/w1", vkey)
    witness = WitnessProcess(tmp_path / "w1")
    yield tmp_path / "data", vkey, witness
    witness.stop()


HAND_EVERY_S = 0.01
"""A hand every 10 ms or so: the log grows between any two checkpoints (one every 20 ms) and so
between any two requests to the witness, without a client dealing flat out for seconds (the CPU
that took was the slowest part of these tests on a shared machine, and tested nothing here)."""


def dealing(target: str, seconds: float) -> int:
    """Deal and close hands for ``seconds``, one every ``HAND_EVERY_S``; how many."""
    end, n = time.monotonic() + seconds, 0
    with DealerClient(target) as dealer:
        while time.monotonic() < end:
            dealer.close_hand(dealer.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id)
            n += 1
            pace(HAND_EVERY_S)
    return n


def run(
    data: Path,
    witness: WitnessProcess,
    script: Callable[[Seen, Callable[[], Answer]], Answer] | None,
    seconds: float,
    interval: float,
    first_late: float = 0.0,
) -> tuple[Proxy, bytes]:
    proxy = Proxy(witness.port, first_late=first_late)
    if script is not None:
        proxy.script = script
    dealer = RunningDealer(
        data,
        witnesses=(f"{proxy.url}={witness.vkey}",),
        witness_interval=interval,
        checkpoint_interval=0.02,
        rate_limit=0,
    )
    dealer.start()
    try:
        dealing(dealer.target, seconds)
        outlast(interval * 1.5)  # the witness interval: its last round
        with grpc.insecure_channel(dealer.target) as channel:
            note = audit_pb2_grpc.AuditServiceStub(channel).GetCheckpoint(audit_pb2.GetCheckpointRequest())
    finally:
        dealer.close()
        proxy.close()
    return proxy, bytes(note.signed_checkpoint)


@pytest.mark.parametrize("first_late", [0.0, 0.3])
def test_requests_are_the_texts_and_come_at_most_once_an_interval(
    setup: tuple[Path, str, WitnessProcess], first_late: float
) -> None:
    """At most once an interval as the witness sees them. The interval counted from when a request
    was begun let the second arrive early when the first was slow to arrive (its proof, its TCP
    connect, the path): 0.46 s apart for 0.5 s under load. Counted from its answer, no load or
    slow path can bring two closer (not serial: a busy machine only spaces them more)."""
    data, vkey, witness = setup
    interval = 0.5
    proxy, final = run(data, witness, None, 4.0, interval, first_late)
    posts = proxy.posts()
    assert len(posts) >= 4
    for earlier, later in itertools.pairwise(posts):
        assert later.at - earlier.at >= interval * 0.95, "two requests inside one interval"
    log = Verifier.parse(vkey)
    for seen in posts:
        assert (seen.method, seen.path) == ("POST", "/add-checkpoint")
        m = OLD.match(seen.body)
        assert m, seen.body[:40]
        head, _, note = seen.body.partition(b"\n\n")
        proof = head.split(b"\n")[1:]
        assert len(proof) <= 63
        assert all(len(base64.b64decode(line, validate=True)) == 32 for line in proof)
        if m.group(1) == b"0":
            assert proof == [], "a proof from size 0 must be empty"
        checkpoint = open_checkpoint(note, log, log.name)
        assert checkpoint.extensions == (), "checkpoints carry no extension lines"
        assert note.decode().split("\n\n")[0].count("\n") == 2  # origin, size, root
    # One keep-alive connection carried the requests (tlog-witness: clients SHOULD use keep-alive).
    assert len({s.connection for s in posts}) < len(posts)
    assert "witness.test/w1" in final.decode()


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("form", ["seconds", "date"])
def test_retry_after_is_honoured(setup: tuple[Path, str, WitnessProcess], status: int, form: str) -> None:
    data, _, witness = setup
    wait = 2
    told: list[float] = []

    def busy_once(seen: Seen, forward: Callable[[], Answer]) -> Answer:
        if told:
            return forward()
        told.append(seen.at)
        value = (
            str(wait) if form == "seconds" else email.utils.formatdate(time.time() + wait + 1, usegmt=True)
        )
        return status, {"Retry-After": value, "Content-Type": "text/plain"}, b"busy\n"

    proxy, final = run(data, witness, busy_once, 1.0 + wait, interval=0.2)
    posts = proxy.posts()
    assert posts[0].answer == status and len(posts) >= 2
    assert posts[1].at - posts[0].at >= wait * 0.95, "asked again before the witness's Retry-After"
    assert "witness.test/w1" in final.decode()


def test_cosignatures_by_unknown_keys_are_ignored(setup: tuple[Path, str, WitnessProcess]) -> None:
    """tlog-witness: "The client MUST ignore any cosignatures from unknown keys"."""

    def with_a_stranger(seen: Seen, forward: Callable[[], Answer]) -> Answer:
        status, headers, body = forward()
        if status == 200:
            text = seen.body.partition(b"\n\n")[2].decode().split("\n\n")[0] + "\n"
            body = FOREIGN.cosign(text, 1_700_000_000).encode() + body
        return status, headers, body

    _, final = run(data=setup[0], witness=setup[2], script=with_a_stranger, seconds=1.5, interval=0.2)
    assert "witness.test/w1" in final.decode()
    assert "stranger.example" not in final.decode()


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (None, 0.0),
        ("", 0.0),
        ("3", 3.0),
        ("  7 ", 7.0),
        ("soon", 0.0),
        ("-1", 0.0),
        ("99999", MAX_RETRY_AFTER_S),
    ],
)
def test_retry_after_values(value: str | None, want: float) -> None:
    assert retry_after_seconds(value) == want


def test_retry_after_as_an_http_date() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds(email.utils.formatdate(now + 30, usegmt=True), now=now) == 30.0
    assert retry_after_seconds(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0


def test_checkpoints_are_three_lines(setup: tuple[Path, str, WitnessProcess]) -> None:
    """tlog-checkpoint allows extension lines; the public witness network's logs carry none."""
    data, vkey, _ = setup
    dealer = RunningDealer(data, rate_limit=0)
    dealer.start()
    try:
        dealing(dealer.target, 0.3)
        with grpc.insecure_channel(dealer.target) as channel:
            note = audit_pb2_grpc.AuditServiceStub(channel).GetCheckpoint(audit_pb2.GetCheckpointRequest())
    finally:
        dealer.close()
    cp = open_checkpoint(note.signed_checkpoint, Verifier.parse(vkey), Verifier.parse(vkey).name)
    assert cp == Checkpoint(cp.origin, cp.size, cp.root) and cp.extensions == ()
