"""The real console script in a subprocess: startup line, health, reflection,
a SIGTERM drain with calls in flight, and the ``fairdeck`` CLI commands
that talk to or check a dealer."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.client.models import HandState
from fairdeck_server.run.config import ServerConfig
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.forked_serve import ServeForker
from tests.support.speed import scaled

GRACE_SECONDS = ServerConfig().grace_seconds  # what `fairdeck serve` drains with
DEALER = "fairdeck.v1.DealerService"
DRAIN_OK = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}


def fairdeck_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
    )


NO_LIMITS = ("--rate-limit", "0", "--max-open-hands", "0")  # these tests hammer it; limits: tests/policy


@pytest.fixture
def dealer_process(tmp_path: Path, serve_forker: ServeForker) -> Iterator[DealerProcess]:
    process = DealerProcess(tmp_path / "data", tmp_path / "stderr.txt", *NO_LIMITS, forker=serve_forker)
    yield process
    process.terminate()


def test_health_and_reflection(dealer_process: DealerProcess) -> None:
    with grpc.insecure_channel(dealer_process.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", DEALER):
            answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]

        database = ProtoReflectionDescriptorDatabase(channel)
        services = set(database.get_services())
        assert {DEALER, "grpc.health.v1.Health"} <= services
        assert "fairdeck.v1.AuditService" in services
        # The whole contract is discoverable: every method of the service.
        described = DescriptorPool(database).FindServiceByName(DEALER)
        assert {m.name for m in described.methods} == {
            "OpenHand", "AddClientSeeds", "ShuffleHand", "DrawCards", "DealHand",
            "DealNewHand", "DealHands", "CloseHand", "GetHand",
        }  # fmt: skip

    with DealerClient(dealer_process.target, timeout=20) as client:
        hand = client.open_hand("standard")
        client.close_hand(hand.hand_id).verify(commitment=hand.commitment)


@pytest.mark.serial
def test_sigterm_drains_calls_in_flight(tmp_path: Path, serve_forker: ServeForker) -> None:
    data_dir = tmp_path / "data"
    process = DealerProcess(data_dir, tmp_path / "stderr.txt", *NO_LIMITS, forker=serve_forker)
    lock = threading.Lock()
    dealt: dict[str, bytes] = {}  # hand_id -> commitment, every acknowledged DealNewHand / DealHands hand
    closed: dict[str, bytes] = {}  # hand_id -> commitment, every acknowledged CloseHand
    drawn: dict[str, tuple[int, ...]] = {}  # hand_id -> cards of an acknowledged DrawCards
    failures: list[FairdeckError] = []
    unexpected: list[BaseException] = []
    calls_done = threading.Semaphore(0)

    def record(error: BaseException) -> None:
        with lock:
            (failures if isinstance(error, FairdeckError) else unexpected).append(error)

    def deal_new_hands() -> None:
        with DealerClient(process.target, timeout=30) as c:
            while True:
                try:
                    d = c.deal_new_hand("standard", client_seeds=["drain"])
                except BaseException as e:
                    return record(e)
                with lock:
                    dealt[d.hand.hand_id] = d.hand.commitment
                calls_done.release()

    def deal_batches(close: bool) -> None:
        with DealerClient(process.target, timeout=30) as c:
            while True:
                try:
                    # 50 hands a call: a batch is in flight at the SIGTERM all the same, and the
                    # hands acknowledged are a few hundred to read back, not thousands (~3 ms each)
                    for h in c.deal_hands("short", 50, close=close):
                        with lock:
                            dealt[h.hand_id] = h.commitment
                except BaseException as e:
                    return record(e)
                calls_done.release()

    def open_draw_close() -> None:
        with DealerClient(process.target, timeout=30) as c:
            while True:
                try:
                    h = c.open_hand("jokers")
                    cards = tuple(card.id for card in c.draw(h.hand_id, 5).cards)
                    with lock:
                        drawn[h.hand_id] = cards
                    c.close_hand(h.hand_id)
                    with lock:
                        closed[h.hand_id] = h.commitment
                except BaseException as e:
                    return record(e)
                calls_done.release()

    workers = [threading.Thread(target=deal_new_hands) for _ in range(8)]
    workers += [threading.Thread(target=deal_batches, args=(close,)) for close in (True, False, True, False)]
    workers += [threading.Thread(target=open_draw_close) for _ in range(4)]
    for w in workers:
        w.start()
    try:
        # Wait until calls are flowing from every kind of worker, then pull the plug.
        for _ in range(60):
            assert calls_done.acquire(timeout=30), "no call completed"
        with lock:
            assert dealt and closed and not failures and not unexpected, (failures, unexpected)
        sent = time.monotonic()
        process.signal(signal.SIGTERM)
        rc = process.proc.wait(timeout=GRACE_SECONDS + 30)  # a bound on the wait, not the bar
        took = time.monotonic() - sent
    finally:
        process.terminate()
        for w in workers:
            w.join(timeout=60)
    assert not any(w.is_alive() for w in workers)

    assert rc == 0, process.stderr()
    assert took < GRACE_SECONDS + scaled(2.0), f"drain took {took:.1f}s"  # the grace, then the exit's work
    out = process.rest_of_stdout()
    assert out[-1:] == ["fairdeck dealer stopped"], out
    stderr = process.stderr()
    assert "Traceback" not in stderr, stderr

    assert not unexpected, unexpected
    assert len(failures) == len(workers)  # every worker ran until the dealer went away
    for e in failures:
        assert e.code in DRAIN_OK, (e.code, e.reason, str(e))
        assert "Traceback" not in str(e) and ".py" not in str(e)

    # Everything acknowledged is durable: a fresh dealer over the same data dir has it.
    again = DealerProcess(data_dir, tmp_path / "stderr-again.txt", *NO_LIMITS, forker=serve_forker)
    try:
        with DealerClient(again.target, timeout=30) as c:
            for hid, commitment in dealt.items():
                hand = c.get(hid)
                assert hand.commitment == commitment
                assert hand.dealt_count == hand.deck_size
            for hid, cards in drawn.items():
                hand = c.get(hid)
                assert hand.dealt_count >= len(cards)
            for hid, commitment in closed.items():
                hand = c.get(hid)
                assert hand.state is HandState.CLOSED
                hand.verify(commitment=commitment)
                assert hand.transcript is not None
                assert hand.transcript.cards[:5] == drawn[hid]
    finally:
        again.terminate()
    assert again.proc.returncode == 0


def test_fairdeck_verify_accepts_a_real_transcript(dealer_process: DealerProcess, tmp_path: Path) -> None:
    with DealerClient(dealer_process.target, timeout=20) as client:
        opened = client.open_hand("shoe-2")
        client.shuffle(opened.hand_id, ["alice", "Cafe\u0301"])
        client.draw(opened.hand_id, 10)
        transcript = client.close_hand(opened.hand_id).transcript
    assert transcript is not None

    good = tmp_path / "hand.json"
    good.write_text(transcript.to_json())
    result = fairdeck_cli("verify", str(good))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"OK: hand {opened.hand_id} verified (shoe-2, 104 cards, ")

    data: dict[str, Any] = json.loads(transcript.to_json())
    data["cards"][0], data["cards"][1] = data["cards"][1], data["cards"][0]
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(data))
    result = fairdeck_cli("verify", str(bad))
    assert result.returncode == 1
    assert result.stdout.startswith("FAILED at step deck")


def test_fairdeck_deal_prints_a_verified_hand(dealer_process: DealerProcess) -> None:
    result = fairdeck_cli("deal", "--target", dealer_process.target, "--players", "4", "--client-seed", "me")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"^verified: ", out, re.MULTILINE), out
    assert "NOT VERIFIED" not in out and "Traceback" not in out + result.stderr
    hand_id = re.search(r"^hand (\S+) \(standard, ", out, re.MULTILINE)
    assert hand_id, out
    # The hand it printed is a real, closed, verifiable hand of this dealer, with our seed.
    with DealerClient(dealer_process.target, timeout=20) as client:
        hand = client.get(hand_id.group(1))
    assert hand.state is HandState.CLOSED
    assert hand.client_seeds == (b"me",)
    assert hand.dealt_count == 4 * 2 + 3 + 5  # hole cards, three burns, flop, turn, river
    assert hand.commitment.hex() in out
    hand.verify()
