"""The players' commit-then-reveal seed protocol in the SDK, against a real dealer on loopback.

The order is the protection: a seed that exists before the dealer's commitment, or that is
seen before every seat has committed, is one someone can grind the deck against.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fairdeck.client import AsyncDealerClient, DealerClient, PlayerSeed, SeedOrderError, SeedRound
from fairdeck.client.player_seeds import SDK_SEED_PREFIX, seed_commitment
from fairdeck.core.errors import VerificationError
from tests.support.dealers import RunningDealer


@pytest.fixture(scope="module")
def target(unlimited_dealer: RunningDealer) -> str:
    return unlimited_dealer.target


def test_a_table_of_three_deals_with_the_players_seeds(target: str) -> None:
    with DealerClient(target) as dealer:
        hand = dealer.open_hand("standard")
        players = [PlayerSeed.create(hand.hand_id, seat, hand.commitment) for seat in range(3)]
        table = SeedRound(hand.hand_id, hand.commitment, seats=3)
        for p in players:
            table.commit(p.seat, p.commitment)
        for p in players:
            table.reveal(p.seat, p.reveal(table.commitments))
        dealer.shuffle(hand.hand_id, table.seeds)
        dealt = dealer.draw(hand.hand_id, 5).cards
        closed = dealer.close_hand(hand.hand_id)
    assert closed.client_seeds == tuple(p.seed for p in players)
    closed.verify(commitment=hand.commitment, dealt=dealt)


def test_a_seed_that_does_not_open_its_commitment_is_refused_naming_the_seat() -> None:
    table = SeedRound("h", bytes(32), seats=2)
    alice, bob = (PlayerSeed.create("h", seat, bytes(32)) for seat in range(2))
    table.commit(0, alice.commitment)
    table.commit(1, bob.commitment)
    table.reveal(0, alice.seed)
    with pytest.raises(VerificationError, match="seat 1's revealed seed does not open") as e:
        table.reveal(1, bytes(32))
    assert e.value.step == "seeds"
    with pytest.raises(VerificationError):  # a seed copied from another seat opens nothing here
        table.reveal(1, alice.seed)
    with pytest.raises(SeedOrderError):
        _ = table.seeds


def test_a_commitment_binds_the_hand_the_dealer_commitment_and_the_seat() -> None:
    seed = bytes(range(32))
    base = seed_commitment("h", bytes(32), 0, seed)
    assert seed_commitment("h2", bytes(32), 0, seed) != base
    assert seed_commitment("h", bytes([1]) * 32, 0, seed) != base
    assert seed_commitment("h", bytes(32), 1, seed) != base
    replayed = PlayerSeed("h", 0, bytes(32), seed)
    table = SeedRound("h", bytes([1]) * 32, seats=1)  # another dealer commitment: another hand
    table.commit(0, replayed.commitment)
    with pytest.raises(VerificationError):
        table.reveal(0, seed)


def test_the_order_is_enforced() -> None:
    """Nothing before the dealer's commitment; no reveal before every commitment; no commitment
    after a reveal; each seat once; the seeds only when every seat revealed."""
    for no_commitment in (b"", bytes(31), None):
        with pytest.raises(SeedOrderError):
            PlayerSeed.create("h", 0, no_commitment)  # type: ignore[arg-type]
        with pytest.raises(SeedOrderError):
            SeedRound("h", no_commitment, seats=2)  # type: ignore[arg-type]
    table = SeedRound("h", bytes(32), seats=2)
    alice, bob = (PlayerSeed.create("h", seat, bytes(32)) for seat in range(2))
    table.commit(0, alice.commitment)
    with pytest.raises(SeedOrderError, match=r"seats \[1\] have not committed"):
        table.reveal(0, alice.seed)
    with pytest.raises(SeedOrderError):
        table.commit(0, alice.commitment)
    table.commit(1, bob.commitment)
    table.reveal(0, alice.seed)
    with pytest.raises(SeedOrderError, match="after a reveal"):
        table.commit(1, bob.commitment)
    with pytest.raises(SeedOrderError):
        table.reveal(0, alice.seed)
    with pytest.raises(ValueError):
        table.reveal(2, alice.seed)
    with pytest.raises(VerificationError):  # a player checks its own commitment is at its seat
        bob.reveal((bob.commitment, alice.commitment))
    table.reveal(1, bob.reveal(table.commitments))
    assert table.seeds == (alice.seed, bob.seed)


def test_a_shuffle_without_seeds_gets_a_fresh_sdk_seed_marked_in_the_transcript(target: str) -> None:
    seeds = []
    with DealerClient(target) as dealer:
        for _ in range(2):
            hand = dealer.open_hand("short")
            dealer.shuffle(hand.hand_id)
            dealt = dealer.draw(hand.hand_id, 3).cards
            closed = dealer.close_hand(hand.hand_id)
            closed.verify(commitment=hand.commitment, dealt=dealt)
            (seed,) = closed.client_seeds
            assert seed.startswith(SDK_SEED_PREFIX.encode()) and len(seed) == len(SDK_SEED_PREFIX) + 64
            assert closed.transcript is not None and closed.transcript.client_seeds == (seed,)
            seeds.append(seed)
    assert seeds[0] != seeds[1]

    async def through_asyncio() -> bytes:
        async with AsyncDealerClient(target) as dealer:
            hand = await dealer.open_hand("standard")
            await dealer.shuffle(hand.hand_id)
            closed = await dealer.close_hand(hand.hand_id)
            return closed.client_seeds[0]

    assert asyncio.run(through_asyncio()).startswith(SDK_SEED_PREFIX.encode())


def test_seeds_the_game_server_passes_are_used_as_they_are(target: str) -> None:
    with DealerClient(target) as dealer:
        hand = dealer.open_hand("standard")
        dealer.shuffle(hand.hand_id, [b"\x01" * 32])
        closed = dealer.close_hand(hand.hand_id)
    assert closed.client_seeds == (b"\x01" * 32,)


def test_the_readme_sdk_snippet_runs_as_written(target: str) -> None:
    """The README shows only the safe protocol; its snippet deals and verifies against a dealer."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (snippet,) = [block for block in readme.split("```python\n")[1:] if "SeedRound" in block.split("```")[0]]
    code = snippet.split("```")[0].replace('"127.0.0.1:50051"', repr(target))
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    closed = namespace["closed"]
    assert len(closed.client_seeds) == 2  # type: ignore[attr-defined]
