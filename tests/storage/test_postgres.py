"""What only the PostgreSQL engine has to get right: several replicas on one
database (one gap-free log, one root per checkpoint size, one hand per request
id), replicas starting together, a damaged log refused at start, connection
failures reported as STORAGE_UNAVAILABLE without secrets, and no plain seed
in any column before its reveal."""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import pytest

from fairdeck.log import merkle
from fairdeck_server import refusals
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.base import LogForkError, Storage, StoredCheckpoint
from fairdeck_server.storage.postgres import PostgresStorage
from tests.support.engines import closing, entry, naive_root, new_hand, records
from tests.support.waits import wait_for_async

T = TypeVar("T")


def replicas(url: str, n: int, scenario: Callable[..., Awaitable[T]]) -> T:
    """Run ``scenario(*storages)`` with ``n`` started PostgresStorage on one database."""

    async def main() -> T:
        storages = [PostgresStorage(url) for _ in range(n)]
        await asyncio.gather(*(s.start() for s in storages))  # together: the schema is created once
        try:
            return await scenario(*storages)
        finally:
            await asyncio.gather(*(s.close() for s in storages))

    return asyncio.run(main())


def sql(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def test_two_replicas_appending_concurrently_never_fork(pg_url: str) -> None:
    async def worker(s: Storage, name: str) -> list[tuple[int, bytes]]:
        acked = []
        for i in range(10):
            hand = f"{name}-{i}"
            made = records(await s.create_hands([new_hand(hand), new_hand(f"{hand}x")]))
            acked += [(h.commit_index, entry(h.hand_id[1:])) for h in made]
            stored, _ = await s.update_hand("t", f"h{hand}", closing(entry(f"reveal {hand}")))
            assert stored.reveal_index is not None
            acked.append((stored.reveal_index, entry(f"reveal {hand}")))
        return acked

    async def scenario(a: Storage, b: Storage) -> None:
        work = [worker(a, f"a{w}") for w in range(12)] + [worker(b, f"b{w}") for w in range(12)]
        acked = [x for w in await asyncio.gather(*work) for x in w]
        head_a, head_b = await a.log_head(), await b.log_head()
        assert head_a == head_b
        size, root = head_a
        entries = await b.log_entries(0, size + 10)
        assert size == len(entries) == len(acked) == 24 * 10 * 3
        assert sorted(index for index, _ in acked) == list(range(size))  # no gap, no index twice
        for index, data in acked:
            assert entries[index] == data
        assert root == naive_root(entries)
        # The replicas really interleaved: runs of one replica's entries alternate many times.
        owners = [e.split(b" ")[-1][:1] for e in entries]
        switches = sum(1 for x, y in itertools.pairwise(owners) if x != y)
        assert switches >= 10, switches

    replicas(pg_url, 2, scenario)
    # Every stored hash was written once, by whichever replica appended its leaf.
    (count, top) = sql(pg_url, "SELECT count(*), max(idx) FROM log_hashes")[0]
    assert count == top + 1 == merkle.stored_hash_count(720)


def test_racing_publishers_store_one_root_per_size(pg_url: str) -> None:
    async def append(s: Storage, name: str) -> None:
        for i in range(40):
            await s.create_hands([new_hand(f"{name}{i}")])

    async def publish(s: Storage, name: str, stop: asyncio.Event) -> list[tuple[int, StoredCheckpoint]]:
        got = []
        while not stop.is_set() or len(got) < 10:  # at least 10 each, however fast the appends
            size, root = await s.log_head()
            if size:
                got.append((size, await s.put_checkpoint(size, root, f"{name} {size}".encode(), size)))
            await asyncio.sleep(0)
        return got

    async def scenario(a: Storage, b: Storage) -> list[tuple[int, StoredCheckpoint]]:
        stop = asyncio.Event()
        pairs = ((a, "A"), (b, "B"), (a, "A2"), (b, "B2"))  # two publishers on each replica
        publishers = [asyncio.create_task(publish(s, n, stop)) for s, n in pairs]
        await asyncio.gather(append(a, "a"), append(b, "b"))
        stop.set()
        got = [x for p in await asyncio.gather(*publishers) for x in p]
        # Both publishers on exactly the same size at once: one note wins, both get it back.
        size, root = await a.log_head()
        both = await asyncio.gather(
            a.put_checkpoint(size + 0, root, b"A final", 1), b.put_checkpoint(size, root, b"B final", 1)
        )
        assert both[0] == both[1] and both[0].size == size
        # Another root for a signed size is refused, on either replica.
        for s in (a, b):
            with pytest.raises(LogForkError):
                await s.put_checkpoint(size, naive_root([b"forged"]), b"fork", 1)
        return got

    got = replicas(pg_url, 2, scenario)
    entries = [bytes(r[0]) for r in sql(pg_url, "SELECT entry FROM log_entries ORDER BY idx")]
    rows = sql(pg_url, "SELECT size, root, note FROM checkpoints")
    stored = {r[0]: (bytes(r[1]), bytes(r[2])) for r in rows}
    assert len(got) >= 40 and len(stored) > 3
    for size, (root, _note) in stored.items():
        assert root == naive_root(entries[:size])
    for asked, head in got:
        assert head.size >= asked  # the head never moves back
        assert stored[head.size] == (head.root, head.note)  # what a publisher got back is what is stored


def test_replicas_racing_on_one_request_id_store_one_hand(pg_url: str) -> None:
    fp = b"\x03" * 32

    async def scenario(a: Storage, b: Storage) -> None:
        for round_ in range(15):
            rid = f"req-{round_}"
            made = await asyncio.gather(
                *(
                    s.create_hands([new_hand(f"{round_}-{i}", request_id=rid, request_fingerprint=fp)])
                    for i, s in enumerate([a, b, a, b])
                )
            )
            assert len({m[0].record.hand_id for m in made}) == 1
            assert len({m[0].record.commit_index for m in made}) == 1
            assert sum(not m[0].found for m in made) == 1  # one replica stored it, the others found it
        assert await a.log_size() == 15

    replicas(pg_url, 2, scenario)


def test_replicas_starting_together_create_the_schema_once(pg_url: str) -> None:
    async def scenario(*storages: Storage) -> None:
        made = await asyncio.gather(*(s.create_hands([new_hand(i)]) for i, s in enumerate(storages)))
        assert sorted(m[0].record.commit_index for m in made) == list(range(len(storages)))

    replicas(pg_url, 5, scenario)


@pytest.mark.parametrize("damage", ["entry deleted", "head ahead", "hash changed"])
def test_a_damaged_log_is_refused_at_start(pg_url: str, damage: str) -> None:
    async def fill(s: Storage) -> None:
        await s.create_hands([new_hand(i) for i in range(11)])

    replicas(pg_url, 1, fill)
    if damage == "entry deleted":
        sql(pg_url, "DELETE FROM log_entries WHERE idx = 10")
    elif damage == "head ahead":
        sql(pg_url, "UPDATE log_head SET size = size + 1")
    else:  # leaf 10 is a frontier hash of a tree of 11
        sql(pg_url, "UPDATE log_hashes SET hash = sha256(hash) WHERE idx = (SELECT max(idx) FROM log_hashes)")

    async def start() -> None:
        s = PostgresStorage(pg_url)
        try:
            await s.start()
        finally:
            await s.close()

    with pytest.raises(refusals.DealerError) as refused:
        asyncio.run(start())
    assert refused.value.reason == "STORAGE_UNAVAILABLE"
    assert refused.value.status is refusals.Status.UNAVAILABLE


def test_an_unreachable_database_is_unavailable_and_its_password_stays_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        url = f"postgresql://fairdeck:hunter2-pass@127.0.0.1:{port}/fairdeck"

        async def start() -> None:
            s = PostgresStorage(url, connect_timeout=1.0)
            try:
                await s.start()
            finally:
                await s.close()

        with caplog.at_level(logging.DEBUG), pytest.raises(refusals.DealerError) as down:
            asyncio.run(start())
    assert down.value.reason == "STORAGE_UNAVAILABLE"
    assert f"127.0.0.1:{port}/fairdeck" in str(down.value)
    assert "hunter2" not in str(down.value) and "hunter2" not in caplog.text


def test_killed_connections_fail_calls_as_unavailable_then_recover(pg_url: str) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand(i) for i in range(3)])
        killed = sql(
            pg_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'fairdeck' AND datname = current_database()",
        )
        assert killed, "no connection of the storage was found"
        outcomes: list[str] = []
        for i in range(3, 30):
            try:
                await s.create_hands([new_hand(i)])
                await s.get_hand("t", f"h{i}")
                outcomes.append("ok")
            except refusals.DealerError as e:  # never a psycopg exception
                assert e.reason == "STORAGE_UNAVAILABLE" and e.status is refusals.Status.UNAVAILABLE
                outcomes.append("unavailable")
        assert "unavailable" in outcomes, outcomes  # the pool handed out a killed connection, once each
        assert outcomes[-10:] == ["ok"] * 10, outcomes
        size, root = await s.log_head()
        assert root == naive_root(await s.log_entries(0, size))

    replicas(pg_url, 1, scenario)


def test_no_plain_seed_in_any_column_until_the_reveal(pg_url: str) -> None:
    seed = secrets.token_bytes(64)
    used: list[bytes] = []

    def entropy(n: int) -> bytes:
        used.append(seed[:n])
        return seed[:n]

    def every_value() -> list[bytes]:
        out = []
        for table in ("hands", "log_entries", "log_hashes", "log_head", "checkpoints", "tokens"):
            for row in sql(pg_url, f"SELECT * FROM {table}"):
                out += [bytes(v) if isinstance(v, bytes | memoryview) else str(v).encode() for v in row]
        return out

    async def scenario(s: Storage) -> None:
        dealer = Dealer(s, SeedVault(secrets.token_bytes(32)), entropy=entropy)
        opened = await dealer.open_hand("t", "standard", "")
        await dealer.shuffle("t", opened.hand_id, ["alice"])
        size, root = await s.log_head()
        await s.put_checkpoint(size, root, b"note", 1)
        (server_seed,) = used
        assert not [v for v in every_value() if server_seed in v]
        closed = await dealer.close("t", opened.hand_id)
        assert closed.server_seed == server_seed
        holders = [v for v in every_value() if server_seed in v]
        assert len(holders) == 2  # now revealed: the hand's server_seed and its reveal entry

    replicas(pg_url, 1, scenario)


def test_calls_waiting_for_a_failed_start_fail_as_unavailable() -> None:
    async def scenario() -> None:
        s = PostgresStorage("postgresql://fairdeck@127.0.0.1:1/fairdeck", connect_timeout=0.5)
        early = asyncio.gather(s.create_hands([new_hand(0)]), s.get_hand("t", "h0"), return_exceptions=True)
        with pytest.raises(refusals.DealerError):
            await s.start()
        for outcome in await asyncio.wait_for(early, 10):
            assert isinstance(outcome, refusals.DealerError) and outcome.reason == "STORAGE_UNAVAILABLE"
        await s.close()

    asyncio.run(scenario())


def test_a_replica_starting_on_a_busy_database_runs_no_ddl(pg_url: str) -> None:
    """A restart or scale-out must not queue writes behind DDL: with another session's
    write to ``hands`` uncommitted, a replica still starts (CREATE INDEX IF NOT EXISTS
    would wait for that transaction, and every replica's writes would queue behind it)."""

    async def first(s: Storage) -> None:
        await s.create_hands([new_hand("before")])

    replicas(pg_url, 1, first)
    assert sql(pg_url, "SELECT count(*) FROM fairdeck_schema") == [(1,)]
    with psycopg.connect(pg_url) as busy:  # a transaction left open, holding a lock on hands
        busy.execute("UPDATE hands SET dealt = dealt WHERE hand_id = 'hbefore'")

        async def started(s: Storage) -> int:
            return len(await s.create_hands([new_hand("after")]))

        async def main() -> int:
            return await asyncio.wait_for(asyncio.to_thread(replicas, pg_url, 1, started), timeout=20)

        assert asyncio.run(main()) == 1
        busy.rollback()


def test_the_writer_keeps_its_connection_when_reads_fill_the_pool(pg_url: str) -> None:
    """Reads stuck behind a lock hold every read connection; a write still commits."""

    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand("seen")])
        with psycopg.connect(pg_url) as blocker:
            blocker.execute("LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE")
            reads = [asyncio.create_task(s.get_token(f"t{i}")) for i in range(6)]
            assert isinstance(s, PostgresStorage)
            pool = s._pool
            await wait_for_async(  # 2 reads hold the pool's 2 connections, 4 wait for one
                "every read connection held", lambda: pool.get_stats().get("requests_waiting", 0) >= 4
            )
            made = await asyncio.wait_for(s.create_hands([new_hand("written")]), timeout=10)
            assert [c.record.hand_id for c in made] == ["hwritten"]
            blocker.rollback()
            assert await asyncio.gather(*reads) == [None] * 6

    async def main() -> None:
        s = PostgresStorage(pg_url, max_size=3)  # the writer's connection and 2 for reads
        await s.start()
        try:
            await scenario(s)
        finally:
            await s.close()

    asyncio.run(main())
