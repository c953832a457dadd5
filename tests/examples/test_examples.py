"""The example game servers against a live dealer: every player verifies an
honest hand, and catches a lying game server, a cheating player, a tampered
transcript and a forged log proof."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import blackjack_shoe as bj
import fairplay
import holdem_pokerkit as holdem
import pytest
from fairplay import Dealt, Player, Proofs, TableRecord

from fairdeck.client import DealerClient
from fairdeck.client.models import Hand, HandState
from fairdeck.core.cards import Card
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.errors import VerificationError
from fairdeck.log.note import Signer
from tests.examples import EXAMPLES
from tests.support.dealers import RunningDealer


def quiet(line: str) -> None:
    """The examples' output, swallowed."""


def rederived(record: TableRecord) -> list[str]:
    """The deck re-derived here from the revealed seeds, independently of the transcript's card list."""
    t = record.closed.transcript
    assert t is not None
    spec = DeckSpec.parse(t.deck)
    ids = derive_deck(spec, t.hand_id, t.server_seed, t.client_seeds, version=t.version)
    return [spec.card_for_id(i).code for i in ids]


def failed_steps(reports: Sequence[fairplay.SeatReport]) -> list[str]:
    return [r.step for r in reports if not r.ok]


# -- hold'em ---------------------------------------------------------------


@pytest.mark.parametrize("players", [2, 4, 9])
def test_holdem_every_player_verifies_a_pokerkit_hand_dealt_from_fairdeck(
    dealer: RunningDealer, key: str, players: int
) -> None:
    result = holdem.run(dealer.target, key, players=players, out=quiet)
    record = result.record
    assert result.all_verified, [r.line() for r in result.reports]
    assert [r.seat for r in result.reports] == list(range(players))

    # The seeds: one per seat, each opening its commitment, all in the shuffle in seat order.
    t = record.closed.transcript
    assert t is not None and record.closed.state is HandState.CLOSED
    assert t.client_seeds == record.revealed_seeds == tuple(p.secret.seed for p in result.players)
    assert len(set(t.client_seeds)) == players

    # Dealt in live order from consecutive draws: holes round the table twice, then burn/board.
    layout = holdem.Layout(players)
    for seat, hole in enumerate(result.hole):
        assert [d.position for d in hole] == list(layout.hole(seat))
    assert [d.position for d in result.burns] == list(layout.burns)
    assert [d.position for d in record.public] == list(layout.board)
    every = sorted(
        [*(d for h in result.hole for d in h), *result.burns, *record.public], key=lambda d: d.position
    )
    assert [d.position for d in every] == list(range(2 * players + 8)) and record.draws == layout.total
    assert record.closed.dealt_count == layout.total

    # Each card is the card at its position in the deck re-derived from the revealed seeds...
    deck = rederived(record)
    assert [d.card for d in every] == deck[: layout.total]
    # ...and PokerKit was dealt exactly those, in that order (its own deck was never used).
    assert list(result.engine_cards) == deck[: layout.total]

    # PokerKit played to a showdown and pushed the pot; no chip appeared or vanished.
    assert len(result.showdown) >= 1 and result.winners
    assert set(result.winners) <= set(result.showdown)
    assert sum(result.final_stacks) == sum(result.starting_stacks) == players * holdem.STACK
    assert result.final_stacks != result.starting_stacks or len(result.winners) == players

    # The log proofs the players checked cover the hand's commit and reveal.
    for report in result.reports:
        assert report.checkpoint is not None
        assert record.closed.reveal_receipt is not None
        assert report.checkpoint.size > record.closed.reveal_receipt.index


def test_a_player_verifies_from_public_data_and_its_own_secrets_only(dealer: RunningDealer, key: str) -> None:
    result = holdem.run(dealer.target, key, players=4, out=quiet)
    record = result.record
    # Nothing private is in what the table is shown: no other hole card, no seed before its reveal.
    hole_codes = {d.card for hole in result.hole for d in hole}
    assert hole_codes.isdisjoint(d.card for d in record.public)
    assert {f.name for f in dataclasses.fields(TableRecord)} == {
        "hand_id", "deck", "dealer_commitment", "seats", "seed_commitments", "revealed_seeds",
        "public", "draws", "closed",
    }  # fmt: skip
    with fairplay.AuditClient(dealer.target, verifier=key) as log:
        proofs = fairplay.fetch_proofs(log, record.hand_id)
    verifier = fairplay.load_verifier(key)
    layout = holdem.Layout(4)
    for p in result.players:  # a fresh check by each player: the record, its secret, its own two cards
        report = fairplay.verify_seat(
            p.secret, p.cards, record, proofs, verifier,
            expected_mine=layout.hole(p.seat), expected_public=layout.board,
        )  # fmt: skip
        assert report.ok, report.line()
    # A player that is handed another seat's secret is not fooled into accepting it as its own.
    alice, bob = result.players[0], result.players[1]
    stolen = dataclasses.replace(alice.secret, seed=bob.secret.seed)
    report = fairplay.verify_seat(
        stolen, alice.cards, record, proofs, verifier,
        expected_mine=layout.hole(0), expected_public=layout.board,
    )  # fmt: skip
    assert not report.ok and report.step == "seeds"
    # A record naming another dealer commitment than the one shown to the players before they committed.
    other = dataclasses.replace(record, dealer_commitment=bytes(32))
    report = fairplay.verify_seat(
        alice.secret, alice.cards, other, proofs, verifier,
        expected_mine=layout.hole(0), expected_public=layout.board,
    )  # fmt: skip
    assert not report.ok and report.step == "commitment"


class WrongCardTable(holdem.HoldemTable):
    """Tells seat 1 that its first hole card is seat 2's."""

    def tell(self, player: Player, dealt: Dealt) -> Dealt:
        if dealt.position == 0:
            other = next(d for d in self.drawn if d.position == 1)
            return dataclasses.replace(dealt, card=other.card)
        return dealt


class WrongPositionTable(holdem.HoldemTable):
    """Tells seat 1 the truth about a card, but it is seat 2's card at seat 2's position."""

    def tell(self, player: Player, dealt: Dealt) -> Dealt:
        if dealt.position == 0:
            return next(d for d in self.drawn if d.position == 1)
        return dealt


class DroppedSeedTable(holdem.HoldemTable):
    """Shuffles without seat 1's seed (so that seat's player had no say in the deck)."""

    def shuffle_seeds(self, seeds: tuple[bytes, ...]) -> Sequence[bytes]:
        return seeds[1:]


class GroundSeedTable(holdem.HoldemTable):
    """Swaps the last seat's seed for one of its own choosing (what grinding would need)."""

    def shuffle_seeds(self, seeds: tuple[bytes, ...]) -> Sequence[bytes]:
        return (*seeds[:-1], b"chosen by the game server")


class SwappedCardsTable(holdem.HoldemTable):
    """Relays a transcript with two undealt cards swapped."""

    def relay(self, closed: Hand) -> Hand:
        t = closed.transcript
        assert t is not None
        cards = list(t.cards)
        cards[-1], cards[-2] = cards[-2], cards[-1]
        return dataclasses.replace(closed, transcript=dataclasses.replace(t, cards=tuple(cards)))


class OtherSeedTable(holdem.HoldemTable):
    """Relays a transcript with another server seed, as if the dealer had revealed that one."""

    def relay(self, closed: Hand) -> Hand:
        t = closed.transcript
        assert t is not None
        forged = bytes(len(t.server_seed))
        return dataclasses.replace(closed, transcript=dataclasses.replace(t, server_seed=forged))


@pytest.mark.parametrize(
    ("table", "victims", "step"),
    [
        (WrongCardTable, [0], "positions"),
        (WrongPositionTable, [0], "positions"),
        (DroppedSeedTable, [0, 1, 2], "seeds"),
        (GroundSeedTable, [0, 1, 2], "seeds"),
        (SwappedCardsTable, [0, 1, 2], "deck"),
        (OtherSeedTable, [0, 1, 2], "commitment"),
    ],
)
def test_players_catch_a_lying_game_server(
    dealer: RunningDealer, key: str, table: type[holdem.HoldemTable], victims: list[int], step: str
) -> None:
    result = holdem.run(dealer.target, key, players=3, out=quiet, table=table)
    assert not result.all_verified
    assert [r.seat for r in result.reports if not r.ok] == victims
    assert failed_steps(result.reports) == [step] * len(victims)


def test_a_forged_proof_or_the_wrong_log_key_fails_the_log_step(dealer: RunningDealer, key: str) -> None:
    result = holdem.run(dealer.target, key, players=2, out=quiet)
    record = result.record
    with fairplay.AuditClient(dealer.target, verifier=key) as log:
        proofs = fairplay.fetch_proofs(log, record.hand_id)
    layout = holdem.Layout(2)
    alice = result.players[0]

    def check(proofs: Proofs, verifier: fairplay.Verifier) -> fairplay.SeatReport:
        return fairplay.verify_seat(
            alice.secret, alice.cards, record, proofs, verifier,
            expected_mine=layout.hole(0), expected_public=layout.board,
        )  # fmt: skip

    verifier = fairplay.load_verifier(key)
    assert check(proofs, verifier).ok
    other_log = Signer.generate(verifier.name).verifier
    assert check(proofs, other_log).step == "log"
    # The reveal entry swapped for the commit entry: a valid proof, of the wrong entry.
    assert check(Proofs(proofs.commit, proofs.commit), verifier).step == "log"
    entry = bytearray(proofs.reveal.entry)
    entry[-1] ^= 1
    forged = dataclasses.replace(proofs.reveal, entry=bytes(entry))
    assert check(Proofs(proofs.commit, forged), verifier).step == "log"


class PeekingPlayer(Player):
    """Reveals a seed other than the one it committed to (it wants a second try)."""

    def reveal(self, commitments: Sequence[bytes]) -> bytes:
        super().reveal(commitments)
        return b"a seed picked after seeing the table"


def test_a_reveal_that_does_not_open_its_commitment_abandons_the_hand(dealer: RunningDealer) -> None:
    players = [Player(0, "alice"), PeekingPlayer(1, "bob")]
    with DealerClient(dealer.target) as client:
        table = holdem.HoldemTable(client, players, quiet)
        with pytest.raises(VerificationError) as caught:
            table.play()
        assert caught.value.step == "seeds" and "bob" in caught.value.detail
        hand = client.get(table.hand_id)
    assert hand.state is HandState.CLOSED and hand.dealt_count == 0
    assert hand.transcript is not None and hand.transcript.client_seeds == ()


# -- blackjack ----------------------------------------------------------------


@pytest.fixture(scope="module")
def shoe(dealer: RunningDealer, key: str) -> bj.ShoeResult:
    """One shoe, two players; the tests below only read it."""
    return bj.run(dealer.target, key, players=2, out=quiet)


def test_blackjack_deals_one_shoe_to_the_cut_card_with_physical_cards(shoe: bj.ShoeResult) -> None:
    result = shoe
    record = result.record
    assert result.all_verified, [r.line() for r in result.reports]
    assert record.deck == "shoe-6" and record.closed.deck_size == 312 == bj.SHOE_SIZE
    assert bj.CUT_CARD == 234

    # Consecutive draws; every round starts before the cut card; the shoe stops in the round that passes it.
    positions = sorted(d.position for d in record.public)
    assert positions == list(range(record.draws)) and record.closed.dealt_count == record.draws
    starts = [r.start for r in result.rounds]
    assert starts == sorted(starts) and starts[0] == 0 and all(s < 234 for s in starts)
    assert record.draws >= 234 > starts[-1]
    ends = [*starts[1:], record.draws]
    assert all(end < 234 for end in ends[:-1])

    # Physical identity: each card shown is the card (deck number included) at its position in the
    # shoe re-derived from the revealed seeds, and the six decks' twins tell apart.
    deck = rederived(record)
    assert [d.card for d in sorted(record.public, key=lambda d: d.position)] == deck[: record.draws]
    cards = [Card(d.card) for d in record.public]
    assert all(c.deck in range(1, 7) for c in cards)
    assert len({c.code for c in cards}) == len(cards)
    twins = Counter(c.code[:2] for c in cards)
    assert max(twins.values()) >= 2  # 234+ cards of 52 kinds: the same rank and suit from several decks

    # The dealer's hand of every round is S17 and each seat's result is settled by the rules.
    for r in result.rounds:
        dealer_cards = [d.card for d in r.dealer]
        live = [h for h in r.hands if bj._live([d.card for d in h])]
        if bj.is_blackjack(dealer_cards[:2]) or not live:
            assert len(dealer_cards) == 2
        else:  # drew to 17 or more, and stopped there
            assert bj.hand_value(dealer_cards)[0] >= 17
            assert len(dealer_cards) == 2 or bj.hand_value(dealer_cards[:-1])[0] < 17
        assert r.results == tuple(bj.settle([d.card for d in h], dealer_cards) for h in r.hands)
    assert result.bankroll == tuple(sum(r.results[s] for r in result.rounds) for s in range(2))


def test_blackjack_players_catch_a_wrong_deck_number_and_a_broken_rule(
    dealer: RunningDealer, key: str, shoe: bj.ShoeResult
) -> None:
    result = shoe
    record = result.record
    with fairplay.AuditClient(dealer.target, verifier=key) as log:
        proofs = fairplay.fetch_proofs(log, record.hand_id)
    verifier = fairplay.load_verifier(key)
    alice = result.players[0]

    def check(record: TableRecord) -> fairplay.SeatReport:
        mine = [d for d in record.public if d.to == "seat 1"]
        return bj.verify_player(alice.secret, mine, record, proofs, verifier)

    assert check(record).ok
    public = list(record.public)

    # The same rank and suit, but from another of the six decks: not the card that was dealt.
    first = public[0]
    other_deck = Card(first.card).deck % 6 + 1
    public[0] = dataclasses.replace(first, card=f"{first.card[:2]}.{other_deck}")
    lied = check(dataclasses.replace(record, public=tuple(public)))
    assert lied.step == "positions" and "position 0" in lied.detail

    # A dealer's hit re-labelled as bob's: bob sees that the log gives him a card he was never dealt.
    bob = result.players[1]
    public = list(record.public)
    hit = next(d for d in public if d.to == bj.DEALER and d.position not in _first_cards(result))
    public[hit.position] = dataclasses.replace(hit, to="seat 2")
    relabelled = dataclasses.replace(record, public=tuple(public))
    assert not bj.verify_player(bob.secret, bob.cards, relabelled, proofs, verifier).ok

    # A round not dealt in the live order (seat 1 and seat 2 swapped on the first card).
    public = list(record.public)
    r2 = result.rounds[1].start
    public[r2], public[r2 + 1] = (
        dataclasses.replace(public[r2], to=public[r2 + 1].to),
        dataclasses.replace(public[r2 + 1], to=public[r2].to),
    )
    swapped = check(dataclasses.replace(record, public=tuple(public)))
    assert swapped.step == "rules" and "live order" in swapped.detail

    # A shoe closed before the cut card.
    early = [d for d in record.public if d.round < result.rounds[-1].number]
    short = check(dataclasses.replace(record, public=tuple(early), draws=len(early)))
    assert short.step == "rules" and "before the cut card" in short.detail


@pytest.mark.parametrize(
    ("dealer_cards", "problem"),
    [
        (["Ac.1", "6c.2", "2c.3"], "the dealer drew 3 cards, S17 gives 2"),  # hit a soft 17
        (["Tc.1", "6c.2"], "the dealer stood on 16"),
        (["Ac.1", "6c.2"], "before the cut card"),  # stood on soft 17: the rounds hold, the shoe is short
    ],
)
def test_the_shoe_check_holds_the_dealer_to_s17(
    shoe: bj.ShoeResult, dealer_cards: list[str], problem: str
) -> None:
    seat, dealer_ = ["Tc.4", "9c.5"], dealer_cards  # seat 1 stands on 19
    order = [("seat 1", seat[0]), (bj.DEALER, dealer_[0]), ("seat 1", seat[1]), (bj.DEALER, dealer_[1])]
    order += [(bj.DEALER, c) for c in dealer_[2:]]
    public = tuple(Dealt(i, card, to, 1) for i, (to, card) in enumerate(order))
    record = dataclasses.replace(shoe.record, seats=("alice",), public=public, draws=len(public))
    with pytest.raises(VerificationError) as caught:
        bj.check_shoe(record)
    assert caught.value.step == "rules" and problem in caught.value.detail


def _first_cards(result: bj.ShoeResult) -> set[int]:
    """Positions of each round's first two cards of each hand."""
    return {d.position for r in result.rounds for h in (*r.hands, r.dealer) for d in h[:2]}


# -- as scripts ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "expect"),
    [("holdem_pokerkit.py", "showdown:"), ("blackjack_shoe.py", "cut card reached")],
)
def test_the_scripts_run_against_a_dealer(
    dealer: RunningDealer, key: str, tmp_path: Path, script: str, expect: str
) -> None:
    pub = tmp_path / "log.pub"
    pub.write_text(key + "\n")
    argv = [sys.executable, str(EXAMPLES / script), "--target", dealer.target, "--key", f"@{pub}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert expect in done.stdout and "NOT VERIFIED" not in done.stdout
    assert done.stdout.count(": verified") == (3 if script.startswith("holdem") else 2)

    bad = subprocess.run([*argv[:-1], "not-a-key"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "bad --key" in bad.stderr and "Traceback" not in bad.stderr


def test_the_examples_are_lint_and_format_clean() -> None:
    files = [str(p) for p in sorted(EXAMPLES.glob("*.py"))]
    for args in (["check", *files], ["format", "--check", *files]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_examples_are_mypy_strict_clean() -> None:
    files = [str(p.relative_to(EXAMPLES.parent)) for p in sorted(EXAMPLES.glob("*.py"))]
    env = {**os.environ, "MYPYPATH": "examples"}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *files],
        cwd=EXAMPLES.parent, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("script", ["holdem_pokerkit.py", "blackjack_shoe.py"])
def test_a_key_file_that_is_a_device_or_not_text_is_one_line_not_a_hang_or_a_traceback(
    script: str, tmp_path: Path
) -> None:
    """`--key @/dev/zero` read without end, and a key file that is not UTF-8 ended in a
    UnicodeDecodeError traceback."""
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe not a key")
    for path, said in (("/dev/zero", "not a regular file"), (str(binary), "not UTF-8 text")):
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / script), "--key", f"@{path}"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "bad --key" in done.stderr and said in done.stderr and "Traceback" not in done.stderr
