"""``fairdeck deal``: a demo Texas hold'em hand dealt by a running dealer.

Opens a hand (its commitment is printed before any card is seen), shuffles
with a seed of this client's own, deals hole cards round by round, burns and
deals the board through draws, closes the hand and verifies the transcript
locally against the commitment printed first.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Sequence

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.core.cards import Card
from fairdeck.core.errors import VerificationError


def _show(cards: Sequence[Card]) -> str:
    return " ".join(c.pretty() for c in cards)


def deal_holdem(dealer: DealerClient, players: int, client_seed: str) -> int:
    opened = dealer.open_hand("standard")
    print(f"hand {opened.hand_id} ({opened.deck}, {opened.version})")
    print(f"commitment  {opened.commitment.hex()}  (log index {opened.commit_receipt.index})")
    dealer.shuffle(opened.hand_id, [client_seed])
    print(f"client seed {client_seed!r}")
    dealt: list[Card] = []  # every card drawn, burns included, to check against the reveal

    def draw(count: int) -> tuple[Card, ...]:
        cards = dealer.draw(opened.hand_id, count).cards
        dealt.extend(cards)
        return cards

    hole: list[list[Card]] = [[] for _ in range(players)]
    for _ in range(2):  # one card at a time around the table, twice
        for seat in range(players):
            hole[seat].extend(draw(1))
    for seat, held in enumerate(hole, start=1):
        print(f"seat {seat}: {_show(held)}")
    for name, count in (("flop", 3), ("turn", 1), ("river", 1)):
        draw(1)  # burn
        cards = draw(count)
        print(f"{name + ':':6} {_show(cards)}")
    closed = dealer.close(opened.hand_id)
    assert closed.reveal_receipt is not None
    print(f"closed: server seed {closed.transcript.server_seed.hex() if closed.transcript else '?'}")
    print(f"        revealed at log index {closed.reveal_receipt.index}")
    try:
        closed.verify(commitment=opened.commitment, dealt=dealt)
    except VerificationError as e:
        print(f"NOT VERIFIED: {e}")
        return 1
    print(f"verified: the revealed seed opens the commitment and re-derives all {len(dealt)} cards dealt")
    return 0


def cmd_deal(args: argparse.Namespace) -> int:
    if not 2 <= args.players <= 10:
        print("fairdeck deal: --players must be 2..10")
        return 2
    try:
        with DealerClient(args.target, timeout=args.timeout) as dealer:
            return deal_holdem(dealer, args.players, args.client_seed or secrets.token_hex(8))
    except FairdeckError as e:
        print(f"fairdeck deal: {e.code.name}: {e}")
        return 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    deal = sub.add_parser("deal", help="deal a demo hold'em hand from a running dealer and verify it")
    deal.add_argument("--target", default="127.0.0.1:50051", metavar="HOST:PORT", help="default %(default)s")
    deal.add_argument("--players", type=int, default=2, help="2..10 (default 2)")
    deal.add_argument("--client-seed", default=None, help="your seed (default: random)")
    deal.add_argument("--timeout", type=float, default=10.0, help="per-call deadline in seconds")
    deal.set_defaults(handler=cmd_deal)
