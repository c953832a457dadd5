"""Health tells the truth: it answers for every service, and says NOT_SERVING
while storage takes no writes. Reflection is served as v1 and v1alpha.

Real dealers on real SQLite files; storage is made to fail for real by a
second connection that holds the database's write lock, what a second dealer
on the same file does. (Tests run as root, where chmod stops no write, so a
read-only file is not used.)
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from tests.support.dealers import RunningDealer
from tests.support.fixtures import DealerFactory
from tests.support.ops import sample, scrape_until
from tests.support.speed import scaled
from tests.support.waits import wait_for, wait_for_async

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = ("", "fairdeck.v1.DealerService", "fairdeck.v1.AuditService")
WAIT = 60  # seconds; SQLite's busy timeout (5 s) is paid twice before NOT_SERVING


@pytest.fixture
def running(tmp_path: Path, dealer_factory: DealerFactory) -> RunningDealer:
    return dealer_factory(tmp_path / "d", metrics_listen="127.0.0.1:0")


def check(channel: grpc.Channel, service: str) -> int:
    answer = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=service), timeout=10
    )
    status: int = answer.status
    return status


def watch_until(channel: grpc.Channel, service: str, wanted: int) -> None:
    """Follow Health.Watch until it reports ``wanted`` (a deadline ends the wait and fails the test)."""
    stream = health_pb2_grpc.HealthStub(channel).Watch(
        health_pb2.HealthCheckRequest(service=service), timeout=WAIT
    )
    try:
        for answer in stream:
            if answer.status == wanted:
                return
    finally:
        stream.cancel()
    raise AssertionError("the Watch stream ended")


def test_health_answers_for_every_service_the_dealer_serves(running: RunningDealer) -> None:
    with grpc.insecure_channel(running.target) as channel:
        for service in SERVICES:
            assert check(channel, service) == SERVING, service


def reflect(channel: grpc.Channel, method: str, request: reflection_pb2.ServerReflectionRequest) -> object:
    call = channel.stream_stream(
        method,
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    (answer,) = list(call(iter([request]), timeout=10))
    return answer


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_is_served_as_v1_and_v1alpha(running: RunningDealer, version: str) -> None:
    from google.protobuf import descriptor_pb2

    method = f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo"
    with grpc.insecure_channel(running.target) as channel:
        listed: reflection_pb2.ServerReflectionResponse = reflect(  # type: ignore[assignment]
            channel, method, reflection_pb2.ServerReflectionRequest(list_services="")
        )
        names = {s.name for s in listed.list_services_response.service}
        assert {
            "fairdeck.v1.DealerService",
            "fairdeck.v1.AuditService",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        } <= names
        # Every listed service can be described, the v1 reflection service included.
        for symbol in ("grpc.reflection.v1.ServerReflection", "fairdeck.v1.DealerService"):
            found: reflection_pb2.ServerReflectionResponse = reflect(  # type: ignore[assignment]
                channel, method, reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol)
            )
            files = [
                descriptor_pb2.FileDescriptorProto.FromString(b)
                for b in found.file_descriptor_response.file_descriptor_proto
            ]
            assert any(f"{f.package}.{s.name}" == symbol for f in files for s in f.service), symbol


@pytest.mark.light
def test_health_goes_not_serving_while_storage_takes_no_writes_and_comes_back(
    running: RunningDealer, tmp_path: Path
) -> None:
    with DealerClient(running.target, timeout=WAIT) as c:
        held = c.open_hand()
    # A second connection takes the write lock and keeps it, as a second dealer on the file would.
    blocker = sqlite3.connect(tmp_path / "d" / "fairdeck.db", isolation_level=None, timeout=10)
    blocker.execute("BEGIN IMMEDIATE")
    released = False
    try:
        with (
            grpc.insecure_channel(running.target) as channel,
            DealerClient(running.target, timeout=WAIT) as c,
        ):
            assert check(channel, "") == SERVING
            with pytest.raises(FairdeckError) as failed:
                c.draw(held.hand_id)  # waits out the busy timeout, then fails (DrawCards is not retried)
            assert (failed.value.code, failed.value.reason) == (
                grpc.StatusCode.UNAVAILABLE,
                "STORAGE_UNAVAILABLE",
            )
            watch_until(channel, "", NOT_SERVING)  # the probe write failed too
            for service in SERVICES:
                assert check(channel, service) == NOT_SERVING, service
            # (Not scraped now: a scrape reads gauges from storage, and waits on the lock too.)
            assert running.server is not None
            assert running.server.metrics.storage_healthy._value.get() == 0  # type: ignore[attr-defined]

            blocker.execute("ROLLBACK")  # the lock is released: the next probe write succeeds
            released = True
            watch_until(channel, "", SERVING)
            for service in SERVICES:
                assert check(channel, service) == SERVING, service
            hand = c.open_hand()
            c.close_hand(hand.hand_id).verify(commitment=hand.commitment)
            s = scrape_until(running, lambda s: sample(s, "fairdeck_storage_healthy") == 1)
            assert sample(s, "fairdeck_storage_healthy") == 1
            # Back by the first write that succeeded: the next probe's, or a client's.
            assert sample(s, "fairdeck_storage_probes_total", outcome="failed") >= 1
    finally:
        if not released:
            blocker.execute("ROLLBACK")
        blocker.close()


def test_health_is_not_serving_until_storage_is_open(tmp_path: Path) -> None:
    """Health answers NOT_SERVING while start() waits for storage, then SERVING."""
    import asyncio

    from fairdeck_server.run.app import DealerServer
    from fairdeck_server.run.config import ServerConfig

    async def scenario() -> None:
        server = DealerServer(ServerConfig(listen="127.0.0.1:0", data_dir=tmp_path / "d"), trim_heap=False)
        gate = threading.Event()
        entered = asyncio.Event()
        opened = server.storage.start

        async def slow_start() -> None:  # the real start, held back until the checks below are made
            entered.set()
            await asyncio.to_thread(gate.wait)
            await opened()

        server.storage.start = slow_start  # type: ignore[method-assign]
        starting = asyncio.create_task(server.start())
        await entered.wait()  # the gRPC server is listening, storage not open yet
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for service in SERVICES:
                answer = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
                assert answer.status == NOT_SERVING, service
            gate.set()
            await starting
            for service in SERVICES:
                answer = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
                assert answer.status == SERVING, service
        await server.stop()

    asyncio.run(scenario())


# -- Health.Watch takes no credentials: 20,000 streams took the dealer from 62 to 520 MiB ----------


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.serial
def test_health_watch_streams_past_an_address_limit_are_refused_and_their_memory_given_back(
    tmp_path: Path,
) -> None:
    """600 Watch streams from one address over 12 connections: every one was held open, each with
    its own waiter in the library's servicer, and what they used stayed with the process after
    they ended. Now the address holds at most max_open_streams_per_peer (100) and each
    connection's first, the rest are refused TOO_MANY_STREAMS at once, Check answers meanwhile,
    and once they end the memory goes back to the system (heap.py) and the slots are free."""
    import asyncio

    from tests.support.dealers import DealerProcess
    from tests.support.floods import check_latency, watch_flood

    streams, connections = 600, 12  # 50 each: none waits in its client (max_streams_per_connection)

    async def flood(target: str, pid: int, n: int) -> tuple[dict[str, int], int, float, float]:
        f = await watch_flood(target, n, connections)
        peak = _rss_mib(pid)

        def all_in() -> bool:
            nonlocal peak
            peak = max(peak, _rss_mib(pid))
            return f.answered + sum(f.ended.values()) >= n

        await wait_for_async("every watch answered or ended", all_in, timeout=30)
        check = await check_latency(target, timeout=5)
        ended, held = dict(f.ended), f.answered
        await f.close()
        return ended, held, check, peak

    with DealerProcess(tmp_path / "d", tmp_path / "stderr") as dealer:
        before = _rss_mib(dealer.pid)
        ended, held, check, peak = asyncio.run(flood(dealer.target, dealer.pid, streams))
        assert 100 <= held <= 100 + connections, (held, ended)
        assert ended == {"RESOURCE_EXHAUSTED": streams - held}
        assert check < scaled(1.0, under=4.0)  # its own timeout is 5 s
        from fairdeck_server.observe.heap import TRIM_ABOVE, TRIM_SECONDS

        if peak - before >= 2 * TRIM_ABOVE / 2**20:  # worth a trim (heap.Trimmer)
            given_back = before + max(2.0, (peak - before) / 2)
            wait_for(
                f"the heap given back (before {before}, peak {peak} MiB)",
                lambda: _rss_mib(dealer.pid) <= given_back,
                timeout=3 * TRIM_SECONDS,
                every=0.2,
            )
        # The slots of the streams that ended are free, once the dealer has seen them end (a flood
        # begun at once can beat that, as tests/edge/test_reflection.py's did in a CI run); a
        # second between tries, so a try's own streams are seen ended before the next; a few seconds
        # in all (the dealer frees them as the streams end), so a slot held on does fail.
        seen: list[tuple[dict[str, int], int]] = []

        def held_again() -> bool:
            ended, held, _, _ = asyncio.run(flood(dealer.target, dealer.pid, 100))
            seen.append((ended, held))
            return seen[-1] == ({}, 100)

        try:
            wait_for("100 watches held again", held_again, timeout=scaled(5.0), every=1.0)
        except AssertionError as e:
            raise AssertionError(f"{e}; the last floods: {seen[-3:]}") from None
