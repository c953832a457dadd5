"""The audit of a log's co-dealt entries (docs/codealing-spec.md section 11; docs/log-format.md).

``CodealLogAudit`` is fed every co-dealt entry of a log in order (``add``) and says, as
(index, hand id, problem), what does not hold: an entry that ``decode_entry`` rejects; for each
hand, one setup entry, then exactly its K shuffle entries in holder order, then one shares entry per
dealt position in position order, then one seals entry per co-dealer in holder order (or none: a hand
closed before seals were logged, counted in ``unsealed``), then one seeds entry, nothing after it,
nothing for a hand without a setup; each seals entry by ``seal_log.seals_problem`` (signatures only
under pinned ``codealer_keys``); and, once the seeds are logged, the whole record by ``verify_hand``
(spec section 10). The identity signatures of section 5.5 are not in the log. A hand's first
problem is its only finding.
An entry equal to one the hand already logged, its time aside, is a repeat (a retry after a crash
between an append and the dealer noting it), counted in ``repeated``, never a finding: it adds
nothing to the record, and an honest dealer must not look like a cheater for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container
from dataclasses import dataclass, field

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, SHARES, SHUFFLE, decode_entry
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.keys import KeyRecord
from fairdeck.codeal.record import ShuffleRecord
from fairdeck.codeal.seal_log import Seal, seals_problem
from fairdeck.codeal.shares import Share, open_card
from fairdeck.codeal.verify import CodealHand, DealtPosition, verify_hand
from fairdeck.core.decks import DeckSpec

Found = tuple[int | None, str | None, str]
"""A finding: (entry index, hand id, problem); the index None for one about a whole hand."""
NAMES = {SETUP: "setup", SHUFFLE: "shuffle", SHARES: "shares", SEEDS: "seeds", SEALS: "seals"}
TIME = slice(5, 13)
"""Where an entry's u64 time_ms lies: after "FDL1" and the type byte (section 11)."""
DIGEST = 16
"""Bytes of SHA-256 kept per logged entry to know a repeat (a hand logs a few dozen entries)."""


def timeless(data: bytes) -> bytes:
    """What makes an entry the same entry: its bytes without its time, hashed (``DIGEST`` bytes)."""
    return hashlib.sha256(data[: TIME.start] + data[TIME.stop :]).digest()[:DIGEST]


@dataclass
class _Hand:
    index: int
    """Its setup entry's."""
    deck: str
    keys: tuple[bytes, ...]
    shuffles: list[bytes] = field(default_factory=list)
    dealt: list[tuple[int, tuple[bytes, ...]]] = field(default_factory=list)
    seals: list[list[Seal]] = field(default_factory=list)
    """Each co-dealer's seals entry so far, holder order."""
    done: bool = False
    """Its seeds entry is logged (verified or not)."""
    verified: bool = False
    """Its seeds are logged and its whole record verifies."""
    broken: bool = False
    """A problem was found: later entries of the hand are not checked."""
    holders: int = 0
    logged: bytes = b""
    """``timeless`` of each entry of the hand accepted so far, concatenated (kept after release)."""
    time_ms: int = 0
    """Its setup entry's time."""

    def __post_init__(self) -> None:
        self.holders = len(self.keys)

    def repeats(self, data: bytes) -> bool:
        """Whether ``data`` is, its time aside, an entry this hand already logged."""
        digest = timeless(data)
        return any(self.logged[i : i + DIGEST] == digest for i in range(0, len(self.logged), DIGEST))

    def release(self) -> None:
        """Nothing later needs its records (checked, or broken): memory stays small per hand."""
        self.keys, self.shuffles, self.dealt, self.seals = (), [], [], []


@dataclass
class CodealLogAudit:
    hands: dict[str, _Hand] = field(default_factory=dict)
    repeated: int = 0
    """Entries equal, their time aside, to one their hand already logged: not counted twice."""
    codealer_keys: tuple[bytes, ...] = ()
    """The co-dealers' identity keys the auditor pinned, holders 1..K-1: seal signatures are
    checked only with them (a hand of another number of co-dealers: not checked)."""
    unsealed: int = 0
    """Hands whose seeds are logged with no seals entry (closed before seals were logged)."""
    seals_verified: int = 0
    """Seals entries whose signatures verified under ``codealer_keys``."""

    @property
    def verified(self) -> int:
        """Hands whose seeds are logged, whose whole record verifies, and with no finding."""
        return sum(1 for h in self.hands.values() if h.verified and not h.broken)

    def knows(self, hand_id: str) -> bool:
        """Whether a co-dealt setup entry named ``hand_id``."""
        return hand_id in self.hands

    def add(
        self, index: int, data: bytes, ordinary: Container[str] = frozenset()
    ) -> tuple[int | None, list[Found]]:
        """The next co-dealt entry, at ``index`` (``ordinary``: the ordinary hands' ids so far): its
        time (None if it does not parse) and its findings."""
        try:
            e = decode_entry(data)
        except CodealError as error:
            return None, [(index, None, f"co-dealt entry does not parse: {error.detail}")]
        name, hand = NAMES[e.kind], self.hands.get(e.hand_id)
        if hand is not None and not hand.broken and hand.repeats(data):
            self.repeated += 1
            return e.time_ms, []
        if e.kind == SETUP:
            if hand is not None or e.hand_id in ordinary:
                what = "a co-dealt hand" if hand is not None else "an ordinary hand"
                if hand is None:  # its later entries are this hand's, not entries of no hand
                    hand = self.hands[e.hand_id] = _Hand(index, e.deck, e.records)
                hand.broken = True  # which record is the hand's is no longer known
                hand.release()
                return e.time_ms, [(index, e.hand_id, f"co-dealt setup entry for {what} already in the log")]
            self.hands[e.hand_id] = _Hand(index, e.deck, e.records, logged=timeless(data), time_ms=e.time_ms)
            return e.time_ms, []
        if hand is None:
            return e.time_ms, [(index, e.hand_id, f"co-dealt {name} entry for a hand with no setup entry")]
        if hand.broken:
            return e.time_ms, []
        problem = self._place(hand, e.kind, e.records, e.position)
        if problem is None and e.kind == SEALS:
            problem = self._sealed(e.hand_id, hand, e.seals())
        if problem is None:
            hand.logged += timeless(data)
        if problem is None and e.kind == SEEDS:
            problem = _verify(e.hand_id, hand, e.records)
            hand.verified = problem is None
        if problem is not None or hand.done:
            hand.broken = problem is not None
            hand.release()
        return e.time_ms, [] if problem is None else [(index, e.hand_id, problem)]

    def _place(self, hand: _Hand, kind: int, records: tuple[bytes, ...], position: int) -> str | None:
        """Entry order (section 11): the problem, or None with the entry recorded."""
        name, k = NAMES[kind], hand.holders
        if hand.done:
            return f"co-dealt {name} entry after the hand's seeds entry (section 11: nothing follows it)"
        if kind == SHUFFLE:
            holder = int.from_bytes(records[0][:4], "big") if len(records[0]) >= 4 else None
            due = len(hand.shuffles)
            if hand.dealt or due == k:
                return f"co-dealt shuffle entry of holder {holder} after the hand's {k} shuffles"
            if holder != due:
                return (
                    f"co-dealt shuffle entry of holder {holder} where holder {due}'s is due "
                    "(section 11: one per holder, in holder order)"
                )
            hand.shuffles.append(records[0])
            return None
        if len(hand.shuffles) < k:
            return (
                f"co-dealt {name} entry after {len(hand.shuffles)} of the hand's {k} shuffle entries "
                "(section 11: every shuffle is logged before any card is dealt)"
            )
        if kind == SHARES and hand.seals:
            return "co-dealt shares entry after the hand's seals entries (section 11: shares, seals, seeds)"
        if kind == SEALS:
            due = len(hand.seals) + 1
            if due == k:
                return f"co-dealt seals entry of co-dealer {position} after the hand's {k - 1} seals entries"
            if position != due:
                return (
                    f"co-dealt seals entry of co-dealer {position} where co-dealer {due}'s is due "
                    "(section 11: one per co-dealer, in holder order)"
                )
            return None
        if kind == SEEDS and 0 < len(hand.seals) < k - 1:
            return f"co-dealt seeds entry after {len(hand.seals)} of the hand's {k - 1} seals entries"
        if kind == SHARES:
            due = len(hand.dealt)
            if position != due:
                return (
                    f"co-dealt shares entry for position {position} where position {due}'s is due "
                    "(section 11: one per dealt position, in order)"
                )
            hand.dealt.append((position, records))
            return None
        hand.done = True
        self.unsealed += not hand.seals
        return None

    def _sealed(self, hand_id: str, hand: _Hand, seals: list[Seal]) -> str | None:
        """A seals entry placed in order: its checks (``seals_problem``), recorded if they hold."""
        keys = self.codealer_keys if len(self.codealer_keys) == hand.holders - 1 else ()
        ctx = _context(hand_id, hand) if keys else None
        k = len(hand.seals) + 1
        first = hand.seals[0] if hand.seals else None
        problem = seals_problem(k, seals, [p for p, _ in hand.dealt], first, ctx, keys)
        if problem is None:
            hand.seals.append(seals)
            self.seals_verified += ctx is not None
        return problem

    def finish(self) -> list[Found]:
        """Hands whose opening is cut short: a setup without all its shuffle entries."""
        cut = [
            (i, h) for i, h in self.hands.items() if not (h.broken or h.done) and len(h.shuffles) < h.holders
        ]
        found: list[Found] = [
            (h.index, hand_id, f"co-dealt hand set up with {h.holders} key holders has "
             f"{len(h.shuffles)} shuffle entries (section 11: all are logged when it opens)")
            for hand_id, h in cut
        ]  # fmt: skip
        for _, h in cut:
            h.broken = True
            h.release()
        return found

    @property
    def set_up(self) -> int:
        """Hands with a setup entry."""
        return len(self.hands)

    @property
    def open(self) -> int:
        """Hands set up whose seeds are not logged (yet)."""
        return sum(1 for h in self.hands.values() if not h.done and not h.broken)

    def open_before(self, before_ms: int) -> int:
        """Hands still open (as ``open``) whose setup was logged before ``before_ms``."""
        return sum(1 for h in self.hands.values() if not h.done and not h.broken and h.time_ms < before_ms)


def _verify(hand_id: str, hand: _Hand, seeds: tuple[bytes, ...]) -> str | None:
    """Spec section 10 over the hand's logged record; the problem, naming the step, or None."""
    cards = _opened(hand_id, hand)
    record = CodealHand(
        hand.deck,
        hand_id,
        hand.keys,
        tuple(hand.shuffles),
        tuple(DealtPosition(p, cards.get(p, -1), shares) for p, shares in hand.dealt),
        seeds,
    )
    try:
        verify_hand(record)
    except CodealError as e:
        return f"co-dealt hand fails at step {e.step} (codealing-spec section 10): {e.detail}"
    return None


def _opened(hand_id: str, hand: _Hand) -> dict[int, int]:
    """The card each position's shares open (the log claims no card: the shares say it). A record
    that does not open here fails ``verify_hand`` at the step it is wrong at, so it is skipped."""
    ctx = _context(hand_id, hand)
    try:
        if ctx is None:
            return {}
        final = ShuffleRecord.decode(hand.shuffles[-1], ctx.deck.size, len(hand.shuffles) - 1).deck
    except (CodealError, ValueError):
        return {}
    out = {}
    for p, shares in hand.dealt:
        try:
            opened = [Share.decode(s, f"position {p} share {k}") for k, s in enumerate(shares)]
            out[p] = open_card(ctx, p, final[p], opened)
        except (CodealError, IndexError):
            continue
    return out


def _context(hand_id: str, hand: _Hand) -> HandContext | None:
    """The hand context (spec section 5.3) of the setup entry; None if it does not decode (the
    seeds' ``verify_hand`` then names the step)."""
    try:
        spec = DeckSpec.parse(hand.deck)
        keys = [KeyRecord.decode(data, k) for k, data in enumerate(hand.keys)]
        return HandContext(spec, hand_id, tuple(r.key for r in keys), tuple(r.commitment for r in keys))
    except (CodealError, ValueError):
        return None
