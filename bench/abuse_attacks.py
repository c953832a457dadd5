"""The other tenant's side of bench/abuse_bench.py: what each row of the table does, and the victim.

Each attack runs in its own process (``abuse_bench.py attack NAME``), as one tenant with its own
token, until its time is up, keeping its pressure constant (a stream that ends, or is refused, is
started again after its RetryInfo delay; a connection the dealer closes is opened again), and
prints one JSON line: how its calls ended, and the CPU it used. The victim (``abuse_bench.py
victim``) is another tenant calling DealNewHand every ``pause`` seconds, as a game table does.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import errno
import os
import random
import resource
import secrets
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/support/rawh2.py

from loadgen import percentile  # noqa: E402

from fairdeck.v1 import dealer_pb2 as pb  # noqa: E402
from fairdeck.v1 import dealer_pb2_grpc  # noqa: E402

OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
OWN = [*OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
"""A connection of the channel's own (gRPC shares one between channels to one target otherwise)."""
CODE_NAMES = {c.value[0]: c.name for c in grpc.StatusCode}
SOURCE = "127.0.0.2"
"""The client address of the connections attack (the others share 127.0.0.1 with the victim)."""


def auth(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


def code_of(error: BaseException) -> str:
    code = error.code() if isinstance(error, grpc.RpcError) and hasattr(error, "code") else None
    return code.name if code is not None else type(error).__name__


class Tally:
    """Thread-safe counts of how calls ended, and the attack's deadline."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.codes: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def running(self) -> bool:
        return time.monotonic() < self.end

    def count(self, code: str, n: int = 1) -> None:
        with self._lock:
            self.codes[code] += n


def threads(n: int, work: Callable[[], None]) -> None:
    ts = [threading.Thread(target=work, daemon=True) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


# -- the victim ------------------------------------------------------------------------------------


def victim(opts: argparse.Namespace) -> dict[str, Any]:
    """DealNewHand every ``pause`` seconds for ``seconds``; each hand closed outside the timing
    (a table closes its hands; left open they would reach the victim's own cap)."""
    latencies: list[float] = []
    codes: collections.Counter[str] = collections.Counter()
    started: list[float] = []
    with grpc.insecure_channel(opts.target, options=OWN) as channel:
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        request = pb.DealNewHandRequest(deck="standard")
        metadata = auth(opts.token)
        stub.DealNewHand(request, metadata=metadata, timeout=30)  # connected and warm
        end = time.monotonic() + opts.seconds
        t0 = time.monotonic()
        ids: list[str] = []
        while time.monotonic() < end:
            ids.append(f"victim-{os.getpid()}-{len(ids)}")  # its access line in the dealer's log
            start = time.perf_counter()
            hand_id = None
            try:
                call_metadata = (*metadata, ("x-request-id", ids[-1]))
                hand_id = stub.DealNewHand(request, metadata=call_metadata, timeout=30).hand.hand_id
                codes["OK"] += 1
            except grpc.RpcError as e:
                codes[code_of(e)] += 1
            latencies.append((time.perf_counter() - start) * 1000)
            started.append(time.monotonic() - t0)
            if hand_id is not None:
                try:
                    stub.CloseHand(pb.CloseHandRequest(hand_id=hand_id), metadata=metadata, timeout=30)
                except grpc.RpcError as e:
                    codes["close " + code_of(e)] += 1
            time.sleep(opts.pause)
    ordered = sorted(latencies)
    worst = sorted(range(len(latencies)), key=lambda i: latencies[i])[-5:]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu_cores": (usage.ru_utime + usage.ru_stime) / max(opts.seconds, 1e-9),
        "calls": len(ordered),
        "codes": dict(codes),
        "p50_ms": percentile(ordered, 50),
        "p99_ms": percentile(ordered, 99),
        "max_ms": ordered[-1] if ordered else float("nan"),
        "mean_ms": statistics.fmean(ordered) if ordered else float("nan"),
        "worst": [(round(started[i], 2), round(latencies[i], 1)) for i in worst],
        "by_request_id": dict(zip(ids, (round(x, 3) for x in latencies), strict=True)),
    }


# -- the attacks -------------------------------------------------------------------------------------


def unread_streams(own_connections: bool) -> Callable[[argparse.Namespace, Tally], None]:
    """50 DealHands calls of 100,000 hands that are never read (half close=true, half false),
    each started again when it ends; on one connection, or each on a connection of its own
    (then the connection's flow-control window no longer bounds them together)."""

    def attack(opts: argparse.Namespace, tally: Tally) -> None:
        channels = [grpc.insecure_channel(opts.target, options=OWN if own_connections else OPTIONS)]
        if own_connections:
            channels += [grpc.insecure_channel(opts.target, options=OWN) for _ in range(49)]
        stubs = [dealer_pb2_grpc.DealerServiceStub(c) for c in channels]
        calls: list[Any] = [None] * 50
        while tally.running():
            for i, call in enumerate(calls):
                if call is not None and call.running():
                    continue
                if call is not None:
                    tally.count(call.code().name)
                request = pb.DealHandsRequest(deck="standard", hand_count=100_000, close=i % 2 == 0)
                stub = stubs[i % len(stubs)]
                calls[i] = stub.DealHands(request, metadata=auth(opts.token))  # started, never read
            time.sleep(1.0)
        for call in calls:
            if call is not None and call.running():
                tally.count("still open (cancelled by us)")
                call.cancel()
        for c in channels:
            c.close()

    return attack


def readers(n: int) -> Callable[[argparse.Namespace, Tally], None]:
    """``n`` ordinary DealHands(100,000, close=true) calls read as fast as they come, back to back."""

    def attack(opts: argparse.Namespace, tally: Tally) -> None:
        def read() -> None:
            with grpc.insecure_channel(opts.target, options=OWN) as channel:
                stub = dealer_pb2_grpc.DealerServiceStub(channel)
                request = pb.DealHandsRequest(deck="standard", hand_count=100_000, close=True)
                while tally.running():
                    hands = 0
                    try:
                        for response in stub.DealHands(request, metadata=auth(opts.token), timeout=120):
                            hands += len(response.hands)
                            if not tally.running():
                                break
                        tally.count("OK")
                    except grpc.RpcError as e:
                        tally.count(code_of(e))
                        time.sleep(1.0)
                    tally.count("hands", hands)

        threads(n, read)

    return attack


def get_hand_flood(opts: argparse.Namespace, tally: Tally) -> None:
    """2,500 concurrent GetHand from one grpc.aio client, wave after wave."""

    async def run() -> None:
        async with grpc.aio.insecure_channel(opts.target, options=OPTIONS) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            metadata = auth(opts.token)
            opened = await stub.DealNewHand(pb.DealNewHandRequest(deck="standard"), metadata=metadata)
            request = pb.GetHandRequest(hand_id=opened.hand.hand_id)

            async def one() -> None:
                try:
                    await stub.GetHand(request, metadata=metadata, timeout=30)
                    tally.count("OK")
                except grpc.RpcError as e:
                    tally.count(code_of(e))

            while tally.running():
                await asyncio.gather(*(one() for _ in range(2500)))

    asyncio.run(run())


def open_hand_cap(opts: argparse.Namespace, tally: Tally) -> None:
    """OpenHand from 8 threads, never closing: the tenant fills its cap, then keeps asking."""

    def work() -> None:
        with grpc.insecure_channel(opts.target, options=OPTIONS) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            request = pb.OpenHandRequest(deck="standard")
            while tally.running():
                try:
                    stub.OpenHand(request, metadata=auth(opts.token), timeout=30)
                    tally.count("OK")
                except grpc.RpcError as e:
                    tally.count(code_of(e))

    threads(8, work)


def largest_requests(opts: argparse.Namespace, tally: Tally) -> None:
    """DealNewHand requests just under the 512 KiB request limit, so gRPC passes them and the
    dealer parses them, each then refused: 8 threads of 65 client seeds of 7.8 KiB (one seed too
    many, and each seed too long)."""
    seed = pb.ClientSeed(data=os.urandom(7_900))
    request = pb.DealNewHandRequest(deck="standard", client_seeds=[seed] * 65)
    assert request.ByteSize() < 512 * 1024, request.ByteSize()

    def work() -> None:
        with grpc.insecure_channel(opts.target, options=OPTIONS) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            while tally.running():
                try:
                    stub.DealNewHand(request, metadata=auth(opts.token), timeout=30)
                    tally.count("OK")
                except grpc.RpcError as e:
                    tally.count(code_of(e))

    threads(8, work)


def token_spray(opts: argparse.Namespace, tally: Tally) -> None:
    """16 threads calling GetHand with random token ids."""
    request = pb.GetHandRequest(hand_id="x")

    def work() -> None:
        with grpc.insecure_channel(opts.target, options=OPTIONS) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            while tally.running():
                token = f"fdk_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)[:43]}"
                try:
                    stub.GetHand(request, metadata=auth(token), timeout=30)
                    tally.count("OK")
                except grpc.RpcError as e:
                    tally.count(code_of(e))

    threads(16, work)


def idle_and_slowloris(opts: argparse.Namespace, tally: Tally) -> None:
    """500 connections that finish the HTTP/2 preface and settings and then sit idle, and 300
    that send the preface a byte at a time, about one byte every 5 s; any the dealer closes, or
    leaves unanswered for 5 s, is opened again at once (so the dealer sees them churn at its
    bounds). Connections are opened without blocking, all at once, as a determined client does."""
    from tests.support import rawh2

    settings = rawh2._frame(rawh2.SETTINGS, 0, 0)
    host, port = opts.target.rsplit(":", 1)
    first_of = {"idle": rawh2.PREFACE + settings, "slow": b""}

    class Slot:
        def __init__(self, kind: str) -> None:
            self.kind = kind
            self.sock: socket.socket | None = None
            self.since = 0.0
            self.up = False
            self.sent = 0

        def open(self) -> None:
            # From 127.0.0.2, another loopback address: a client address of its own, as an
            # attacker's is (the victim connects from 127.0.0.1), so the per-address limit is its.
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.bind((SOURCE, 0))
                err = s.connect_ex((host, int(port)))
            except OSError as e:
                s.close()
                tally.count(type(e).__name__)
                return
            if err not in (0, errno.EINPROGRESS):
                s.close()
                tally.count(errno.errorcode.get(err, str(err)))
                return
            self.sock, self.since, self.up, self.sent = s, time.monotonic(), False, 0
            tally.count("opened")

        def tend(self) -> None:
            s = self.sock
            if s is None:
                self.open()
                return
            if not self.up:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                try:
                    s.getpeername()
                except OSError:  # not connected (yet)
                    if err or time.monotonic() - self.since > 5.0:
                        s.close()
                        self.sock = None
                        tally.count("refused" if err else "unanswered for 5 s")
                        self.open()
                    return
                self.up = True
                if first_of[self.kind]:
                    s.send(first_of[self.kind])
            if _closed(s):
                s.close()
                self.sock = None
                tally.count("closed by the dealer")
                self.open()
            elif self.kind == "slow" and self.sent < len(rawh2.PREFACE) and random.random() < 0.2:
                try:
                    s.send(rawh2.PREFACE[self.sent : self.sent + 1])
                    self.sent += 1
                except OSError:
                    pass

    slots = [Slot("idle") for _ in range(500)] + [Slot("slow") for _ in range(300)]
    while tally.running():
        for slot in slots:
            slot.tend()
        time.sleep(1.0)
    for slot in slots:
        if slot.sock is not None:
            slot.sock.close()


def _closed(s: socket.socket) -> bool:
    try:
        while True:
            if not s.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


ATTACKS: dict[str, tuple[str, Callable[[argparse.Namespace, Tally], None]]] = {
    "unread": ("50 DealHands streams it never reads", unread_streams(own_connections=False)),
    "unread-own": ("50 unread DealHands streams, each on its own connection", unread_streams(True)),
    "readers": ("3 ordinary DealHands(100k, close=true) readers", readers(3)),
    "bulk": ("the ordinary bulk dealer: 1 DealHands(100k, close=true) reader", readers(1)),
    "gethand": ("2,500 concurrent GetHand", get_hand_flood),
    "opencap": ("fills its open-hand cap", open_hand_cap),
    "largest": ("the largest requests parsed, then refused", largest_requests),
    "spray": ("token spraying", token_spray),
    "conns": ("500 idle and 300 slowloris connections", idle_and_slowloris),
}


def attack(opts: argparse.Namespace) -> dict[str, Any]:
    tally = Tally(opts.seconds)
    started = time.monotonic()
    ATTACKS[opts.attack][1](opts, tally)
    seconds = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "codes": dict(tally.codes),
        "seconds": round(seconds, 2),
        "cpu_cores": round((usage.ru_utime + usage.ru_stime) / seconds, 2),
    }
