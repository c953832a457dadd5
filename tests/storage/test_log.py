"""The Storage contract for the transparency log, on every engine: stored
roots equal RFC 9162 roots computed naively across restarts at many sizes,
proofs verify, checkpoints are compare-and-swap with one root per size,
concurrent appends give a gap-free log, and a refused operation takes its
appends with it."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace

import pytest

from fairdeck.log import merkle
from fairdeck.log.logentry import CommitEntry
from fairdeck_server import refusals
from fairdeck_server.storage.base import HandBatch, LogForkError, NewHand, Storage
from tests.support.engines import Engine, closing, entry, naive_root, new_hand, record, records, run


@pytest.mark.parametrize("batches", [[1] * 20, [3, 5, 8, 13, 1, 1, 64], [255, 2, 257]])
def test_stored_roots_equal_naive_roots_across_restarts(storage_engine: Engine, batches: list[int]) -> None:
    """Append batches of hands, restarting the engine between batches."""
    n = 0
    for size in batches:

        async def append(s: Storage, start: int = n, size: int = size) -> tuple[int, bytes, list[bytes]]:
            await s.create_hands([new_hand(i) for i in range(start, start + size)])
            stored_size, root = await s.log_head()
            return stored_size, root, await s.log_entries(0, start + size + 5)

        n += size
        stored_size, root, entries = run(storage_engine, append)
        assert stored_size == n
        assert entries == [entry(i) for i in range(n)]
        assert root == naive_root(entries), f"root differs at size {n}"


def test_an_empty_log(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        assert await s.log_head() == (0, merkle.EMPTY_ROOT)
        assert await s.log_size() == 0
        assert await s.log_entries(0, 10) == []
        assert await s.checkpoint() is None

    run(storage_engine, scenario)


def test_proofs_verify_against_naive_roots(storage_engine: Engine) -> None:
    entries = [entry(i) for i in range(70)]
    leaves = [merkle.leaf_hash(e) for e in entries]

    async def scenario(s: Storage) -> None:
        for start in range(0, 70, 9):  # several commits, so hashes span batches
            await s.create_hands([new_hand(i) for i in range(start, min(70, start + 9))])
        for size in (1, 2, 3, 7, 8, 9, 31, 32, 33, 64, 69, 70):
            root = merkle.root(leaves[:size])
            for index in sorted({0, size // 2, size - 1}):
                proof = await s.inclusion_proof(index, size)
                merkle.verify_inclusion(index, size, leaves[index], proof, root)
            for size1 in sorted({1, size // 3 or 1, size - 1 or 1, size}):
                proof = await s.consistency_proof(size1, size)
                merkle.verify_consistency(size1, size, proof, merkle.root(leaves[:size1]), root)
        with pytest.raises(merkle.ProofError):  # a proof of one leaf is not one of another
            merkle.verify_inclusion(3, 70, leaves[4], await s.inclusion_proof(3, 70), merkle.root(leaves))

    run(storage_engine, scenario)


def test_cosignatures_are_added_to_a_stored_checkpoint_once(storage_engine: Engine) -> None:
    """Witness cosignature lines join the stored note (each once); the text and root never change."""
    a, b = "\u2014 witness.test/a AAAA\n", "\u2014 witness.test/b BBBB\n"

    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand(i) for i in range(4)])
        root = naive_root(await s.log_entries(0, 4))
        note = b"origin\n4\nroot\n\n\xe2\x80\x94 origin sig\n"
        await s.put_checkpoint(4, root, note, 1)
        assert await s.add_cosignatures(9, [a]) is None  # no checkpoint of that size
        one = await s.add_cosignatures(4, [a])
        assert one is not None and one.note == note + a.encode()
        both = await s.add_cosignatures(4, [a, b, b])
        assert both is not None and both.note == note + (a + b).encode() and both.root == root
        stored = await s.checkpoint(4)
        assert stored is not None and stored.note == both.note
        assert (await s.checkpoint()) == stored

    run(storage_engine, scenario)


def test_checkpoints_are_compare_and_swap(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        await s.create_hands([new_hand(i) for i in range(10)])
        entries = await s.log_entries(0, 10)
        root5, root10 = naive_root(entries[:5]), naive_root(entries)

        head = await s.put_checkpoint(5, root5, b"note 5", 1)
        assert (head.size, head.root, head.note) == (5, root5, b"note 5")
        again = await s.put_checkpoint(5, root5, b"another note", 2)  # same root: the stored one stays
        assert (again.size, again.note) == (5, b"note 5")
        with pytest.raises(LogForkError):  # a second root for a signed size
            await s.put_checkpoint(5, root10, b"fork", 3)
        with pytest.raises(LogForkError):  # a root that is not the stored tree's
            await s.put_checkpoint(7, root10, b"wrong", 3)
        with pytest.raises(LogForkError):  # a tree larger than the log
            await s.put_checkpoint(11, root10, b"future", 3)

        head = await s.put_checkpoint(10, root10, b"note 10", 4)
        assert (head.size, head.note) == (10, b"note 10")
        older = await s.put_checkpoint(8, naive_root(entries[:8]), b"note 8", 5)  # behind the head
        assert (older.size, older.note) == (10, b"note 10")
        assert await s.checkpoint(8) is None

        latest = await s.checkpoint()
        assert latest is not None and (latest.size, latest.root) == (10, root10)
        at5 = await s.checkpoint(5)
        assert at5 is not None and (at5.root, at5.note) == (root5, b"note 5")
        assert await s.log_head() == (10, root10)

    run(storage_engine, scenario)


def test_concurrent_appends_make_one_gap_free_log(storage_engine: Engine) -> None:
    async def worker(s: Storage, w: int) -> list[tuple[str, int, bytes]]:
        """Create hands and close some; every acknowledged append as (hand, index, entry)."""
        out = []
        for i in range(8):
            hand = f"w{w}-{i}"
            made = records(await s.create_hands([new_hand(hand), new_hand(f"{hand}b")]))
            out += [(h.hand_id, h.commit_index, entry(h.hand_id[1:])) for h in made]
            if i % 2:
                stored, _ = await s.update_hand("t", f"h{hand}", closing(entry(f"reveal {hand}")))
                assert stored.reveal_index is not None
                out.append((stored.hand_id, stored.reveal_index, entry(f"reveal {hand}")))
        return out

    async def scenario(s: Storage) -> None:
        acked = [a for w in await asyncio.gather(*(worker(s, w) for w in range(24))) for a in w]
        size, root = await s.log_head()
        entries = await s.log_entries(0, size + 10)
        assert size == len(acked) == len(entries) == 24 * (16 + 4)
        assert sorted(index for _, index, _ in acked) == list(range(size))  # gap-free, no index twice
        for _hand, index, data in acked:
            assert entries[index] == data
        assert root == naive_root(entries)

    run(storage_engine, scenario)


def test_a_refused_operation_rolls_back_its_appends(storage_engine: Engine) -> None:
    """The second hand's insert fails after both appends were computed: neither
    entry stays, and the next append takes the next free index."""

    async def scenario(s: Storage) -> tuple[int, bytes, list[bytes]]:
        await s.create_hands([new_hand(i) for i in range(5)])
        clash = replace(record(0), request_id=None)  # the same hand id again

        with pytest.raises((refusals.DealerError, sqlite3.IntegrityError)) as refused:
            await s.create_hands([new_hand(5), NewHand(clash, entry(99))])
        if isinstance(refused.value, refusals.DealerError):  # PostgreSQL: the batch is not recorded
            assert refused.value.reason == "STORAGE_UNAVAILABLE"
        await s.create_hands([new_hand(6)])
        size, root = await s.log_head()
        return size, root, await s.log_entries(0, 10)

    size, root, entries = run(storage_engine, scenario)
    assert size == 6
    assert entries == [entry(i) for i in (0, 1, 2, 3, 4, 6)]
    assert root == naive_root(entries)


def test_two_storages_on_one_database_make_one_log(storage_engine: Engine) -> None:
    """Two engines on one database, as two replicas or two `serve --processes` processes: their
    appends interleave into one gap-free log whose every stored hash is right, and each sees
    the other's entries in its roots, proofs and checkpoints. (On SQLite each writer once kept
    its own idea of the log's size and right edge, so their appends collided: UNIQUE constraint
    failed: log_entries.idx. SQLite's writers also take turns by the writers' flock, which wakes
    the next at once; SQLite's own busy wait polls with sleeps of up to 100 ms.)"""

    async def scenario() -> None:
        a, b = storage_engine.open_replica(), storage_engine.open_replica()
        await a.start()
        await b.start()
        try:

            async def worker(s: Storage, name: str) -> list[tuple[int, bytes]]:
                out = []
                for i in range(30):
                    made = records(await s.create_hands([new_hand(f"{name}{i}")]))
                    out.append((made[0].commit_index, entry(f"{name}{i}")))
                    if i % 3 == 0:
                        stored, _ = await s.update_hand(
                            "t", f"h{name}{i}", closing(entry(f"reveal {name}{i}"))
                        )
                        assert stored.reveal_index is not None
                        out.append((stored.reveal_index, entry(f"reveal {name}{i}")))
                return out

            acked = [
                x for w in await asyncio.gather(worker(a, "a"), worker(b, "b"), worker(a, "c")) for x in w
            ]
            size_a, root_a = await a.log_head()
            size_b, root_b = await b.log_head()
            entries = await b.log_entries(0, size_a + 10)
            assert size_a == size_b == len(acked) == len(entries) == 3 * 40
            assert sorted(i for i, _ in acked) == list(range(size_a))
            assert all(entries[i] == data for i, data in acked)
            assert root_a == root_b == naive_root(entries)
            for s in (a, b):
                for index in (0, size_a // 2, size_a - 1):
                    proof = await s.inclusion_proof(index, size_a)
                    merkle.verify_inclusion(index, size_a, merkle.leaf_hash(entries[index]), proof, root_a)
            stored = await a.put_checkpoint(size_a, root_a, b"note", 1)
            assert (await b.put_checkpoint(size_a, root_a, b"note", 1)) == stored
        finally:
            await a.close()
            await b.close()

    asyncio.run(scenario())


def test_entry_times_never_go_backwards_across_writers(storage_engine: Engine) -> None:
    """Two writers on one database (replicas, or processes of ``serve --processes``), one of them
    stamping its entries earlier than the other (a clock a little behind, a batch that waited for
    the log lock): every stored entry's time is at least the one before it, and what each writer
    acknowledged is in the tree exactly as stored (its leaf was hashed after the time was raised)."""

    def stamped(i: str, time_ms: int) -> NewHand:
        e = CommitEntry(time_ms, f"h{i}", "fairdeck-v1", "standard", bytes(32)).encode()
        return NewHand(record(i), e)

    async def scenario() -> None:
        ahead, behind = storage_engine.open_replica(), storage_engine.open_replica()
        await ahead.start()
        await behind.start()
        try:
            base = 1_750_000_000_000
            for i in range(10):
                await ahead.create_hands([stamped(f"a{i}", base + 1000 * i)])
                await behind.create_hands([stamped(f"b{i}", base + 1000 * i - 500), stamped(f"c{i}", base)])
            size, root = await ahead.log_head()
            entries = await behind.log_entries(0, size)
            times = [int.from_bytes(e[5:13], "big") for e in entries]  # time_ms, after magic and type
            assert times == sorted(times), times
            assert times[-1] == base + 9000
            assert root == naive_root(entries)
            for s in (ahead, behind):  # and each writer's next append continues the same tree
                await s.create_hands([stamped(f"z{id(s)}", base)])
            size, root = await ahead.log_head()
            assert root == naive_root(await behind.log_entries(0, size))
        finally:
            await ahead.close()
            await behind.close()

    asyncio.run(scenario())


def test_entries_alone_are_appended_in_order_between_hands(storage_engine: Engine) -> None:
    """A batch of no hands (``HandBatch.of_entries``: the co-dealt entries) appends its entries
    in order, durably (a restart reads them back), returns the first one's index, touches no hand,
    and raises an entry's time to the latest before it as for every entry."""
    late = CommitEntry(2_000, "h0", "fairdeck-v1", "standard", bytes(32)).encode()
    early = [b"FDL1\x03" + (1_000).to_bytes(8, "big") + b"co-dealt", b"FDL1\x04" + bytes(8) + b"shuffle"]

    async def write(s: Storage) -> tuple[int, int, int]:
        await s.create_hands([NewHand(record(0), late)])
        first = await s.create_batch(HandBatch.of_entries("t", early))
        (after,) = await s.create_hands([new_hand(1)])
        return first, after.record.commit_index, await s.open_hands()

    async def read(s: Storage) -> tuple[list[bytes], tuple[int, bytes]]:
        return await s.log_entries(0, 10), await s.log_head()

    first, after, open_hands = run(storage_engine, write)
    assert (first, after, open_hands) == (1, 3, 2)
    entries, (size, root) = run(storage_engine, read)
    raised = [e[:5] + (2_000).to_bytes(8, "big") + e[13:] for e in early]  # never earlier than h0's
    assert entries == [late, *raised, entry(1)]
    assert size == 4 and root == naive_root(entries)
