"""What the seal statements cost (docs/codealing-spec.md 9.1, 9.2): a 9-seat table's hole cards in
process, the real dealer side (``CodealDealer``) over an in-process co-dealer (``CoDealer``) with
their real SQLite files: 9 sealed draws of 2 (the co-dealer's share, seal, statement and ledger
write; the dealer's check of each statement), then every seat's device opening its cards. Run it
on this tree and on a worktree of the commit before the statements (PYTHONPATH=OLD/client:
OLD/server), side by side; it detects which one it runs on. Prints one JSON object.

    .venv/bin/python bench/codeal_seal_bench.py 20
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.client.codeal_seat import SeatKey, open_cards
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck_server.codealer.holder import CoDealer, GivenShares
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.dealer import _new_hand_id
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.edge.codeal_edge import hand as hand_message

SIGNED = "seal_signatures" in GivenShares.__dataclass_fields__


class Link:
    def __init__(self, codealer: CoDealer) -> None:
        self.codealer = codealer

    async def announce(self, hand_id: str, deck: str, k: int, n: int) -> tuple[bytes, bytes, bytes]:
        record, signature = self.codealer.announce(hand_id, deck, k, n)
        return record, signature, self.codealer.identity_key

    async def shuffle(
        self, hand_id: str, keys: Sequence[bytes], shuffles: Sequence[bytes]
    ) -> tuple[bytes, bytes]:
        return self.codealer.shuffle(hand_id, keys, shuffles)

    async def share(
        self, hand_id: str, position: int, key: bytes, count: int, seats: Sequence[bytes] = ()
    ) -> Any:
        given = self.codealer.share(hand_id, position, key, [], count, seats)
        if SIGNED:
            return list(given.shares), list(given.sealed), list(given.seal_signatures)
        return list(given.shares), list(given.sealed)

    async def reveal(self, hand_id: str) -> bytes:
        return self.codealer.reveal(hand_id)

    async def close(self) -> None:
        pass


async def run(hands: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="codeal-seal-"))
    codealer = CoDealer(
        Ledger(tmp / "cd.db"), Ed25519PrivateKey.from_private_bytes(bytes(32)), SeedVault(bytes(range(32)))
    )
    dealer = CodealDealer(
        Link(codealer),
        codealer.identity_key,
        CodealStore(tmp / "codeal.db"),
        SeedVault(bytes(range(1, 33))),
        new_hand_id=_new_hand_id,
        clock_ms=lambda: int(time.time() * 1000),
    )
    draws_ms, opens_ms = [], []
    for _ in range(hands):
        row = await dealer.open_hand("t1", "standard")
        seats = [SeatKey.generate() for _ in range(9)]
        t0 = time.perf_counter()
        draws = [await dealer.draw("t1", row.hand_id, 2, s.public_key) for s in seats]
        t1 = time.perf_counter()
        hand = hand_message(row)
        for seat, draw in zip(seats, draws, strict=True):
            cards = []
            for i, shares in enumerate(draw.shares):
                card = pb.SealedCard(position=draw.position + i, shares=shares)
                for seal in draw.seals[i] if SIGNED else ():
                    card.seals.add(
                        holder=seal.holder,
                        seat_public_key=seal.seat_key,
                        sealed_share_sha256=seal.sealed_sha256,
                        signature=seal.signature,
                    )
                cards.append(card)
            if SIGNED:
                open_cards(hand, cards, seat, [codealer.identity_key])
            else:
                open_cards(hand, cards, seat)  # type: ignore[call-arg]
        t2 = time.perf_counter()
        draws_ms.append((t1 - t0) * 1000)
        opens_ms.append((t2 - t1) * 1000)
    return {
        "seal_statements": SIGNED,
        "hands": hands,
        "draws_9x2_ms_median": round(statistics.median(draws_ms), 2),
        "open_9_seats_ms_median": round(statistics.median(opens_ms), 2),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 20))))
