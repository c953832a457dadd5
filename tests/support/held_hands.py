"""The seat-release tests' table (docs/codealing-spec.md 9.3): a co-dealer with a hold and a
dealer's co-dealt side in this process, on real SQLite files and one injected clock, and the
refusal those tests check (SEATS_NOT_RELEASED naming ``seat_releases``). The fixtures
``held_table`` and ``held_table_factory`` (tests/support/fixtures.py) make one per test."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from fairdeck.client.codeal_seat import SeatKey
from fairdeck.wire import Reason
from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer, CodealDraw
from fairdeck_server.refusals import DealerError
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.codeal_pool import in_process, seat_tokens

T = TypeVar("T")

T0 = 1_700_000_000_000
HOLD_MS = 60_000
DECK = "short"
TENANT = "t1"


@dataclass
class HeldTable:
    """``codealer`` and ``dealer`` on the clock ``now[0]`` (from T0), files under ``directory``."""

    directory: Path
    now: list[int]
    hold_ms: int
    codealer: CoDealer
    dealer: CodealDealer
    storage: SqliteStorage

    def play(self, scene: Callable[[], Awaitable[T]]) -> T:
        """Run ``scene`` with the dealer's storage started; the dealer and its storage closed after."""

        async def run() -> T:
            await self.storage.start()
            try:
                return await scene()
            finally:
                await self.dealer.aclose()
                await self.storage.close()

        return asyncio.run(run())

    async def open_hand(self) -> str:
        return (await self.dealer.open_hand(TENANT, DECK)).hand_id

    async def draw(self, hand_id: str, count: int, seat: SeatKey | None = None) -> CodealDraw:
        """``count`` positions sealed to ``seat`` (public without one)."""
        return await self.dealer.draw(TENANT, hand_id, count, seat.public_key if seat else b"")

    def releases(self, hand_id: str, draw: CodealDraw, seat: SeatKey) -> list[bytes]:
        """The seat device's release tokens of the co-dealer's sealed shares of ``draw``."""
        return seat_tokens(hand_id, DECK, draw, seat)

    def reopened(self, ledger: Ledger) -> CoDealer:
        """This co-dealer (its keys, clock and hold) over ``ledger``: a restart, a restore."""
        codealer = self.codealer
        now = self.now
        return CoDealer(
            ledger, codealer.identity, codealer.vault, clock_ms=lambda: now[0], reveal_hold_ms=self.hold_ms
        )


def held_table(directory: Path, *, lifetime_ms: int = 0, reveal_hold_ms: int = HOLD_MS) -> HeldTable:
    """A table under ``directory``: the co-dealer ends hands after ``lifetime_ms`` (0: never)."""
    now = [T0]
    codealer, dealer, storage = in_process(directory, now, lifetime_ms, reveal_hold_ms)
    return HeldTable(directory, now, reveal_hold_ms, codealer, dealer, storage)


def not_released(error: DealerError) -> None:
    assert (error.reason, error.field) == (Reason.SEATS_NOT_RELEASED, "seat_releases"), error


def refused_reveal(codealer: CoDealer, hand_id: str, tokens: list[bytes] | None = None) -> DealerError:
    """RevealSeed refused for the seats' releases (``tokens`` None: called without any)."""
    with pytest.raises(DealerError) as e:
        codealer.reveal(hand_id, *([tokens] if tokens is not None else []))
    not_released(e.value)
    return e.value


async def refused_close(dealer: CodealDealer, hand_id: str, tokens: list[bytes] | None = None) -> None:
    """CloseHand refused for the seats' releases, the hand left open (``tokens`` None: called as
    the signature before releases was)."""
    with pytest.raises(DealerError) as e:
        if tokens is None:
            await dealer.close(TENANT, hand_id)
        else:
            await dealer.close(TENANT, hand_id, releases=tokens)
    not_released(e.value)
    assert (await dealer.get(TENANT, hand_id)).closed_ms is None
