"""The co-dealt deck pool: decks made ahead, taken once (also across a restart), refilled round
robin across tenants. The dealer's side runs in process against a real in-process co-dealer
(``CoDealer`` over its own SQLite ledger), so the crypto and both stores are real."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.codeal.entries import SETUP, decode_entry
from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer, DeckPool
from fairdeck_server.dealing.codeal_log import CodealLog
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.dealer import Dealer, _new_hand_id
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.sqlite import SqliteStorage


class InProcessLink:
    """The CoDealerLink of a co-dealer in this process (the gRPC link minus the transport)."""

    def __init__(self, codealer: CoDealer) -> None:
        self.codealer = codealer

    async def announce(
        self, hand_id: str, deck: str, holder: int, holders: int
    ) -> tuple[bytes, bytes, bytes]:
        record, signature = self.codealer.announce(hand_id, deck, holder, holders)
        return record, signature, self.codealer.identity_key

    async def shuffle(
        self, hand_id: str, key_records: Sequence[bytes], shuffles: Sequence[bytes]
    ) -> tuple[bytes, bytes]:
        return self.codealer.shuffle(hand_id, key_records, shuffles)

    async def share(
        self, hand_id: str, position: int, seat_key: bytes, count: int, seats: Sequence[bytes] = ()
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        given = self.codealer.share(hand_id, position, seat_key, [], count, seats)
        return list(given.shares), list(given.sealed), list(given.seal_signatures)

    async def reveal(self, hand_id: str) -> tuple[bytes, list[tuple[int, bytes, bytes, bytes]]]:
        return self.codealer.reveal(hand_id), self.codealer.seal_statements(hand_id)

    async def identity(self) -> bytes:
        return self.codealer.identity_key

    async def close(self) -> None:
        pass


def make_dealer(tmp_path: Path) -> CodealDealer:
    """The co-dealt side over a real co-dealer in process, logging to a real SQLite log (started
    on a loop of its own: its calls work from any loop, and this may be called inside one)."""
    identity = Ed25519PrivateKey.from_private_bytes(bytes(32))
    codealer = CoDealer(Ledger(tmp_path / "codealer.db"), identity, SeedVault(bytes(range(32))))
    storage = SqliteStorage(tmp_path / "fairdeck.db")
    starting = threading.Thread(target=asyncio.run, args=(storage.start(),))
    starting.start()
    starting.join()
    vault = SeedVault(bytes(range(1, 33)))
    return CodealDealer(
        InProcessLink(codealer),
        codealer.identity_key,
        CodealStore(tmp_path / "codeal.db"),
        vault,
        log=CodealLog(Dealer(storage, vault)),
        new_hand_id=_new_hand_id,
        clock_ms=lambda: 1_700_000_000_000,
    )


async def close(dealer: CodealDealer) -> None:
    dealer.store.close()
    await dealer.log.dealer.storage.close()


def logged_setups(tmp_path: Path) -> list[str]:
    """The hand ids of the co-dealt setup entries in the log, in log order."""
    with sqlite3.connect(tmp_path / "fairdeck.db") as db:
        entries = [
            decode_entry(bytes(e)) for (e,) in db.execute("SELECT entry FROM log_entries ORDER BY idx")
        ]
    return [e.hand_id for e in entries if e.kind == SETUP]


def pooled(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "codeal.db") as db:
        return [r[0] for r in db.execute("SELECT hand_id FROM codeal_hands WHERE tenant = ''")]


async def fill(dealer: CodealDealer, pairs: list[tuple[str, str]], per_tenant: int) -> DeckPool:
    pool = DeckPool(dealer, per_tenant)
    dealer.pool = pool
    for tenant, deck in pairs:
        pool.wanted(tenant, deck)
    while (pair := await pool._next_short()) is not None:  # the refill loop's own steps, in turn
        await dealer.make_hand("", pair[1], pool_tenant=pair[0])
    return pool


def test_pooled_decks_are_taken_once_even_by_concurrent_opens_and_after_a_restart(tmp_path: Path) -> None:
    async def run() -> tuple[list[str], list[str], list[str]]:
        dealer = make_dealer(tmp_path)
        await fill(dealer, [("t1", "short")], 4)
        ready = pooled(tmp_path)
        assert logged_setups(tmp_path) == []  # a deck in the pool is no hand yet
        taken = await asyncio.gather(*(dealer.open_hand("t1", "short") for _ in range(3)))
        await close(dealer)
        again = make_dealer(tmp_path)  # a restart: the same files, a pool again (not refilling here)
        again.pool = DeckPool(again, 4)
        later = [await again.open_hand("t1", "short") for _ in range(2)]
        await close(again)
        return ready, [r.hand_id for r in taken], [r.hand_id for r in later]

    ready, taken, later = asyncio.run(run())
    # Each hand's setup is logged once, when its deck is taken (or made) for it; the deck left in
    # the pool is not in the log.
    assert sorted(logged_setups(tmp_path)) == sorted(taken + later)
    assert len(ready) == 4
    assert sorted(taken) == sorted(set(taken)) and set(taken) <= set(ready)
    assert later[0] in set(ready) - set(taken)  # the fourth pooled deck, after the restart
    assert later[1] not in ready + taken  # the pool was empty: made on demand
    assert len(set(taken + later)) == 5


def test_refills_take_turns_across_tenants(tmp_path: Path) -> None:
    async def run() -> list[tuple[str, str]]:
        dealer = make_dealer(tmp_path)
        pool = DeckPool(dealer, 2)
        for tenant in ("big", "small", "third"):
            pool.wanted(tenant, "short")
        order = []
        while (pair := await pool._next_short()) is not None:
            order.append(pair)
            await dealer.make_hand("", pair[1], pool_tenant=pair[0])
        await close(dealer)
        return order

    order = asyncio.run(run())
    assert [t for t, _ in order] == ["big", "small", "third", "big", "small", "third"]


def test_a_tenant_never_takes_another_tenants_pooled_deck(tmp_path: Path) -> None:
    async def run() -> tuple[list[str], str]:
        dealer = make_dealer(tmp_path)
        await fill(dealer, [("a", "short")], 2)
        ready = pooled(tmp_path)
        other = await dealer.open_hand("b", "short")
        await close(dealer)
        return ready, other.hand_id

    ready, other = asyncio.run(run())
    assert other not in ready and len(ready) == 2
