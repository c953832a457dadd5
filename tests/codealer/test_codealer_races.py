"""Two calls at once at the co-dealer: ShuffleDeck twins for one hand (a real ``fairdeck codealer``
process), and its decoded-hand cache evicted by worker threads at once (a real ledger)."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import grpc
import pytest

from fairdeck.client.exceptions import from_rpc_error
from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import initial_deck
from fairdeck.codeal.keys import KeyRecord, new_holder
from fairdeck.codeal.proof import prove_shuffle
from fairdeck.codeal.record import sign_shuffle
from fairdeck.codeal.shuffle import permutation, randomness, shuffle_deck
from fairdeck.core.decks import DeckSpec
from fairdeck.core.seeds import server_seed_length
from fairdeck.v1 import codealer_pb2
from fairdeck_server.codealer import holder
from tests.support.codeal_pool import make_dealer
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.forked_serve import ServeForker
from tests.support.waits import pace


@pytest.fixture
def codealer(tmp_path: Path, serve_forker: ServeForker) -> Iterator[CodealerProcess]:
    init_codealer(tmp_path / "cd1")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as process:
        yield process


def dealer_shuffles(
    hand_id: str, deck: str, theirs: bytes, seeds: list[int]
) -> tuple[list[bytes], list[bytes]]:
    """The key records of a hand (the dealer's, then the co-dealer's ``theirs``) and one valid
    dealer shuffle per seed: two honest-looking but different first shuffles of one hand."""
    rand = random.Random(7).randbytes
    spec = DeckSpec.parse(deck)
    mine = new_holder(spec, hand_id, 0, rand)
    keys = [mine.record.encode(), theirs]
    records = [KeyRecord.decode(r, k) for k, r in enumerate(keys)]
    ctx = HandContext(spec, hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
    shuffles = []
    for n in seeds:
        seed = random.Random(n).randbytes(server_seed_length(spec))
        before = initial_deck(spec)
        psi, rs = permutation(spec, hand_id, 0, seed), randomness(spec, hand_id, 0, seed)
        after = shuffle_deck(before, psi, rs, ctx.joint_key)
        proof = prove_shuffle(ctx, 0, before, after, psi, rs, rand)
        shuffles.append(sign_shuffle(ctx, 0, before, after, proof, mine.x, rand).encode())
    return keys, shuffles


def at_once(calls: list[object]) -> list[object]:
    """Run ``calls`` in threads released together; each one's result or exception."""
    results: list[object] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = calls[i]()  # type: ignore[operator]
        except Exception as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_shuffle_deck_race_two_concurrent_calls_from_other_inputs_do_not_both_get_one_shuffle(
    codealer: CodealerProcess,
) -> None:
    """Two ShuffleDeck calls for one hand at once, from different dealer shuffles, both read the
    hand unshuffled, both worked, and the second was answered the first's record: a shuffle of a
    deck it was never given, where one after the other is refused HAND_ALREADY_SHUFFLED. The
    co-dealer now runs them one at a time: one shuffle, and the other call refused."""
    direct = codealer.stub()
    for i in range(4):
        hand_id = f"race-{i}"
        announced = direct.AnnounceHand(
            codealer_pb2.AnnounceHandRequest(hand_id=hand_id, deck="standard", holder=1, holder_count=2)
        )
        keys, (a, b) = dealer_shuffles(hand_id, "standard", announced.key_record, [1, 2])
        requests = [
            codealer_pb2.ShuffleDeckRequest(hand_id=hand_id, key_records=keys, shuffle_records=[own])
            for own in (a, b)
        ]
        results = at_once([lambda r=r: direct.ShuffleDeck(r, timeout=60) for r in requests])
        answered = [r for r in results if isinstance(r, codealer_pb2.ShuffleDeckResponse)]
        refused = [from_rpc_error(r) for r in results if isinstance(r, grpc.RpcError)]
        assert len(answered) == 1, f"{len(answered)} of 2 calls answered, from different inputs"
        assert [(e.code.name, e.reason) for e in refused] == [
            ("FAILED_PRECONDITION", "HAND_ALREADY_SHUFFLED")
        ]
        # Asked again with its own inputs, the answered call's shuffle is the one on record.
        winner = requests[results.index(answered[0])]
        assert direct.ShuffleDeck(winner, timeout=60) == answered[0]


def test_shuffle_deck_twins_with_the_same_inputs_get_the_same_record(codealer: CodealerProcess) -> None:
    direct = codealer.stub()
    announced = direct.AnnounceHand(
        codealer_pb2.AnnounceHandRequest(hand_id="twins", deck="standard", holder=1, holder_count=2)
    )
    keys, (own,) = dealer_shuffles("twins", "standard", announced.key_record, [1])
    request = codealer_pb2.ShuffleDeckRequest(hand_id="twins", key_records=keys, shuffle_records=[own])
    results = at_once([lambda: direct.ShuffleDeck(request, timeout=60)] * 3)
    assert all(isinstance(r, codealer_pb2.ShuffleDeckResponse) for r in results), results
    assert len({r.SerializeToString() for r in results}) == 1  # type: ignore[attr-defined]


def interleaved(function: str) -> Callable[..., object]:
    """A thread trace function that yields the GIL between every bytecode of ``function`` (in the
    co-dealer's holder): threads run through it interleaved, as a loaded machine may run them."""

    def each_opcode(frame: FrameType, event: str, arg: object) -> object:
        if event == "opcode":
            pace(0.0001)
        return each_opcode

    def calls(frame: FrameType, event: str, arg: object) -> object:
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == holder.__name__:
            frame.f_trace_opcodes = True
            return each_opcode
        return None

    return calls


def test_cache_eviction_keyerror_worker_threads_evicting_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shares run in worker threads; with the decoded-hand cache full, two of them evicting at
    once picked the same oldest hand and the second's pop raised KeyError (or found the cache
    already empty: StopIteration), and the share call failed INTERNAL. Eviction now holds the
    cache's lock."""
    dealer = make_dealer(tmp_path)
    codealer = dealer.link.codealer  # type: ignore[attr-defined]
    hand_ids = [asyncio.run(dealer.make_hand("t", "short")).hand_id for _ in range(4)]
    monkeypatch.setattr(holder, "CACHE_HANDS", 1)
    for hand_id in hand_ids:
        codealer.share(hand_id, 0, b"", [], 1)  # position 0, public: a retry from then on
    failures: list[BaseException] = []

    def worker(offset: int) -> None:
        try:
            for n in range(12):
                codealer.share(hand_ids[(offset + n) % len(hand_ids)], 0, b"", [], 1)
        except BaseException as e:  # StopIteration too
            failures.append(e)

    threading.settrace(interleaved("_hand_state"))  # type: ignore[arg-type]
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
    finally:
        threading.settrace(None)
    for t in threads:
        t.join(timeout=300)
    assert not failures, failures[:3]
    assert len(codealer._cache) <= 1


def test_a_get_racing_the_first_void_pinned_the_open_row_and_the_hand_never_read_closed(
    tmp_path: Path,
) -> None:
    """The flake of the dealer back after the co-dealer ended its hand: its first reaper pass voided
    the hand while a GetHand read the row. The GetHand's read (open) ended after the void had kept
    and closed its own, and replaced it in the dealer's row cache: the hand read open for ever
    (and the reaper, seeing it closed in codeal.db, had nothing left to do). Forced here: the
    GetHand's read is held between reading and returning until the void is done."""
    from tests.support.codeal_pool import close as close_dealer

    dealer = make_dealer(tmp_path)
    real_get = dealer.store.get
    read, release = threading.Event(), threading.Event()
    held = [True]

    def slow_get(hand_id: str):  # type: ignore[no-untyped-def]
        row = real_get(hand_id)
        if held[0]:  # the first read (the GetHand's): read now, answered after the void
            held[0] = False
            read.set()
            assert release.wait(30)
        return row

    async def run() -> tuple[object, object]:
        hand_id = (await dealer.open_hand("t", "short")).hand_id
        await dealer.draw("t", hand_id, 2, b"")
        dealer._rows.clear()  # a dealer just started: nothing cached
        dealer.store.get = slow_get  # type: ignore[method-assign]
        reading = asyncio.create_task(dealer.get("t", hand_id))
        await asyncio.to_thread(read.wait, 30)
        voided = await dealer.close("t", hand_id, voided=True)
        release.set()
        await reading
        after = await dealer.get("t", hand_id)
        await close_dealer(dealer)
        return voided.closed_ms, after.closed_ms

    voided, after = asyncio.run(run())
    assert voided is not None
    assert after == voided  # the hand reads closed, as it is stored
