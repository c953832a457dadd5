"""Blackjack from one 6-deck shoe dealt by fairdeck, cut card at 75%, every
card a physical card of one of the six decks.

    fairdeck key > log.pub          # the log's public key, taken once
    python examples/blackjack_shoe.py --target 127.0.0.1:50051 --key @log.pub --players 2

One fairdeck hand is one shoe (``shoe-6``, 312 cards), shuffled once with the dealer's committed
seed and the players' committed-then-revealed seeds (``fairplay``), and dealt round after round
until the cut card (card 234) comes out. The dealer stands on soft 17; players hit or stand by a
fixed basic-strategy-lite rule. After the close every player checks its cards with
``fairplay.verify_seat`` and the deal with ``check_shoe``. The rules, and why one hand is one
shoe: examples/README.md, "Inside the code".
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fairplay import (
    SEAT_NAMES,
    Dealt,
    FairTable,
    Player,
    Proofs,
    SeatReport,
    SeatSecret,
    TableRecord,
    fetch_proofs,
    game_main,
    load_verifier,
    verify_seat,
)

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.core.cards import Card
from fairdeck.core.decks import DeckSpec
from fairdeck.core.errors import VerificationError
from fairdeck.log.note import Verifier

DECK = "shoe-6"
SHOE_SIZE = DeckSpec.parse(DECK).size
CUT_CARD = SHOE_SIZE * 3 // 4
"""234: no round starts once this many cards are out."""
MAX_PLAYERS = 7
BET = 10
DEALER = "dealer"


def hand_value(cards: Sequence[str]) -> tuple[int, bool]:
    """(best total, soft): an ace counts 11 while that does not bust the hand."""
    total = aces = 0
    for code in cards:
        rank = code[0]
        if rank == "A":
            aces += 1
            total += 1
        else:
            total += 10 if rank in "TJQK" else int(rank)
    if aces and total + 10 <= 21:
        return total + 10, True
    return total, False


def is_blackjack(cards: Sequence[str]) -> bool:
    return len(cards) == 2 and hand_value(cards)[0] == 21


def player_hits(cards: Sequence[str], dealer_up: str) -> bool:
    """Basic-strategy-lite: no doubles or splits, hit or stand only."""
    total, soft = hand_value(cards)
    up = hand_value([dealer_up])[0]
    if soft:
        return total <= 17 or (total == 18 and up >= 9)
    if total <= 11:
        return True
    if total == 12:
        return up not in (4, 5, 6)
    if total <= 16:
        return up >= 7
    return False


def dealer_hits(cards: Sequence[str]) -> bool:
    """The dealer draws to 16 and stands on every 17, soft 17 included (S17)."""
    return hand_value(cards)[0] < 17


def settle(player: Sequence[str], dealer: Sequence[str]) -> int:
    """Chips the player wins (negative: loses) on a bet of BET."""
    if is_blackjack(player):
        return 0 if is_blackjack(dealer) else BET * 3 // 2
    if is_blackjack(dealer):
        return -BET
    mine, theirs = hand_value(player)[0], hand_value(dealer)[0]
    if mine > 21:
        return -BET
    if theirs > 21 or mine > theirs:
        return BET
    return 0 if mine == theirs else -BET


@dataclass(frozen=True)
class Round:
    number: int
    hands: tuple[tuple[Dealt, ...], ...]
    """Each seat's cards."""
    dealer: tuple[Dealt, ...]
    results: tuple[int, ...]
    """Chips each seat won or lost."""

    @property
    def start(self) -> int:
        return min(d.position for d in (*self.dealer, *(c for h in self.hands for c in h)))


@dataclass(frozen=True)
class ShoeResult:
    record: TableRecord
    players: tuple[Player, ...]
    rounds: tuple[Round, ...]
    reports: tuple[SeatReport, ...]
    bankroll: tuple[int, ...]
    """Each seat's net result over the shoe."""

    @property
    def all_verified(self) -> bool:
        return len(self.reports) == len(self.record.seats) and all(r.ok for r in self.reports)


def pretty(d: Dealt) -> str:
    """``7♥.3``: rank, suit and which of the six decks the physical card came from."""
    return Card(d.card).pretty()


class BlackjackTable(FairTable):
    """The game server: one shoe, rounds until the cut card, then close."""

    deck = DECK

    def __init__(self, dealer: DealerClient, players: Sequence[Player], out: Callable[[str], None]) -> None:
        if not 1 <= len(players) <= MAX_PLAYERS:
            raise ValueError(f"blackjack seats 1 to {MAX_PLAYERS} players")
        super().__init__(dealer, players, out)

    def play(self) -> tuple[TableRecord, tuple[Round, ...]]:
        self.open()
        rounds: list[Round] = []
        while len(self.drawn) < CUT_CARD:
            rounds.append(self._round(len(rounds) + 1))
        self.out(f"cut card reached (after card {CUT_CARD} of {SHOE_SIZE}): round finished, shoe closed")
        return self.close(self.drawn), tuple(rounds)

    def _round(self, number: int) -> Round:
        p = len(self.players)
        to = [f"seat {s + 1}" for s in range(p)] + [DEALER]
        first = self.draw(2 * (p + 1), lambda i: to[i % (p + 1)], number)
        hands = [[first[s], first[p + 1 + s]] for s in range(p)]
        dealer = [first[p], first[2 * p + 1]]
        up = dealer[0].card
        if not is_blackjack(_codes(dealer)):  # the dealer peeks; with a blackjack nobody draws
            for s, hand in enumerate(hands):
                while player_hits(_codes(hand), up):
                    hand.extend(self.draw(1, to[s], number))
            if any(_live(_codes(h)) for h in hands):
                while dealer_hits(_codes(dealer)):
                    dealer.extend(self.draw(1, DEALER, number))
        for s, hand in enumerate(hands):
            for d in hand:
                self.give(self.players[s], d)
        results = tuple(settle(_codes(h), _codes(dealer)) for h in hands)
        done = Round(number, tuple(tuple(h) for h in hands), tuple(dealer), results)
        self.out(_round_line(done, [pl.name for pl in self.players]))
        return done


def _codes(cards: Sequence[Dealt]) -> list[str]:
    return [d.card for d in cards]


def _live(cards: Sequence[str]) -> bool:
    """Still in play when the dealer draws: not bust, not a blackjack already paid."""
    return hand_value(cards)[0] <= 21 and not is_blackjack(cards)


def _round_line(r: Round, names: Sequence[str]) -> str:
    def show(cards: Sequence[Dealt]) -> str:
        total = hand_value(_codes(cards))[0]
        return " ".join(pretty(d) for d in cards) + f" = {total}" + (" bust" if total > 21 else "")

    parts = [f"round {r.number:2} @{r.start:3}  dealer {show(r.dealer)}"]
    parts += [f"{name} {show(h)} {res:+d}" for name, h, res in zip(names, r.hands, r.results, strict=True)]
    return " | ".join(parts)


def check_shoe(record: TableRecord) -> None:
    """The public log of the shoe follows the rules; raise VerificationError(step="rules").

    Every card drawn is shown once, at consecutive positions; each round
    starts before the cut card, in the live order (each seat, then the
    dealer, twice), and then draws seat by seat, dealer last; nobody draws
    after a dealer blackjack or to a hand already at 21 or more; the dealer
    draws exactly by S17 (not at all when no hand is live); the shoe stops
    once the cut card is out. Whether a player hit or stood on a live hand is
    that player's choice, not a rule.
    """
    cards = sorted(record.public, key=lambda d: d.position)
    if [d.position for d in cards] != list(range(record.draws)):
        raise _rules("the cards shown are not every card drawn, each once, in order")
    p = len(record.seats)
    number, i = 1, 0
    while i < len(cards):
        rnd = [d for d in cards[i:] if d.round == number]
        if not rnd or [d.position for d in rnd] != list(range(i, i + len(rnd))):
            raise _rules(f"round {number} does not follow on at position {i}")
        if i >= CUT_CARD:
            raise _rules(f"round {number} started after the cut card")
        _check_round(rnd, p, number)
        i += len(rnd)
        number += 1
    if record.draws < CUT_CARD:
        raise _rules(f"the shoe was closed after {record.draws} cards, before the cut card at {CUT_CARD}")


def _check_round(rnd: Sequence[Dealt], p: int, number: int) -> None:
    order = {f"seat {s + 1}": s for s in range(p)} | {DEALER: p}
    first = 2 * (p + 1)
    if [order.get(d.to) for d in rnd[:first]] != [*range(p + 1)] * 2:
        raise _rules(f"round {number} was not dealt in the live order")
    later = [order.get(d.to, -1) for d in rnd[first:]]
    if -1 in later or later != sorted(later):
        raise _rules(f"round {number}: the draws after the first two cards are not seat by seat, dealer last")
    dealer = [d.card for d in rnd if d.to == DEALER]
    hands = [[d.card for d in rnd if d.to == f"seat {s + 1}"] for s in range(p)]
    for s, hand in enumerate(hands):
        done = any(hand_value(hand[:k])[0] >= 21 for k in range(2, len(hand)))
        if len(hand) > 2 and (is_blackjack(dealer[:2]) or done):
            raise _rules(f"round {number}: seat {s + 1} was dealt a card it could not draw")
    expected = dealer[:2]
    if not is_blackjack(expected) and any(_live(h) for h in hands):
        pool = iter(dealer[2:])
        while dealer_hits(expected):
            nxt = next(pool, None)
            if nxt is None:
                raise _rules(f"round {number}: the dealer stood on {hand_value(expected)[0]}")
            expected.append(nxt)
    if dealer != expected:
        raise _rules(f"round {number}: the dealer drew {len(dealer)} cards, S17 gives {len(expected)}")


def _rules(message: str) -> VerificationError:
    return VerificationError("rules", message)


def verify_player(
    me: SeatSecret, mine: Sequence[Dealt], record: TableRecord, proofs: Proofs, verifier: Verifier
) -> SeatReport:
    """A player's check of the shoe: the rules of the table, then the fair-play checks.

    Every card is face up, so the player expects its own cards where the
    public log of the shoe shows them, and every position drawn to be shown.
    """
    try:
        check_shoe(record)
    except VerificationError as e:
        return SeatReport(me.seat, me.name, ok=False, step=e.step, detail=e.detail)
    seat = f"seat {me.seat + 1}"
    return verify_seat(
        me,
        mine,
        record,
        proofs,
        verifier,
        expected_mine=[d.position for d in record.public if d.to == seat],
        expected_public=range(record.draws),
    )


def run(
    target: str,
    key: str | Verifier,
    *,
    players: int = 2,
    api_token: str | None = None,
    audit_token: str | None = None,
    out: Callable[[str], None] = print,
    table: type[BlackjackTable] = BlackjackTable,
) -> ShoeResult:
    """Deal one shoe against the dealer at ``target``; every player then verifies it.

    ``table`` is the game server's class: a test passes a lying one.
    """
    verifier = load_verifier(key)
    seated = [Player(i, SEAT_NAMES[i]) for i in range(players)]
    with DealerClient(target, api_token=api_token) as dealer:
        record, rounds = table(dealer, seated, out).play()
    bankroll = tuple(sum(r.results[s] for r in rounds) for s in range(players))
    for p, net in zip(seated, bankroll, strict=True):
        out(f"{p.name}: {len(rounds)} rounds, net {net:+d}")
    reports = []
    with AuditClient(target, verifier=verifier, api_token=audit_token) as log:
        for p in seated:  # each player asks the log itself, then checks with what it alone holds
            report = verify_player(p.secret, p.cards, record, fetch_proofs(log, record.hand_id), verifier)
            out(report.line())
            reports.append(report)
    return ShoeResult(record, tuple(seated), rounds, tuple(reports), bankroll)


def main(argv: Sequence[str] | None = None) -> int:
    description = __doc__.split("\n\n")[0] if __doc__ else None
    return game_main("blackjack", description, run, (1, MAX_PLAYERS, 2), argv)


if __name__ == "__main__":
    sys.exit(main())
