"""``create_batch`` (a DealHands slice) on both engines stores exactly what ``create_hands`` of
the same hands stores: the same rows, read back as the same records, the entries at consecutive
indexes (each hand's commit, then its reveal when created closed), and the same Merkle tree; and
a batch and single creations committed together in one transaction keep one gap-free log."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from fairdeck_server.storage.base import HandBatch, HandRecord, Storage, StoredHandState
from tests.support.engines import Engine, entry, naive_root, new_hand, run


def batch(
    closed: bool, n: int = 5, *, prefix: str = "b", seeds: tuple[bytes, ...] = (b"s1", b"s2")
) -> HandBatch:
    ids = [f"{prefix}{i}" for i in range(n)]
    entries = []
    for h in ids:
        entries.append(entry(f"commit {h}"))
        if closed:
            entries.append(entry(f"reveal {h}"))
    return HandBatch(
        tenant="t",
        deck="standard",
        version="fairdeck-v1",
        client_seeds=seeds,
        closed=closed,
        dealt=52,
        created_ms=1234,
        hand_ids=ids,
        commitments=[bytes([i]) * 32 for i in range(n)],
        sealed_seeds=[b""] * n if closed else [b"sealed%d" % i for i in range(n)],
        server_seeds=[bytes([i]) * 45 for i in range(n)] if closed else None,
        entries=entries,
    )


def expected(b: HandBatch, first: int) -> list[HandRecord]:
    """The records ``create_hands`` would have stored for the same hands."""
    k = b.step
    return [
        HandRecord(
            tenant=b.tenant,
            hand_id=h,
            request_id=None,
            deck=b.deck,
            version=b.version,
            commitment=b.commitments[i],
            sealed_seed=b.sealed_seeds[i],
            client_seeds=b.client_seeds,
            state=b.state,
            dealt=b.dealt,
            created_ms=b.created_ms,
            commit_index=first + i * k,
            closed_ms=b.created_ms if b.closed else None,
            server_seed=b.server_seeds[i] if b.server_seeds is not None else None,
            reveal_index=first + i * k + 1 if b.closed else None,
        )
        for i, h in enumerate(b.hand_ids)
    ]


@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
def test_a_batch_is_stored_as_its_hands_one_by_one_would_be(storage_engine: Engine, closed: bool) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand("first")])
        b = batch(closed)
        first = await s.create_batch(b)
        assert first == 1
        for want in expected(b, first):
            assert await s.get_hand("t", want.hand_id) == want
            assert await s.get_hand("other", want.hand_id) is None  # a tenant's hands are its own
        size = await s.log_size()
        entries = await s.log_entries(0, size)
        assert entries == [entry("first"), *b.entries]
        assert (await s.log_head())[1] == naive_root(entries)
        assert await s.open_hands("t") == 1 + (0 if closed else len(b))
        assert await s.entry_index("b3", reveal=closed) == first + 3 * b.step + (1 if closed else 0)

    run(storage_engine, scenario)


def test_batches_and_single_hands_committed_together_keep_one_log(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand("warm")])
        parts = [batch(True, 3, prefix="x"), batch(False, 4, prefix="y")]
        singles = [[new_hand(f"s{i}")] for i in range(3)]
        results = await asyncio.gather(  # queued in one turn: written together
            s.create_batch(parts[0]), *(s.create_hands(h) for h in singles), s.create_batch(parts[1])
        )
        firsts = [results[0], results[-1]]
        for b, first in zip(parts, firsts, strict=True):
            for want in expected(b, first):
                assert await s.get_hand("t", want.hand_id) == want
        single_indexes = [created[0].record.commit_index for created in results[1:-1]]
        size = await s.log_size()
        taken = sorted(
            [i for b, f in zip(parts, firsts, strict=True) for i in range(f, f + len(b.entries))]
            + single_indexes
        )
        assert taken == list(range(1, size))  # every index once, no gap
        entries = await s.log_entries(0, size)
        assert (await s.log_head())[1] == naive_root(entries)
        for b, first in zip(parts, firsts, strict=True):
            assert entries[first : first + len(b.entries)] == b.entries

    run(storage_engine, scenario)


def test_a_closed_batch_keeps_no_sealed_seed_and_its_hands_still_read(storage_engine: Engine) -> None:
    """A hand created closed has its seed in its row and in the log: nothing is sealed for it."""

    async def scenario(s: Storage) -> None:
        b = batch(True, 2)
        first = await s.create_batch(b)
        stored = await s.get_hand("t", "b1")
        assert stored is not None and stored.sealed_seed == b"" and stored.server_seed == bytes([1]) * 45
        assert stored == replace(expected(b, first)[1], state=StoredHandState.CLOSED)

    run(storage_engine, scenario)
