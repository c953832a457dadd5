"""No-limit Texas hold'em on PokerKit, with every card dealt by fairdeck and
every player verifying the hand on its own.

    fairdeck key > log.pub          # the log's public key, taken once
    python examples/holdem_pokerkit.py --target 127.0.0.1:50051 --key @log.pub --players 4

The game server (``HoldemTable``) opens a hand, runs the players' seed rounds of ``fairplay``,
and takes every card from DrawCards in the order a live dealer deals them, feeding each one, as
drawn, into PokerKit, which never shuffles a deck of its own; the betting is scripted and
PokerKit settles the showdown. After CloseHand every player checks the hand with
``fairplay.verify_seat``, taking the card positions from the rules here (``Layout``), not from
the game server. The whole protocol: examples/README.md.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from fairplay import (
    SEAT_NAMES,
    Dealt,
    FairTable,
    Player,
    SeatReport,
    TableRecord,
    fetch_proofs,
    game_main,
    load_verifier,
    verify_seat,
)
from pokerkit import (
    Automation,
    BoardDealing,
    CardBurning,
    ChipsPushing,
    HoleCardsShowingOrMucking,
    HoleDealing,
    NoLimitTexasHoldem,
    StandardHighHand,
    State,
)

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.log.note import Verifier

DECK = "standard"
BLINDS = (1, 2)
MIN_BET = 2
STACK = 200
STREETS = (("flop", 3), ("turn", 1), ("river", 1))
AUTOMATIONS = (
    Automation.ANTE_POSTING,
    Automation.BET_COLLECTION,
    Automation.BLIND_OR_STRADDLE_POSTING,
    Automation.HOLE_CARDS_SHOWING_OR_MUCKING,
    Automation.HAND_KILLING,
    Automation.CHIPS_PUSHING,
    Automation.CHIPS_PULLING,
)  # no card automation: burns, hole cards and the board are ours


@dataclass(frozen=True)
class Layout:
    """Where the rules put every card for a table of ``seats``: anyone can work it out."""

    seats: int

    def hole(self, seat: int) -> tuple[int, int]:
        return (seat, self.seats + seat)

    @property
    def burns(self) -> tuple[int, int, int]:
        n = 2 * self.seats
        return (n, n + 4, n + 6)

    @property
    def board(self) -> tuple[int, int, int, int, int]:
        n = 2 * self.seats
        return (n + 1, n + 2, n + 3, n + 5, n + 7)

    @property
    def total(self) -> int:
        return 2 * self.seats + 8


@dataclass(frozen=True)
class HoldemResult:
    record: TableRecord
    """What the table was shown."""
    players: tuple[Player, ...]
    """The players, each holding its own secret (the demo runs them all in one process)."""
    hole: tuple[tuple[Dealt, ...], ...]
    """Each seat's hole cards, as the game server dealt them (never in the record)."""
    burns: tuple[Dealt, ...]
    reports: tuple[SeatReport, ...]
    """Each player's own verification."""
    actions: tuple[str, ...]
    showdown: tuple[int, ...]
    """Seats that showed their cards."""
    winners: tuple[int, ...]
    """Seats PokerKit pushed chips to (more than one on a split pot)."""
    best_hands: dict[int, str]
    engine_cards: tuple[str, ...]
    """Every card PokerKit was dealt (holes, burns, board), in the order it was dealt them."""
    starting_stacks: tuple[int, ...]
    final_stacks: tuple[int, ...]

    @property
    def all_verified(self) -> bool:
        return len(self.reports) == len(self.record.seats) and all(r.ok for r in self.reports)


@dataclass(frozen=True)
class _Played:
    record: TableRecord
    hole: tuple[tuple[Dealt, ...], ...]
    burns: tuple[Dealt, ...]
    state: State
    actions: tuple[str, ...]


class HoldemTable(FairTable):
    """The game server: the fair-play rounds of ``FairTable``, the hold'em
    dealing order, and PokerKit for the rules and the showdown."""

    deck = DECK

    def __init__(self, dealer: DealerClient, players: Sequence[Player], out: Callable[[str], None]) -> None:
        if not 2 <= len(players) <= 9:
            raise ValueError("hold'em seats 2 to 9 players")
        super().__init__(dealer, players, out)

    def play(self) -> _Played:
        self.open()
        n = len(self.players)
        state = NoLimitTexasHoldem.create_state(AUTOMATIONS, True, 0, BLINDS, MIN_BET, STACK, n)
        actions: list[str] = []
        hole: list[list[Dealt]] = [[] for _ in self.players]
        for d in self.draw(2 * n, lambda i: f"seat {i % n + 1}"):  # round the table, twice
            seat = d.position % n
            if state.hole_dealee_index != seat:
                raise RuntimeError(f"PokerKit deals to seat {state.hole_dealee_index}, we dealt to {seat}")
            with _strict():
                state.deal_hole(d.card, seat)
            hole[seat].append(d)
            self.give(self.players[seat], d)
        for seat, cards in enumerate(hole):
            self.out(f"seat {seat + 1} {self.players[seat].name:6} {_show(cards)}  (told only to them)")
        actions.append("preflop: " + _bet(state))
        burns: list[Dealt] = []
        board: list[Dealt] = []
        for name, count in STREETS:
            (burn,) = self.draw(1, "burn")
            with _strict():
                state.burn_card(burn.card)
            burns.append(burn)
            cards = self.draw(count, "board")
            with _strict():
                state.deal_board("".join(d.card for d in cards))
            board.extend(cards)
            self.out(f"{name:5} {_show(cards)}")
            actions.append(f"{name}: " + _bet(state))
        if state.status:
            raise RuntimeError("PokerKit did not finish the hand after the river")
        record = self.close(board)
        return _Played(record, tuple(tuple(h) for h in hole), tuple(burns), state, tuple(actions))


@contextlib.contextmanager
def _strict() -> Iterator[None]:
    """PokerKit warns when told to deal a card it thinks is gone; that is an error here."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        yield


def _bet(state: State) -> str:
    """The scripted line: the first to act on the flop bets the minimum, everything else checks or calls."""
    street = state.street_index
    actions = []
    while state.actor_index is not None:
        seat = state.actor_index
        if street == 1 and max(state.bets) == 0 and state.can_complete_bet_or_raise_to():
            amount = state.min_completion_betting_or_raising_to_amount
            assert amount is not None
            state.complete_bet_or_raise_to(amount)
            actions.append(f"seat {seat + 1} bets {amount}")
        else:
            op = state.check_or_call()
            actions.append(f"seat {seat + 1} " + (f"calls {op.amount}" if op.amount else "checks"))
    return ", ".join(actions)


def _show(cards: Sequence[Dealt]) -> str:
    return " ".join(f"{d.card}@{d.position}" for d in cards)


def run(
    target: str,
    key: str | Verifier,
    *,
    players: int = 3,
    api_token: str | None = None,
    audit_token: str | None = None,
    out: Callable[[str], None] = print,
    table: type[HoldemTable] = HoldemTable,
) -> HoldemResult:
    """Play one hand against the dealer at ``target``; every player then verifies it.

    ``table`` is the game server's class: a test passes a lying one.
    """
    verifier = load_verifier(key)
    seated = [Player(i, SEAT_NAMES[i]) for i in range(players)]
    with DealerClient(target, api_token=api_token) as dealer:
        played = table(dealer, seated, out).play()
    state = played.state
    record = played.record
    layout = Layout(players)
    shown = tuple(
        sorted(
            op.player_index
            for op in state.operations
            if isinstance(op, HoleCardsShowingOrMucking) and op.hole_cards
        )
    )
    board = "".join(d.card for d in record.public)
    best = {
        seat: str(StandardHighHand.from_game("".join(d.card for d in played.hole[seat]), board))
        for seat in shown
    }
    pushes = [op for op in state.operations if isinstance(op, ChipsPushing)]
    winners = tuple(sorted({i for op in pushes for i, amount in enumerate(op.amounts) if amount > 0}))
    engine = [
        f"{c.rank.value}{c.suit.value}"
        for op in state.operations
        if isinstance(op, HoleDealing | CardBurning | BoardDealing)
        for c in (op.cards if isinstance(op, HoleDealing | BoardDealing) else (op.card,))
    ]
    for line in played.actions:
        out("  " + line)
    for seat in shown:
        out(f"showdown: seat {seat + 1} {seated[seat].name:6} shows {best[seat]}")
    mucked = [seated[i].name for i in range(players) if i not in shown]
    if mucked:
        out(f"          {', '.join(mucked)} muck")
    out(f"winner: {', '.join(seated[w].name for w in winners)}; stacks {STACK} each -> {list(state.stacks)}")

    reports = []
    with AuditClient(target, verifier=verifier, api_token=audit_token) as log:
        for p in seated:  # each player asks the log itself, then checks with what it alone holds
            proofs = fetch_proofs(log, record.hand_id)
            report = verify_seat(
                p.secret,
                p.cards,
                record,
                proofs,
                verifier,
                expected_mine=layout.hole(p.seat),
                expected_public=layout.board,
            )
            out(report.line())
            reports.append(report)
    return HoldemResult(
        record=record,
        players=tuple(seated),
        hole=played.hole,
        burns=played.burns,
        reports=tuple(reports),
        actions=played.actions,
        showdown=shown,
        winners=winners,
        best_hands=best,
        engine_cards=tuple(engine),
        starting_stacks=tuple(STACK for _ in seated),
        final_stacks=tuple(state.stacks),
    )


def main(argv: Sequence[str] | None = None) -> int:
    description = __doc__.split("\n\n")[0] if __doc__ else None
    return game_main("holdem", description, run, (2, 9, 3), argv)


if __name__ == "__main__":
    sys.exit(main())
