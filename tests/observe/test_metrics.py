"""The Prometheus endpoint of a real dealer, scraped over loopback HTTP after a
known session: every counter moves by exactly what the session did, with
the status code each client received (aborts, refusals, deadlines)."""

# The SDK's own retries are off (retries=0) here: these tests watch the dealer's refusals
# themselves; the SDK's waiting them out is tests/client/test_retries.py.

from __future__ import annotations

import contextlib
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import (
    DeadlineExceeded,
    HandNotFound,
    InvalidArgument,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from fairdeck_server.policy.auth import new_token
from fairdeck_server.principal import Role
from fairdeck_server.run import startup
from tests.support.dealers import RunningDealer
from tests.support.ops import Samples, read_stalled, sample, scrape, scrape_until
from tests.support.waits import outlast, pace, wait_for

DEALER = "fairdeck.v1.DealerService"


def rpcs(samples: dict, method: str, code: str, service: str = DEALER) -> float:
    return sample(samples, "fairdeck_rpcs_total", service=service, method=method, code=code)


def test_a_known_session_moves_every_counter_by_its_exact_amount(tmp_path: Path) -> None:
    # burst 8 at a rate that refills nothing during the test: the 9th call is refused.
    config = {"metrics_listen": "127.0.0.1:0", "rate_limit": 0.0001, "rate_burst": 8, "max_open_hands": 0}
    with RunningDealer(tmp_path / "d", **config) as running, DealerClient(running.target, retries=0) as c:
        first = c.open_hand(request_id="session-open-1")
        assert c.open_hand(request_id="session-open-1").hand_id == first.hand_id  # a retry: no new hand
        second = c.open_hand()
        with pytest.raises(HandNotFound):
            c.get("0000000000000000000")
        with pytest.raises(InvalidArgument):
            c.draw(first.hand_id, 60)
        closed = c.close_hand(first.hand_id)
        c.close_hand(first.hand_id)  # already closed: returned as is
        assert len(list(c.deal_hands(hand_count=3, close=True))) == 3
        with pytest.raises(ResourceExhausted):
            c.get(second.hand_id)
        with grpc.insecure_channel(running.target) as channel:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        s = scrape_until(running, lambda s: rpcs(s, "GetHand", "RESOURCE_EXHAUSTED") == 1)

        assert rpcs(s, "OpenHand", "OK") == 3
        assert rpcs(s, "GetHand", "NOT_FOUND") == 1
        assert rpcs(s, "DrawCards", "INVALID_ARGUMENT") == 1
        assert rpcs(s, "CloseHand", "OK") == 2
        assert rpcs(s, "DealHands", "OK") == 1
        assert rpcs(s, "GetHand", "RESOURCE_EXHAUSTED") == 1
        assert rpcs(s, "Check", "OK", service="grpc.health.v1.Health") == 1
        total = sum(v for (name, _), v in s.items() if name == "fairdeck_rpcs_total")
        assert total == 10  # nothing else was counted
        for method, calls in {
            "OpenHand": 3,
            "GetHand": 2,
            "DrawCards": 1,
            "CloseHand": 2,
            "DealHands": 1,
        }.items():
            count = sample(s, "fairdeck_rpc_duration_seconds_count", service=DEALER, method=method)
            assert count == calls, method
        assert sample(s, "fairdeck_hands_opened_total") == 2 + 3
        assert sample(s, "fairdeck_hands_closed_total", outcome="closed") == 1 + 3
        assert sample(s, "fairdeck_hands_closed_total", outcome="voided") == 0
        assert sample(s, "fairdeck_limit_refusals_total", reason="RATE_LIMITED") == 1
        assert sample(s, "fairdeck_limit_refusals_total", reason="TOO_MANY_OPEN_HANDS") == 0
        assert not [k for k in s if k[0] == "fairdeck_storage_errors_total"]
        assert sample(s, "fairdeck_open_hands") == 1
        assert sample(s, "fairdeck_log_size") == 2 + 1 + 3 * 2  # commits, a reveal, 3 closed hands
        assert 0 <= sample(s, "fairdeck_checkpoint_size") <= 9
        # The SQLite writer's own counts: every entry of this fresh log was appended by it.
        assert sample(s, "fairdeck_log_appends_total") == 9
        batches = sample(s, "fairdeck_storage_batches_total")
        assert 1 <= batches <= sample(s, "fairdeck_storage_operations_total")
        assert sample(s, "fairdeck_storage_transaction_seconds_total") > 0
        assert not [k for k in s if k[0] == "fairdeck_log_lock_wait_seconds_total"]  # one writer, no lock

        # No label holds request data: no hand id, request id, seed or tenant.
        labels = " ".join(f"{k}={v}" for _, pairs in s for k, v in pairs)
        for secret in (first.hand_id, second.hand_id, "session-open-1", closed.transcript.server_seed.hex()):
            assert secret not in labels
        assert "default" not in labels


@pytest.mark.light
def test_codes_of_refusals_and_deadlines_are_the_ones_clients_received(tmp_path: Path) -> None:
    # The cap fits what a DealHands with close holds while it runs (bulk.STREAM_IN_FLIGHT).
    config = {
        "metrics_listen": "127.0.0.1:0",
        "rate_limit": 0,
        "max_open_hands": 512,
        # Long enough for the 511-hand DealHands below on a loaded CI machine (it failed once at
        # 0.2 s), short enough that the 100,000-hand one (about 10 s) always runs past it.
        "default_deadline": 1.5,
    }
    with (
        RunningDealer(tmp_path / "d", **config) as running,
        DealerClient(running.target, retries=0, options=[("grpc.http2.bdp_probe", 0)]) as c,
    ):
        with pytest.raises(DeadlineExceeded):  # the server's default deadline, on a stalled reader
            read_stalled(c.deal_hands(hand_count=100_000, close=True), 3.0)
        first = c.open_hand()
        assert len(list(c.deal_hands(hand_count=511))) == 511  # the cap is full
        with pytest.raises(ResourceExhausted):
            c.open_hand()
        c.close_hand(first.hand_id)
        outlast(0.15)  # the cap rereads storage before refusing, at most every 0.1 s
        with DealerClient(running.target, timeout=0.3, retries=0) as hasty:
            blocker = sqlite3.connect(tmp_path / "d" / "fairdeck.db", isolation_level=None, timeout=10)
            blocker.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(DeadlineExceeded):  # the client's own deadline
                    hasty.deal_new_hand()
                wait_for(  # the dealer ends the call while the write still waits for the lock
                    "the dealer to count the deadline",
                    lambda: rpcs(scrape(running), "DealNewHand", "DEADLINE_EXCEEDED") == 1,
                )
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
        s = scrape_until(running, lambda s: rpcs(s, "DealNewHand", "DEADLINE_EXCEEDED") == 1)
        assert rpcs(s, "OpenHand", "OK") == 1
        assert rpcs(s, "DealHands", "OK") == 1
        assert rpcs(s, "OpenHand", "RESOURCE_EXHAUSTED") == 1
        assert sample(s, "fairdeck_limit_refusals_total", reason="TOO_MANY_OPEN_HANDS") == 1
        assert rpcs(s, "DealHands", "DEADLINE_EXCEEDED") == 1
        assert rpcs(s, "DealNewHand", "DEADLINE_EXCEEDED") == 1


def test_voided_hands_are_counted_apart(tmp_path: Path) -> None:
    config = {"metrics_listen": "127.0.0.1:0", "max_hand_lifetime": 0.3}
    with RunningDealer(tmp_path / "d", **config) as running, DealerClient(running.target, retries=0) as c:
        c.open_hand()
        kept = c.open_hand()
        c.close_hand(kept.hand_id)

        def voided() -> Samples | None:
            s = scrape(running)
            return s if sample(s, "fairdeck_hands_closed_total", outcome="voided") >= 1 else None

        s = wait_for("a hand voided", voided, timeout=10, every=0.3)
        assert sample(s, "fairdeck_hands_closed_total", outcome="voided") == 1
        assert sample(s, "fairdeck_hands_closed_total", outcome="closed") == 1
        assert sample(s, "fairdeck_hands_opened_total") == 2


def test_storage_failures_are_counted_by_operation(tmp_path: Path) -> None:
    running_cm = RunningDealer(tmp_path / "d", metrics_listen="127.0.0.1:0")
    running = running_cm.__enter__()
    try:
        with DealerClient(running.target, retries=0) as c:
            hand = c.open_hand()
            assert running.server is not None
            running._run(running.server.storage.close())  # the database goes away under the dealer
            with pytest.raises(Unavailable) as down:
                c.draw(hand.hand_id, 1)
            assert down.value.reason == "STORAGE_UNAVAILABLE"
            s = scrape_until(running, lambda s: rpcs(s, "DrawCards", "UNAVAILABLE") == 1)
            assert sample(s, "fairdeck_storage_errors_total", operation="update_hand") == 1
            assert rpcs(s, "DrawCards", "UNAVAILABLE") == 1
    finally:
        with contextlib.suppress(Exception):  # its drain cannot flush to a closed database
            running.stop()
        running.server = None
        running_cm.__exit__(None, None, None)


def test_two_dealers_in_one_process_keep_their_own_numbers(tmp_path: Path) -> None:
    with (
        RunningDealer(tmp_path / "a", metrics_listen="127.0.0.1:0") as a,
        RunningDealer(tmp_path / "b", metrics_listen="127.0.0.1:0") as b,
        DealerClient(a.target) as ca,
        DealerClient(b.target) as cb,
    ):
        ca.open_hand()
        cb.open_hand()
        cb.open_hand()
        assert sample(scrape(a), "fairdeck_hands_opened_total") == 1
        assert sample(scrape(b), "fairdeck_hands_opened_total") == 2


def test_checkpoint_age_resets_when_the_head_moves(tmp_path: Path) -> None:
    with (
        RunningDealer(tmp_path / "d", metrics_listen="127.0.0.1:0") as running,
        DealerClient(running.target, retries=0) as c,
    ):
        c.open_hand()

        def signed(size: int) -> Samples | None:
            s = scrape(running)
            return (
                s if sample(s, "fairdeck_checkpoint_size") == sample(s, "fairdeck_log_size") == size else None
            )

        # The gauges are reread at most once a second.
        s = wait_for("a checkpoint of one entry", lambda: signed(1), timeout=21, every=1.05)
        assert sample(s, "fairdeck_checkpoint_size") == 1
        outlast(1.05)  # the checkpoint ages
        idle = scrape(running)
        assert sample(idle, "fairdeck_checkpoint_age_seconds") >= 1.0
        c.open_hand()
        moved = wait_for("a checkpoint of two entries", lambda: signed(2), timeout=21, every=1.05)
        assert sample(moved, "fairdeck_checkpoint_size") == 2
        assert sample(moved, "fairdeck_checkpoint_age_seconds") < 0.5  # counted from when it moved


def test_auth_refusals_are_counted_and_never_spend_a_tenants_budget(tmp_path: Path) -> None:
    # Interceptor order: observing (outermost) sees the refusal; limits (inside auth) never run for it.
    config = {"metrics_listen": "127.0.0.1:0", "require_auth": True, "rate_limit": 0.0001, "rate_burst": 1}
    with RunningDealer(tmp_path / "d", **config) as running:
        token, record = new_token("acme", Role.DEALER)
        assert running.server is not None
        running._run(running.server.storage.put_token(record))
        with DealerClient(running.target, retries=0) as anonymous:
            for _ in range(3):
                with pytest.raises(Unauthenticated):
                    anonymous.open_hand()
        with DealerClient(running.target, api_token=token) as acme:
            acme.open_hand()  # its one call of budget is still there
        s = scrape_until(running, lambda s: rpcs(s, "OpenHand", "OK") == 1)
        assert rpcs(s, "OpenHand", "UNAUTHENTICATED") == 3
        assert sample(s, "fairdeck_limit_refusals_total", reason="RATE_LIMITED") == 0


def test_writers_on_postgresql_export_their_log_lock_wait(tmp_path: Path, pg_url: str) -> None:
    """On PostgreSQL the writer also reports how long it waited for the shared log lock:
    with appends per batch, the signal that the single sequence nears its ceiling. The
    replica holds no more connections than --db-pool-size, even with 16 reads waiting."""
    import psycopg

    config = {"metrics_listen": "127.0.0.1:0", "db": pg_url, "db_pool_size": 3}
    startup.init(tmp_path / "d", keys_only=True, environ={})  # serve never makes keys on PostgreSQL
    with RunningDealer(tmp_path / "d", **config) as running, DealerClient(running.target, retries=0) as c:
        assert len(list(c.deal_hands(hand_count=5, close=True))) == 5
        hand = c.open_hand().hand_id
        with (
            psycopg.connect(pg_url) as blocker,
            psycopg.connect(pg_url, autocommit=True) as watcher,  # a fresh activity snapshot each time
            ThreadPoolExecutor(16) as pool,
        ):
            blocker.execute("LOCK TABLE hands IN ACCESS EXCLUSIVE MODE")  # every read now waits
            reads = [pool.submit(c.get, hand) for _ in range(16)]

            def connections() -> int:
                row = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND application_name = 'fairdeck'"
                ).fetchone()
                return int(row[0]) if row is not None else 0

            seen = [connections()]

            def grown() -> bool:  # the pool grows as reads wait
                seen.append(connections())
                return seen[-1] >= 3

            wait_for("three connections", grown, timeout=10)
            for _ in range(10):  # then stays at the cap while 16 reads wait
                pace(0.05)
                seen.append(connections())
            blocker.commit()
            assert all(r.result(timeout=20).hand_id == hand for r in reads)
        assert max(seen) == 3 and seen[-1] == 3, seen
        c.close_hand(hand)
        s = scrape_until(running, lambda s: sample(s, "fairdeck_log_appends_total") == 12)
        batches = sample(s, "fairdeck_storage_batches_total")
        assert 1 <= batches <= sample(s, "fairdeck_storage_operations_total")
        assert ("fairdeck_log_lock_wait_seconds_total", ()) in s  # present (its value may be 0)
        assert sample(s, "fairdeck_log_hashing_seconds_total") > 0
        assert sample(s, "fairdeck_log_size") == 12
