"""The co-dealt side of a dealer in this process over a real in-process co-dealer
(``InProcessLink``: the gRPC link minus the transport), real SQLite files for its store and log,
and what the pool and log tests read back (pooled decks, logged setups, the log's entries)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.client.codeal_seat import SeatKey
from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, SHARES, SHUFFLE, decode_entry
from fairdeck.codeal.seal import seat_release
from fairdeck.core.decks import DeckSpec
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from fairdeck_server.codealer.holder import DEFAULT_REVEAL_HOLD_MS, CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer, CodealDraw, DeckPool
from fairdeck_server.dealing.codeal_log import CodealLog
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.dealer import Dealer, _new_hand_id
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.logs import read_entries


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

    async def reveal(
        self, hand_id: str, releases: Sequence[bytes] = ()
    ) -> tuple[bytes, list[tuple[int, bytes, bytes, bytes]]]:
        return self.codealer.reveal(hand_id, releases), self.codealer.seal_statements(hand_id)

    async def identity(self) -> bytes:
        return self.codealer.identity_key

    async def close(self) -> None:
        pass


def seat_tokens(hand_id: str, deck: str, draw: CodealDraw, seat: SeatKey) -> list[bytes]:
    """The seat device's release tokens (spec 9.3) of the co-dealer's sealed shares of ``draw``."""
    spec = DeckSpec.parse(deck)
    return [
        seat_release(spec, hand_id, draw.position + i, 1, shares[1], seat.secret)
        for i, shares in enumerate(draw.shares)
    ]


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


def log_of(tmp_path: Path) -> list[bytes]:
    with sqlite3.connect(tmp_path / "fairdeck.db") as db:
        return [bytes(e) for (e,) in db.execute("SELECT entry FROM log_entries ORDER BY idx")]


CODEALT = (SETUP, SHUFFLE, SHARES, SEALS, SEEDS)


def hand_of(stub: dealer_pb2_grpc.DealerServiceStub, hand_id: str) -> pb.Hand:
    return stub.GetHand(pb.GetHandRequest(hand_id=hand_id), timeout=60).hand


def logged(data_dir: Path, hand_id: str) -> list[int]:
    return [e[4] for e in read_entries(data_dir) if e[4] in CODEALT and decode_entry(e).hand_id == hand_id]


def in_process(
    tmp_path: Path, now: list[int], lifetime_ms: int = 0, reveal_hold_ms: int = DEFAULT_REVEAL_HOLD_MS
) -> tuple[CoDealer, CodealDealer, SqliteStorage]:
    """A co-dealer (its hand lifetime ``lifetime_ms``; 0: it never ends a hand; its hold
    ``reveal_hold_ms``) and a dealer's co-dealt side in this process, on real SQLite files under
    ``tmp_path``, both on the clock ``now[0]``; the dealer's storage is not started."""
    codealer = CoDealer(
        Ledger(tmp_path / "codealer.db"),
        Ed25519PrivateKey.from_private_bytes(bytes(32)),
        SeedVault(bytes(range(32))),
        clock_ms=lambda: now[0],
        lifetime_ms=lifetime_ms,
        reveal_hold_ms=reveal_hold_ms,
    )
    storage = SqliteStorage(tmp_path / "fairdeck.db")
    vault = SeedVault(bytes(range(1, 33)))
    dealer = CodealDealer(
        InProcessLink(codealer),
        codealer.identity_key,
        CodealStore(tmp_path / "codeal.db"),
        vault,
        log=CodealLog(Dealer(storage, vault)),
        new_hand_id=_new_hand_id,
        clock_ms=lambda: now[0],
    )
    return codealer, dealer, storage
