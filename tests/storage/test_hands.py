"""The Storage contract for hands, on every engine: create, get and update
semantics, idempotent opens, tenant isolation, stale and open hands, and
refused updates that leave no trace."""

from __future__ import annotations

import asyncio
import hmac
import sqlite3
from dataclasses import replace
from typing import Any

import pytest

from fairdeck_server import refusals
from fairdeck_server.storage.base import Change, HandRecord, NewHand, Storage, StoredHandState
from tests.support.engines import Engine, closing, dealing, entry, new_hand, record, records, run
from tests.support.waits import hold_silent_async


def test_create_then_get_round_trips_every_field(storage_engine: Engine) -> None:
    seeds = (b"alice", b"\x00\xff bytes", "Café".encode())
    stored = record(
        "full",
        request_id="req-1",
        client_seeds=seeds,
        commitment=bytes(range(32)),
        sealed_seed=b"\x01sealed\x00seed",
        state=StoredHandState.SHUFFLED,
        dealt=52,
        created_ms=1_700_000_000_123,
        request_fingerprint=b"\x07" * 32,
    )

    async def scenario(s: Storage) -> None:
        (first,) = records(await s.create_hands([new_hand(0)]))
        (made,) = records(await s.create_hands([NewHand(stored, entry("full"))]))
        assert first.commit_index == 0 and made.commit_index == 1
        assert made == replace(stored, commit_index=1)
        assert await s.get_hand("t", "hfull") == made
        assert await s.get_hand("other", "hfull") is None  # another tenant's hand does not exist
        assert await s.get_hand("t", "nope") is None
        assert await s.entry_index("hfull", reveal=False) == 1
        assert await s.entry_index("hfull", reveal=True) is None
        assert await s.entry_index("nope", reveal=False) is None
        assert await s.log_entries(0, 10) == [entry(0), entry("full")]

    run(storage_engine, scenario)


def test_a_hand_created_closed_gets_its_reveal_right_after_its_commit(storage_engine: Engine) -> None:
    closed = record(1, state=StoredHandState.CLOSED, closed_ms=5, server_seed=b"revealed", dealt=52)

    async def scenario(s: Storage) -> None:
        made = records(
            await s.create_hands([new_hand(0), NewHand(closed, entry("c1"), entry("r1")), new_hand(2)])
        )
        assert [(h.commit_index, h.reveal_index) for h in made] == [(0, None), (1, 2), (3, None)]
        assert await s.log_entries(0, 4) == [entry(0), entry("c1"), entry("r1"), entry(2)]
        assert await s.entry_index("h1", reveal=True) == 2
        stored = await s.get_hand("t", "h1")
        assert stored is not None and stored.server_seed == b"revealed" and stored.reveal_index == 2

    run(storage_engine, scenario)


def test_an_idempotent_open_returns_the_stored_hand(storage_engine: Engine) -> None:
    fp, other_fp = b"\x01" * 32, b"\x02" * 32

    async def scenario(s: Storage) -> None:
        (first,) = records(await s.create_hands([new_hand("a", request_id="r1", request_fingerprint=fp)]))
        # A retry builds a new hand (new id, new seed): the stored one comes back instead.
        (again,) = records(await s.create_hands([new_hand("b", request_id="r1", request_fingerprint=fp)]))
        assert again == first
        assert await s.get_hand("t", "hb") is None
        assert await s.log_size() == 1

        with pytest.raises(refusals.DealerError) as reused:
            await s.create_hands([new_hand("c", request_id="r1", request_fingerprint=other_fp)])
        assert reused.value.status is refusals.Status.ALREADY_EXISTS
        assert (reused.value.reason, reused.value.field) == ("REQUEST_ID_REUSED", "request_id")
        assert await s.log_size() == 1 and await s.get_hand("t", "hc") is None

        # Request ids are per tenant; a hand without one is never deduplicated.
        (theirs,) = records(
            await s.create_hands([new_hand("d", tenant="u", request_id="r1", request_fingerprint=other_fp)])
        )
        assert theirs.hand_id == "hd" and theirs.commit_index == 1
        plain = records(await s.create_hands([new_hand("e"), new_hand("f")]))
        assert [h.commit_index for h in plain] == [2, 3]

    run(storage_engine, scenario)


def test_request_fingerprints_compared_in_constant_time(
    storage_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite compared a retry's request fingerprint (a digest) with ``!=``, whose time
    tells how many leading bytes a guess got right; PostgreSQL used hmac.compare_digest.
    Both now share one comparison. The real compare_digest runs, watched."""
    fp, other_fp = b"\x03" * 32, b"\x04" * 32
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def watched(a: bytes, b: bytes) -> bool:
        compared.append((bytes(a), bytes(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", watched)

    async def scenario(s: Storage) -> None:
        (first,) = records(await s.create_hands([new_hand("a", request_id="r", request_fingerprint=fp)]))
        (again,) = records(await s.create_hands([new_hand("b", request_id="r", request_fingerprint=fp)]))
        assert again == first
        with pytest.raises(refusals.DealerError) as reused:
            await s.create_hands([new_hand("c", request_id="r", request_fingerprint=other_fp)])
        assert reused.value.reason == "REQUEST_ID_REUSED"

    run(storage_engine, scenario)
    assert (fp, fp) in compared and (fp, other_fp) in compared


def test_concurrent_retries_of_one_open_store_one_hand(storage_engine: Engine) -> None:
    fp = b"\x05" * 32

    async def scenario(s: Storage) -> None:
        retries = [new_hand(f"x{i}", request_id="same", request_fingerprint=fp) for i in range(20)]
        made = await asyncio.gather(*(s.create_hands([retry]) for retry in retries))
        ids = {m[0].record.hand_id for m in made}
        assert len(ids) == 1
        assert {m[0].record.commit_index for m in made} == {0}
        assert sorted(m[0].found for m in made) == [False] + [True] * 19  # one stored, the rest found
        assert await s.log_size() == 1

    run(storage_engine, scenario)


def test_one_refused_hand_refuses_its_whole_call(storage_engine: Engine) -> None:
    """create_hands is atomic: a call with a reused request id stores none of its hands."""

    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand("a", request_id="r", request_fingerprint=b"1" * 32)])
        with pytest.raises(refusals.DealerError):
            await s.create_hands(
                [new_hand("b"), new_hand("c", request_id="r", request_fingerprint=b"2" * 32)]
            )
        assert await s.get_hand("t", "hb") is None
        assert await s.log_size() == 1

    run(storage_engine, scenario)


def test_update_runs_decide_on_the_stored_record(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand(0), new_hand(1)])
        seen: list[HandRecord] = []

        def decide(r: HandRecord) -> tuple[Change, str]:
            seen.append(r)
            return Change(replace(r, client_seeds=(b"s1",))), "ok"

        stored, result = await s.update_hand("t", "h0", decide)
        assert result == "ok" and seen[0].hand_id == "h0" and seen[0].client_seeds == ()
        assert stored.client_seeds == (b"s1",)
        assert await s.get_hand("t", "h0") == stored

        position = [(await s.update_hand("t", "h0", dealing(5)))[1] for _ in range(3)]
        assert position == [0, 5, 10]
        stored, result = await s.update_hand("t", "h0", closing(entry("reveal 0")))
        assert result == "closed" and stored.reveal_index == 2 and stored.state is StoredHandState.CLOSED
        assert await s.get_hand("t", "h0") == stored
        assert await s.entry_index("h0", reveal=True) == 2
        assert await s.log_entries(2, 3) == [entry("reveal 0")]
        # A decide that changes nothing writes nothing, and appends nothing.
        again, result = await s.update_hand("t", "h0", closing(entry("never")))
        assert (again, result) == (stored, "already")
        assert await s.log_size() == 3

    run(storage_engine, scenario)


def test_a_refused_update_writes_nothing_and_appends_nothing(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand(0)])
        before = await s.get_hand("t", "h0")

        def refuse(r: HandRecord) -> tuple[Change, None]:
            raise refusals.precondition("HAND_CLOSED", "the hand is closed")

        with pytest.raises(refusals.DealerError) as refused:
            await s.update_hand("t", "h0", refuse)
        assert refused.value.reason == "HAND_CLOSED"

        def broken(r: HandRecord) -> tuple[Change, None]:
            raise ValueError("a bug in decide")

        with pytest.raises(ValueError, match="a bug in decide"):
            await s.update_hand("t", "h0", broken)
        assert await s.get_hand("t", "h0") == before
        assert await s.log_size() == 1
        # The engine still works, and the next append takes the next index.
        stored, _ = await s.update_hand("t", "h0", closing(entry("r0")))
        assert stored.reveal_index == 1

    run(storage_engine, scenario)


def test_another_tenants_hand_cannot_be_updated(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand(0, tenant="a")])
        for tenant, hand_id in (("b", "h0"), ("a", "missing")):
            with pytest.raises(refusals.DealerError) as missing:
                await s.update_hand(tenant, hand_id, closing(entry("no")))
            assert missing.value.reason == "HAND_NOT_FOUND"
            assert missing.value.status is refusals.Status.NOT_FOUND
        stored = await s.get_hand("a", "h0")
        assert stored is not None and stored.state is StoredHandState.OPEN
        assert await s.log_size() == 1

    run(storage_engine, scenario)


def test_concurrent_updates_of_one_hand_see_each_other(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand(0), new_hand(1)])
        draws = [s.update_hand("t", "h0", dealing(1)) for _ in range(30)]
        closes = [s.update_hand("t", "h1", closing(entry(f"reveal {i}"))) for i in range(5)]
        done = await asyncio.gather(*draws, *closes)
        assert sorted(position for _, position in done[:30]) == list(range(30))
        assert [result for _, result in done[30:]].count("closed") == 1
        assert {stored.reveal_index for stored, _ in done[30:]} == {2}
        h0 = await s.get_hand("t", "h0")
        assert h0 is not None and h0.dealt == 30
        assert await s.log_size() == 3

    run(storage_engine, scenario)


def test_stale_and_open_hands(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands(
            [
                new_hand(1, created_ms=300),
                new_hand(2, created_ms=100, tenant="u"),
                new_hand(3, created_ms=200, state=StoredHandState.SHUFFLED),
                NewHand(
                    record(4, created_ms=50, state=StoredHandState.CLOSED, server_seed=b"s", closed_ms=60),
                    entry(4),
                    entry("r4"),
                ),
                new_hand(5, created_ms=1000),
            ]
        )
        assert await s.stale_hands(500, 10) == [("u", "h2", 100), ("t", "h3", 200), ("t", "h1", 300)]
        assert await s.stale_hands(500, 2) == [("u", "h2", 100), ("t", "h3", 200)]
        assert await s.stale_hands(100, 10) == []
        assert (await s.open_hands(), await s.open_hands("t"), await s.open_hands("u")) == (4, 3, 1)
        assert await s.open_hands("nobody") == 0
        await s.update_hand("t", "h3", closing(entry("r3")))
        assert await s.stale_hands(500, 10) == [("u", "h2", 100), ("t", "h1", 300)]
        assert (await s.open_hands(), await s.open_hands("t")) == (3, 2)

    run(storage_engine, scenario)


def test_closed_storage_refuses_calls(storage_engine: Engine) -> None:
    async def scenario() -> None:
        s = storage_engine.open()
        await s.start()
        await s.create_hands([new_hand(0)])
        await s.close()
        await s.close()  # idempotent
        with pytest.raises(refusals.DealerError) as closed:
            await s.create_hands([new_hand(1)])
        assert closed.value.reason == "STORAGE_UNAVAILABLE"

    asyncio.run(scenario())


def test_calls_made_before_start_wait_for_it(storage_engine: Engine) -> None:
    """The server accepts calls while storage opens (health says NOT_SERVING meanwhile)."""

    async def scenario() -> None:
        s = storage_engine.open()
        early = asyncio.gather(s.create_hands([new_hand(0)]), s.get_hand("t", "h0"), s.log_size())
        await hold_silent_async(0.05)  # storage not started yet: the calls wait
        assert not early.done()
        await s.start()
        try:
            made, _, _ = await asyncio.wait_for(early, 10)
            assert made[0].record.commit_index == 0
            assert await s.get_hand("t", "h0") == made[0].record
        finally:
            await s.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("column", "value"),
    [("deck", "no-such-deck"), ("client_seeds", b"\xff\xff\xff\xff\x00\x00"), ("state", 9)],
)
def test_a_damaged_row_fails_only_its_operations(storage_engine: Engine, column: str, value: Any) -> None:
    """A row quick_check passes but the dealer cannot read (a count of 4 billion seeds, an unknown
    deck, an unknown state): operations on that hand fail alone with HAND_UNREADABLE, naming the
    column, at once; operations on every other hand, in the same batch too, succeed."""

    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand(i) for i in range(4)])
        await _damage(storage_engine, s, "h0", column, value)
        results = await asyncio.gather(
            s.get_hand("t", "h0"),
            s.update_hand("t", "h0", closing(entry("r0"))),
            *(s.update_hand("t", f"h{i}", closing(entry(f"r{i}"))) for i in (1, 2, 3)),
            return_exceptions=True,
        )
        for failed in results[:2]:
            assert isinstance(failed, refusals.DealerError), failed
            assert failed.reason == "HAND_UNREADABLE" and column in str(failed)
        for ok in results[2:]:
            assert not isinstance(ok, BaseException), ok
        assert [r.state.name for r, _ in results[2:]] == ["CLOSED"] * 3  # type: ignore[union-attr]

    run(storage_engine, scenario)


async def _damage(engine: Engine, storage: Storage, hand_id: str, column: str, value: Any) -> None:
    """Write ``value`` into the hand's row behind the engine's back, as a bad sector or restore would."""
    sql = f"UPDATE hands SET {column} = %s WHERE hand_id = %s"
    if engine.name == "sqlite":
        with sqlite3.connect(storage._path) as db:  # type: ignore[attr-defined]
            db.execute(sql.replace("%s", "?"), (value, hand_id))
            assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        return
    async with storage._pool.connection() as conn:  # type: ignore[attr-defined]
        await conn.execute(sql, (value, hand_id))
