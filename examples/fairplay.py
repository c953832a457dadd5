"""The fair-play protocol both example game servers share: the players commit
to seeds of their own before anyone reveals, and each player verifies the
closed hand by itself, from public data and its own secrets only.

The game server relays and contributes no seed of its own; the players check that the seeds it
passed to the shuffle are exactly the revealed ones, each opening its commitment, in seat order.
``verify_seat`` is the player's side: it never sees another player's hole cards or seed before
the reveal, nor the game server's API token. Why the players commit before they reveal:
examples/README.md, "The protocol" and "Inside the code".
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.client.local_files import read_local_text
from fairdeck.client.models import Hand
from fairdeck.core.cards import Card
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp, u32
from fairdeck.core.errors import InvalidInput, VerificationError
from fairdeck.core.verify import verify
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.note import NoteError, Verifier
from fairdeck.log.receipts import InclusionProof, check_commit_entry, check_reveal_entry

SEED_BYTES = 32
SEED_TAG = b"fairdeck-example player-seed v1"
SEAT_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan")


def seed_commitment(hand_id: str, seat: int, name: str, seed: bytes) -> bytes:
    """SHA-256 over a domain tag, the hand, the seat and the seed (all length-prefixed)."""
    return hashlib.sha256(
        lp(SEED_TAG) + lp(hand_id.encode()) + u32(seat) + lp(name.encode()) + lp(seed)
    ).digest()


def load_verifier(key: str | Verifier) -> Verifier:
    """The log's verifier key, given as text or as ``@FILE`` (what ``fairdeck key`` prints)."""
    if isinstance(key, Verifier):
        return key
    if key.startswith("@"):
        key = read_local_text(key[1:])  # a regular file, bounded: /dev/zero is an error, not a hang
    return Verifier.parse(key.strip())


@dataclass(frozen=True)
class Dealt:
    """One card the game server says it drew: where in the deck, which card, to whom."""

    position: int
    card: str
    """The card code as the deck spells it: ``As``, or ``7h.3`` for deck 3 of a shoe."""
    to: str
    """``seat N`` (1-based), ``board``, ``burn`` or ``dealer``."""
    round: int = 0
    """The round of play (blackjack deals many rounds from one shoe)."""


@dataclass(frozen=True)
class SeatSecret:
    """What this player holds itself: its seed (never shown before the reveal),
    and its own memory of the hand it committed to, not the game server's word."""

    seat: int
    """0-based seat index."""
    name: str
    seed: bytes = field(repr=False)
    hand_id: str
    dealer_commitment: bytes
    """The dealer's commitment this player was shown before it committed."""


@dataclass(frozen=True)
class TableRecord:
    """What the game server shows the whole table. Nothing private is in it."""

    hand_id: str
    deck: str
    dealer_commitment: bytes
    """The commitment published at OpenHand, shown before any player committed."""
    seats: tuple[str, ...]
    seed_commitments: tuple[bytes, ...]
    """Every seat's seed commitment, in seat order, announced before any reveal."""
    revealed_seeds: tuple[bytes, ...]
    """Every seat's revealed seed, announced once all had committed."""
    public: tuple[Dealt, ...]
    """Face-up cards (the board; in blackjack every card)."""
    draws: int
    """How many cards the game server drew in all, burns included."""
    closed: Hand
    """The closed hand as the game server relays it (revealed seed and transcript)."""


@dataclass(frozen=True)
class Proofs:
    """The log's inclusion proofs of the hand's commit and reveal entries."""

    commit: InclusionProof
    reveal: InclusionProof


@dataclass(frozen=True)
class SeatReport:
    """One player's verdict on the closed hand."""

    seat: int
    name: str
    ok: bool
    step: str = ""
    """The failed step: seeds, commitment, deck, positions, log or malformed."""
    detail: str = ""
    checkpoint: Checkpoint | None = None
    """The signed checkpoint the reveal was proven against."""

    def line(self) -> str:
        who = f"seat {self.seat + 1} {self.name}"
        if not self.ok:
            return f"{who}: NOT VERIFIED ({self.step}): {self.detail}"
        return f"{who}: verified — {self.detail}"


class Player:
    """A seated player. Its seed is drawn only after the dealer's commitment
    is shown, and revealed only once every seat has committed."""

    def __init__(self, seat: int, name: str, entropy: Callable[[int], bytes] = secrets.token_bytes) -> None:
        self.seat = seat
        self.name = name
        self._entropy = entropy
        self._secret: SeatSecret | None = None
        self._mine: list[Dealt] = []

    def commit(self, hand_id: str, dealer_commitment: bytes) -> bytes:
        """A fresh seed for this hand; only its commitment leaves the player."""
        if len(dealer_commitment) != 32:
            raise VerificationError("commitment", "no dealer commitment was shown before the seeds")
        self._secret = SeatSecret(self.seat, self.name, self._entropy(SEED_BYTES), hand_id, dealer_commitment)
        self._mine = []
        return seed_commitment(hand_id, self.seat, self.name, self._secret.seed)

    def reveal(self, commitments: Sequence[bytes]) -> bytes:
        """The seed, once every seat's commitment is on the table (ours at our seat)."""
        secret = self.secret
        mine = seed_commitment(secret.hand_id, self.seat, self.name, secret.seed)
        if self.seat >= len(commitments) or not hmac.compare_digest(commitments[self.seat], mine):
            raise VerificationError("seeds", f"{self.name}'s commitment is not on the table at its seat")
        return secret.seed

    def receive(self, dealt: Dealt) -> None:
        """A card dealt to this player (privately, when it is a hole card)."""
        self._mine.append(dealt)

    @property
    def secret(self) -> SeatSecret:
        if self._secret is None:
            raise RuntimeError(f"{self.name} has not committed to a seed yet")
        return self._secret

    @property
    def cards(self) -> tuple[Dealt, ...]:
        return tuple(self._mine)


def collect_seeds(
    players: Sequence[Player], hand_id: str, dealer_commitment: bytes
) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """The commit round, then the reveal round; each reveal is checked before it is used.

    Returns (commitments, seeds) in seat order. A reveal that does not open its
    commitment raises VerificationError(step="seeds"): the hand must be
    abandoned (closed with no card dealt), never shuffled without that seed.
    """
    commitments = tuple(p.commit(hand_id, dealer_commitment) for p in players)
    seeds = tuple(p.reveal(commitments) for p in players)
    for p, c, s in zip(players, commitments, seeds, strict=True):
        if not hmac.compare_digest(seed_commitment(hand_id, p.seat, p.name, s), c):
            raise VerificationError("seeds", f"{p.name}'s revealed seed does not open its commitment")
    return commitments, seeds


class FairTable:
    """What both example game servers do with the dealer: open, run the seed
    rounds, shuffle, draw, close, and show the table the record.

    ``shuffle_seeds``, ``tell`` and ``relay`` are where the game server
    passes things on (to the dealer, to one player, to the table). An honest
    table passes them on as they are; the tests override them to play a
    lying game server and see the players catch it.
    """

    deck = "standard"

    def __init__(self, dealer: DealerClient, players: Sequence[Player], out: Callable[[str], None]) -> None:
        self.dealer = dealer
        self.players = list(players)
        self.out = out
        self.drawn: list[Dealt] = []
        self.hand_id = ""
        self.dealer_commitment = b""
        self.commitments: tuple[bytes, ...] = ()
        self.seeds: tuple[bytes, ...] = ()

    def shuffle_seeds(self, seeds: tuple[bytes, ...]) -> Sequence[bytes]:
        return seeds

    def tell(self, player: Player, dealt: Dealt) -> Dealt:
        return dealt

    def relay(self, closed: Hand) -> Hand:
        return closed

    def open(self) -> None:
        """OpenHand (the dealer's commitment is logged), the seed rounds, then ShuffleHand."""
        opened = self.dealer.open_hand(self.deck)
        self.hand_id, self.dealer_commitment = opened.hand_id, opened.commitment
        self.out(f"hand {opened.hand_id} ({opened.deck}, {opened.version})")
        self.out(f"dealer commitment {opened.commitment.hex()}  (log entry {opened.commit_receipt.index})")
        try:
            self.commitments, self.seeds = collect_seeds(self.players, self.hand_id, opened.commitment)
        except VerificationError:
            self.dealer.close_hand(self.hand_id)  # abandoned before any card: revealed, logged, none dealt
            raise
        for p, c in zip(self.players, self.commitments, strict=True):
            self.out(f"  seat {p.seat + 1} {p.name:6} committed {c.hex()[:16]}...")
        self.dealer.shuffle(self.hand_id, self.shuffle_seeds(self.seeds))
        self.out(
            f"all {len(self.seeds)} seeds revealed, each opens its commitment; shuffled with them in order"
        )

    def draw(self, count: int, to: str | Callable[[int], str], round: int = 0) -> list[Dealt]:
        """The next ``count`` cards, all to ``to``, or the i-th to ``to(i)``."""
        draw = self.dealer.draw(self.hand_id, count)
        if draw.position != len(self.drawn):
            raise RuntimeError(f"the dealer drew from position {draw.position}, expected {len(self.drawn)}")
        whom = (lambda i: to) if isinstance(to, str) else to
        cards = [Dealt(draw.position + i, c.code, whom(i), round) for i, c in enumerate(draw.cards)]
        self.drawn.extend(cards)
        return cards

    def give(self, player: Player, dealt: Dealt) -> None:
        player.receive(self.tell(player, dealt))

    def close(self, public: Sequence[Dealt]) -> TableRecord:
        """CloseHand; check the whole deal ourselves, then show the table the record."""
        closed = self.dealer.close_hand(self.hand_id)
        closed.verify(commitment=self.dealer_commitment, dealt=[Card(d.card) for d in self.drawn])
        assert closed.reveal_receipt is not None
        revealed = closed.reveal_receipt.index
        self.out(f"closed after {len(self.drawn)} cards: server seed revealed, log entry {revealed}")
        return TableRecord(
            hand_id=self.hand_id,
            deck=self.deck,
            dealer_commitment=self.dealer_commitment,
            seats=tuple(p.name for p in self.players),
            seed_commitments=self.commitments,
            revealed_seeds=self.seeds,
            public=tuple(public),
            draws=len(self.drawn),
            closed=self.relay(closed),
        )


def fetch_proofs(log: AuditClient, hand_id: str) -> Proofs:
    """The player asks the log itself (not the game server) for the hand's two entries."""
    return Proofs(
        commit=log.inclusion_proof(hand_id=hand_id, reveal=False),
        reveal=log.inclusion_proof(hand_id=hand_id, reveal=True),
    )


def verify_seat(
    me: SeatSecret,
    mine: Sequence[Dealt],
    record: TableRecord,
    proofs: Proofs,
    verifier: Verifier,
    *,
    expected_mine: Sequence[int],
    expected_public: Sequence[int],
) -> SeatReport:
    """One player's check of a closed hand; a report, never an exception.

    ``expected_mine`` and ``expected_public`` are the positions the game's
    rules put this player's cards and the face-up cards at: the player works
    them out from the rules, never takes them from the game server.
    """
    try:
        checkpoint = _verify_seat(me, mine, record, proofs, verifier, expected_mine, expected_public)
    except VerificationError as e:
        return SeatReport(me.seat, me.name, ok=False, step=e.step, detail=e.detail)
    shown = [str(d.position) for d in mine]
    positions = ",".join(shown) if len(shown) <= 6 else ",".join([*shown[:5], "...", shown[-1]])
    detail = (
        f"own seed is seed {me.seat + 1} of {len(record.seats)}, {len(mine)} own cards at {positions}, "
        f"{len(record.public)} face-up, commit #{proofs.commit.index} and reveal #{proofs.reveal.index} "
        f"in the signed log of {checkpoint.size}"
    )
    return SeatReport(me.seat, me.name, ok=True, detail=detail, checkpoint=checkpoint)


def _verify_seat(
    me: SeatSecret,
    mine: Sequence[Dealt],
    record: TableRecord,
    proofs: Proofs,
    verifier: Verifier,
    expected_mine: Sequence[int],
    expected_public: Sequence[int],
) -> Checkpoint:
    closed = record.closed
    t = closed.transcript
    if not me.hand_id == record.hand_id == closed.hand_id or t is None or t.hand_id != me.hand_id:
        raise VerificationError("malformed", f"the relayed hand is not hand {me.hand_id}, closed")
    if not hmac.compare_digest(record.dealer_commitment, me.dealer_commitment):
        raise VerificationError("commitment", "the record's dealer commitment is not the one I was shown")
    if t.deck != record.deck:
        raise VerificationError("malformed", f"the hand was dealt from {t.deck!r}, not {record.deck!r}")
    _check_seeds(me, record)
    # The dealer's seed opens the commitment this player saw before committing its own seed.
    for published in (closed.commitment, t.commitment):
        if not hmac.compare_digest(published, record.dealer_commitment):
            raise VerificationError("commitment", "the revealed hand is not the one committed to at open")
    verify(t)  # the seed opens the commitment; the deck re-derives from all the seeds
    _check_positions(mine, record, expected_mine, expected_public)
    return _check_log(record, proofs, verifier)


def _check_seeds(me: SeatSecret, record: TableRecord) -> None:
    t = record.closed.transcript
    assert t is not None
    n = len(record.seats)
    if me.seat >= n or record.seats[me.seat] != me.name:
        raise VerificationError("seeds", f"{me.name} is not at seat {me.seat + 1}")
    if len(record.seed_commitments) != n or len(record.revealed_seeds) != n:
        raise VerificationError("seeds", f"{n} seats, but not {n} commitments and {n} reveals")
    mine = seed_commitment(record.hand_id, me.seat, me.name, me.seed)
    if not hmac.compare_digest(record.seed_commitments[me.seat], mine):
        raise VerificationError("seeds", "my seed commitment is not the one announced for my seat")
    announced = zip(record.seats, record.seed_commitments, record.revealed_seeds, strict=True)
    for seat, (name, c, s) in enumerate(announced):
        if not hmac.compare_digest(seed_commitment(record.hand_id, seat, name, s), c):
            raise VerificationError("seeds", f"seat {seat + 1}'s revealed seed does not open its commitment")
    if len(t.client_seeds) != n or not all(
        hmac.compare_digest(a, b) for a, b in zip(t.client_seeds, record.revealed_seeds, strict=True)
    ):
        raise VerificationError("seeds", "the deck was not shuffled with exactly the revealed seeds in order")
    if not hmac.compare_digest(t.client_seeds[me.seat], me.seed):
        raise VerificationError("seeds", "my own seed is not in the shuffle")


def _check_positions(
    mine: Sequence[Dealt], record: TableRecord, expected_mine: Sequence[int], expected_public: Sequence[int]
) -> None:
    t = record.closed.transcript
    assert t is not None
    if [d.position for d in mine] != list(expected_mine):
        raise VerificationError(
            "positions", f"my cards are not at the positions the rules give ({expected_mine})"
        )
    if [d.position for d in record.public] != list(expected_public):
        raise VerificationError("positions", "the face-up cards are not at the positions the rules give")
    if record.draws != record.closed.dealt_count:
        raise VerificationError(
            "positions", f"the game says it drew {record.draws} cards, the dealer {record.closed.dealt_count}"
        )
    spec = DeckSpec.parse(t.deck)
    for d in (*mine, *record.public):
        if not 0 <= d.position < record.draws:
            raise VerificationError("positions", f"position {d.position} was never drawn")
        actual = spec.card_for_id(t.cards[d.position]).code
        if not hmac.compare_digest(actual.encode(), d.card.encode()):
            raise VerificationError(
                "positions", f"position {d.position} ({d.to}) was said to be {d.card}, the deck has {actual}"
            )


def _check_log(record: TableRecord, proofs: Proofs, verifier: Verifier) -> Checkpoint:
    """Both entries are in a tree whose checkpoint the log key signed, and say what we saw."""
    try:
        proofs.commit.verify(verifier)
        check_commit_entry(proofs.commit.entry, record.closed, record.dealer_commitment)
        checkpoint = proofs.reveal.verify(verifier)
        check_reveal_entry(proofs.reveal.entry, record.closed)
    except (InvalidInput, NoteError) as e:
        raise VerificationError("log", str(e)) from None
    return checkpoint


class GameResult(Protocol):
    @property
    def all_verified(self) -> bool: ...


def game_main(
    name: str,
    description: str | None,
    run: Callable[..., GameResult],
    players: tuple[int, int, int],
    argv: Sequence[str] | None = None,
) -> int:
    """The command line both games share: ``--target``, ``--key``, ``--players``
    (``players`` is (least, most, default)); tokens come from FAIRDECK_API_TOKEN
    and FAIRDECK_AUDIT_TOKEN. Exit 0 when every player verified, 1 when one did
    not or the dealer refused, 2 for a bad key."""
    least, most, default = players
    parser = argparse.ArgumentParser(prog=name, description=description)
    parser.add_argument("--target", default="127.0.0.1:50051", metavar="HOST:PORT")
    parser.add_argument(
        "--key", required=True, metavar="VKEY|@FILE", help="the log's verifier key (from `fairdeck key`)"
    )
    parser.add_argument("--players", type=int, default=default, help=f"{least}..{most} (default {default})")
    args = parser.parse_args(argv)
    if not least <= args.players <= most:
        parser.error(f"--players must be {least}..{most}")
    try:
        verifier = load_verifier(args.key)
    except (OSError, NoteError) as e:
        print(f"{name}: bad --key: {e}", file=sys.stderr)
        return 2
    options: dict[str, Any] = {
        "players": args.players,
        "api_token": os.environ.get("FAIRDECK_API_TOKEN"),
        "audit_token": os.environ.get("FAIRDECK_AUDIT_TOKEN"),
    }
    try:
        result = run(args.target, verifier, **options)
    except (FairdeckError, VerificationError) as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    return 0 if result.all_verified else 1
