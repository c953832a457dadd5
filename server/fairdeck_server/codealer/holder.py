"""The co-dealer's rules over its ledger: announce, shuffle, share, reveal (docs/codealing-spec.md).

One fresh key and seed per hand; every key record and earlier shuffle verified before its own; key
and shuffle records signed by its identity (5.5). A share only (a) once it shuffled, (b) for the
next position of the deal order, or again to that position's seat, (c) of a final deck descending
from its own signed shuffle (6.5), (d) sealed to one seat while the hand runs, once, with a signed
statement and the digest of the seat's release token (9.1, 9.3); public shares of dealt positions
after the hand ended (a reveal, or ``expire`` at ``lifetime_ms`` from its announce), those of
sealed positions only once the seed could be answered. The seed only with a release of every seat
given a sealed share, or ``reveal_hold_ms`` after its last sealed share, checked in the transaction that
ends the hand (9.3). Each rule is checked before a share is made and again in the one transaction
that records the position (and seal) before any answer. Read-work-write calls for one hand (a
shuffle) run one at a time (``HAND_LOCKS``); the decoded-hand cache has its own lock (worker
threads). Refusals are ``DealerError``s; no grpc here.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.codeal.context import MAX_HOLDERS, MIN_HOLDERS, HandContext
from fairdeck.codeal.elgamal import Deck, decode_deck, encode_deck, initial_deck
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import Random, Scalar
from fairdeck.codeal.identity import key_statement, shuffle_statement, sign
from fairdeck.codeal.keys import KeyRecord, new_holder, verify_key_record
from fairdeck.codeal.proof import prove_shuffle, verify_shuffle
from fairdeck.codeal.record import ShuffleRecord, sign_shuffle, verify_signature
from fairdeck.codeal.seal import canonical_seat_key, release_digest, seal_share, seal_share_released
from fairdeck.codeal.seal_statement import sign_seal
from fairdeck.codeal.shares import make_share
from fairdeck.codeal.shuffle import check_fresh, permutation, randomness, shuffle_deck
from fairdeck.core.decks import DeckSpec, DeckSpecError
from fairdeck.core.seeds import SeedError, check_hand_id
from fairdeck.wire import Reason
from fairdeck_server import refusals
from fairdeck_server.codealer.ledger import (
    HandRow,
    Ledger,
    Releases,
    read_hand,
    read_releases,
    read_seals,
    read_shares,
)
from fairdeck_server.dealing.vault import SeedVault


@dataclass(frozen=True)
class GivenShares:
    """Shares as given, one per position: public (``shares``) or sealed to a seat (``sealed``)."""

    shares: tuple[bytes, ...] = ()
    sealed: tuple[bytes, ...] = ()
    seal_signatures: tuple[bytes, ...] = ()
    """One per sealed share: the identity key's signature over its seal statement (section 9.1)."""


CACHE_HANDS = 4096
"""Hands whose decoded context, final deck and key the co-dealer keeps in memory."""
HAND_LOCKS = 64
"""Striped per-hand locks: bounded, whatever hand ids callers name."""
RELEASE_BYTES = 32
MAX_RELEASES = 4096
"""Release tokens one RevealSeed may carry (a seat's every position of every co-dealer fits)."""
DEFAULT_REVEAL_HOLD_MS = 1_800_000
"""``codealer serve --reveal-hold``'s default: half the dealer's default hand lifetime, so its
void of an abandoned hand (at its lifetime) finds the hold passed."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class CoDealer:
    """One co-dealer: its identity, its ledger, and the vault its per-hand secrets are sealed with."""

    def __init__(
        self,
        ledger: Ledger,
        identity: Ed25519PrivateKey,
        vault: SeedVault,
        *,
        random: Random = secrets.token_bytes,
        clock_ms: Callable[[], int] = _now_ms,
        lifetime_ms: int = 0,
        reveal_hold_ms: int = DEFAULT_REVEAL_HOLD_MS,
    ) -> None:
        self.ledger = ledger
        self.reveal_hold_ms = reveal_hold_ms
        """After this long from a hand's last sealed share, its seed needs no seat's release (9.3)."""
        self.lifetime_ms = lifetime_ms
        """A hand not ended this long after its announce is ended here (``expire``); 0: never."""
        self.expired = 0
        """Hands ``expire`` ended since this process started."""
        self.identity = identity
        self.identity_key = identity.public_key().public_bytes_raw()
        self.vault = vault
        self.random = random
        self.clock_ms = clock_ms
        self._cache: dict[str, tuple[HandContext, Deck, Scalar]] = {}
        self._cache_lock = threading.Lock()
        self._hand_locks = tuple(threading.Lock() for _ in range(HAND_LOCKS))

    # -- announce ------------------------------------------------------------------------------

    def announce(self, hand_id: str, deck: str, holder: int, holders: int) -> tuple[bytes, bytes]:
        """(key record, identity signature) of a fresh key and seed for the hand; the same on a repeat,
        unless the hand ended (refused HAND_CLOSED: how the dealer checks a pooled deck is live)."""
        _check_hand_id(hand_id)
        spec = _spec(deck)
        if not MIN_HOLDERS <= holders <= MAX_HOLDERS or not 1 <= holder < holders:
            raise refusals.invalid(
                "holder", Reason.INVALID_TRANSCRIPT, f"want 1 <= holder < holder_count <= {MAX_HOLDERS}"
            )
        known = self.ledger.transaction(lambda db: read_hand(db, hand_id))
        if known is not None and known.revealed:  # a repeat needs no fresh key: none is made
            raise _ended(known)
        secrets_ = new_holder(spec, hand_id, holder, self.random)
        record = secrets_.record.encode()
        signature = sign(self.identity, key_statement(spec, hand_id, holder, holders, record))
        sealed = self.vault.seal(hand_id, secrets_.x + secrets_.seed)

        def store(db: sqlite3.Connection) -> tuple[bytes, bytes]:
            row = read_hand(db, hand_id)
            if row is not None:
                if (row.deck, row.holder, row.holders) != (deck, holder, holders):
                    raise refusals.invalid(
                        "hand_id",
                        Reason.INVALID_TRANSCRIPT,
                        "this hand was announced with another deck or holder",
                    )
                if row.revealed:
                    raise _ended(row)
                return row.key_record, row.key_signature
            db.execute(
                "INSERT INTO hands (hand_id, deck, holder, holders, sealed_secrets, key_record, "
                "key_signature, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (hand_id, deck, holder, holders, sealed, record, signature, self.clock_ms()),
            )
            return record, signature

        return self.ledger.transaction(store)

    # -- shuffle -------------------------------------------------------------------------------

    def shuffle(
        self, hand_id: str, key_records: Sequence[bytes], earlier: Sequence[bytes]
    ) -> tuple[bytes, bytes]:
        """Verify every key record and every earlier shuffle, then shuffle, prove and sign. Two
        calls for one hand run one after the other: the second sees the first's record."""
        _check_hand_id(hand_id)
        with self._hand_lock(hand_id):
            return self._shuffle(hand_id, key_records, earlier)

    def _shuffle(
        self, hand_id: str, key_records: Sequence[bytes], earlier: Sequence[bytes]
    ) -> tuple[bytes, bytes]:
        row = self._row(hand_id)
        inputs = _joined(key_records) + b"|" + _joined(earlier)
        if row.revealed and row.shuffle_record is None:
            raise _ended(row)
        if row.shuffle_record is not None and row.shuffle_signature is not None:
            if row.shuffle_inputs != inputs:
                raise refusals.codeal(
                    Reason.HAND_ALREADY_SHUFFLED,
                    "this co-dealer already shuffled this hand from other inputs",
                )
            return row.shuffle_record, row.shuffle_signature
        spec = _spec(row.deck)
        if len(key_records) != row.holders:
            raise refusals.invalid(
                "key_records", Reason.INVALID_TRANSCRIPT, f"want {row.holders} key records"
            )
        if key_records[row.holder] != row.key_record:
            raise refusals.invalid(
                "key_records", Reason.INVALID_TRANSCRIPT, f"key record {row.holder} is not this co-dealer's"
            )
        if len(earlier) != row.holder:
            raise refusals.invalid(
                "shuffle_records",
                Reason.INVALID_TRANSCRIPT,
                f"want the {row.holder} shuffles before this one",
            )
        x, seed = self._secrets(row)
        try:
            records = [KeyRecord.decode(r, k) for k, r in enumerate(key_records)]
            for k, record in enumerate(records):
                verify_key_record(spec, hand_id, k, record)
            ctx = HandContext(
                spec, hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records)
            )
            deck = _follow(ctx, initial_deck(spec), earlier, 0)
        except CodealError as e:
            raise refusals.invalid(
                "shuffle_records" if e.step == "shuffle" else "key_records", Reason.INVALID_TRANSCRIPT, str(e)
            ) from None
        k = row.holder
        psi = permutation(spec, hand_id, k, seed)
        rs = randomness(spec, hand_id, k, seed)
        after = shuffle_deck(deck, psi, rs, ctx.joint_key)
        proof = prove_shuffle(ctx, k, deck, after, psi, rs, self.random)
        shuffle_record = sign_shuffle(ctx, k, deck, after, proof, x, self.random).encode()
        signature = sign(self.identity, shuffle_statement(ctx, shuffle_record))
        final = encode_deck(after) if k == row.holders - 1 else None

        def store(db: sqlite3.Connection) -> tuple[bytes, bytes]:
            now = read_hand(db, hand_id)
            if now is not None and now.shuffle_record is not None and now.shuffle_signature is not None:
                if now.shuffle_inputs != inputs:  # only the hand's lock keeps this from happening
                    raise refusals.codeal(
                        Reason.HAND_ALREADY_SHUFFLED,
                        "this co-dealer already shuffled this hand from other inputs",
                    )
                return now.shuffle_record, now.shuffle_signature
            if now is not None and now.revealed:  # ended (its lifetime) while this one shuffled
                raise _ended(now)
            db.execute(
                "UPDATE hands SET key_records = ?, shuffle_inputs = ?, shuffle_record = ?, "
                "shuffle_signature = ?, final_deck = ? WHERE hand_id = ?",
                (b"".join(key_records), inputs, shuffle_record, signature, final, hand_id),
            )
            return shuffle_record, signature

        return self.ledger.transaction(store)

    # -- share ---------------------------------------------------------------------------------

    def share(
        self,
        hand_id: str,
        position: int,
        seat_key: bytes,
        later: Sequence[bytes],
        count: int = 1,
        seats: Sequence[bytes] = (),
    ) -> GivenShares:
        """Shares of the final deck's cards at ``position .. position + count - 1``, sealed to
        ``seat_key`` (empty: public), or ``count`` positions to each of ``seats`` in turn;
        recorded, in one durable step, before any is made."""
        row = self._row(hand_id)
        if row.shuffle_record is None or row.key_records is None:
            raise refusals.codeal(Reason.HAND_NOT_SHUFFLED, "this co-dealer has not shuffled this hand yet")
        spec = _spec(row.deck)
        field = "seat_public_keys" if seats else "seat_public_key"
        if seats and (seat_key or not all(seats)):
            raise refusals.invalid(field, Reason.INVALID_SEAT_KEY, "seat keys, and not seat_public_key too")
        if len(set(seats)) != len(seats):
            raise refusals.invalid(
                field, Reason.INVALID_SEAT_KEY, "two seats with one key: each seat makes its own"
            )
        keys = list(seats) if seats else [seat_key]
        if position < 0 or position + len(keys) * max(count, 1) > spec.size:  # before any work per key
            raise refusals.codeal(
                Reason.SHARE_OUT_OF_ORDER, f"positions must be below {spec.size}", "position"
            )
        for key in keys:
            if key and len(key) != 32:
                raise refusals.invalid(field, Reason.INVALID_SEAT_KEY, "an X25519 key is 32 bytes")
            if key and not canonical_seat_key(key):  # another spelling of a key: another "seat"
                raise refusals.invalid(field, Reason.INVALID_SEAT_KEY, "a non-canonical X25519 key")
            if key:
                try:  # a low-order key is refused before the positions are recorded as its
                    seal_share(spec, hand_id, position, row.holder, bytes(128), key, self.random)
                except CodealError:
                    raise refusals.invalid(field, Reason.INVALID_SEAT_KEY, "a low-order X25519 key") from None
        owners = [key for key in keys for _ in range(max(count, 1))]  # each position's seat key, in order
        ctx, final, x = self._hand_state(row, spec, later)
        positions = range(position, position + len(owners))

        Seals = dict[int, tuple[bytes, bytes, bytes, bytes]]

        def record(db: sqlite3.Connection, fresh: Seals | None) -> Seals:
            """The rules, position by position; with ``fresh`` (sealed draws: the seals made after
            a first pass that wrote nothing), the positions and their seals recorded together."""
            now = read_hand(db, hand_id)
            given = read_shares(db, hand_id)
            ended = now is not None and now.revealed

            @functools.cache  # read once a pass: the loop writes no sealed share it would read
            def opened() -> bool:  # a seat's card made public: only once the seed could be
                last = read_releases(db, hand_id).last_sealed_ms
                return now is not None and (now.released or self._hold_passed(last))

            write = fresh is not None or not any(owners)
            for p, owner in zip(positions, owners, strict=True):
                if p in given:
                    if given[p] == owner or (ended and not owner and (not given[p] or opened())):
                        continue  # the same share again (a retry), or a dealt card made public after the hand
                    if ended and not owner:
                        raise refusals.codeal(
                            Reason.SEATS_NOT_RELEASED,
                            f"position {p} went to a seat that has not released the hand (its seed "
                            "was not answered): it is not made public before the hold",
                            "seat_releases",
                        )
                    raise refusals.codeal(
                        Reason.SHARE_GIVEN_TO_ANOTHER_SEAT,
                        f"position {p}'s share went to another seat",
                        field,
                    )
                if ended and now is not None:
                    raise _ended(now)
                if p != len(given):
                    raise refusals.codeal(
                        Reason.SHARE_OUT_OF_ORDER,
                        f"the next position of the deal order is {len(given)}",
                        "position",
                    )
                if write:
                    db.execute(
                        "INSERT INTO shares (hand_id, position, seat_key, given_ms) VALUES (?, ?, ?, ?)",
                        (hand_id, p, owner, self.clock_ms()),
                    )
                given[p] = owner
            if fresh:  # a twin that stored a position's seal first wins: both answer its bytes
                db.executemany(
                    "INSERT OR IGNORE INTO seals (hand_id, position, seat_key, sealed, signature, "
                    "release_sha256) VALUES (?, ?, ?, ?, ?, ?)",
                    [(hand_id, p, *seal) for p, seal in fresh.items()],
                )
            made = read_seals(db, hand_id) if any(owners) else {}
            return {p: (*m, b"") for p, m in made.items()}

        if not any(owners):
            self.ledger.transaction(lambda db: record(db, None))
            shares = [make_share(ctx, p, row.holder, x, final[p], self.random).encode() for p in positions]
            return GivenShares(shares=tuple(shares))
        # Sealed: the rules first, writing nothing (a refusal costs no share), then the seals of the
        # positions not sealed yet, then the rules again with the positions and seals written in
        # one durable step before any of it is answered.
        pairs = list(zip(positions, owners, strict=True))
        made = self.ledger.transaction(lambda db: record(db, None))
        fresh = {p: self._seal(row, ctx, x, final, p, owner) for p, owner in pairs if p not in made}
        made = self.ledger.transaction(lambda db: record(db, fresh))
        if any(made[p][0] != owner for p, owner in pairs):  # the shares table says otherwise: never
            raise refusals.codeal(
                Reason.SHARE_GIVEN_TO_ANOTHER_SEAT, "a position's share went to another seat"
            )
        return GivenShares(
            sealed=tuple(made[p][1] for p, _ in pairs),
            seal_signatures=tuple(made[p][2] for p, _ in pairs),
        )

    def _seal(
        self, row: HandRow, ctx: HandContext, x: Scalar, final: Deck, p: int, owner: bytes
    ) -> tuple[bytes, bytes, bytes, bytes]:
        """(seat key, sealed share, signature of its seal statement, digest of the seat's release
        token) for position ``p`` (9.1, 9.3); the token itself is dropped here."""
        share = make_share(ctx, p, row.holder, x, final[p], self.random).encode()
        sealed, token = seal_share_released(ctx.deck, row.hand_id, p, row.holder, share, owner, self.random)
        signature = sign_seal(self.identity, ctx, p, row.holder, owner, sealed).signature
        return owner, sealed, signature, release_digest(token)

    def _hand_state(
        self, row: HandRow, spec: DeckSpec, later: Sequence[bytes]
    ) -> tuple[HandContext, Deck, Scalar]:
        """The hand's context, final deck and key, decoded once and kept (a bounded cache)."""
        with self._cache_lock:
            cached = self._cache.get(row.hand_id)
        if cached is not None:
            if later:
                self._final(row, cached[0], later)  # still checks a later record given again
            return cached
        ctx = self._context(row, spec)
        state = (ctx, self._final(row, ctx, later), self._secrets(row)[0])
        with self._cache_lock:  # worker threads evict at once: each must pick its own oldest
            while self._cache and len(self._cache) >= CACHE_HANDS:
                self._cache.pop(next(iter(self._cache)))
            self._cache[row.hand_id] = state
        return state

    # -- reveal --------------------------------------------------------------------------------

    def reveal(self, hand_id: str, releases: Sequence[bytes] = ()) -> bytes:
        """End the hand and return the seed: no seat gets a share of it from now on. Only with a
        release of every seat given a sealed share, or past the hold (9.3); else SEATS_NOT_RELEASED,
        nothing recorded. The check and the end are one transaction: no seal slips between."""
        row = self._row(hand_id)
        if row.shuffle_record is None:
            raise refusals.codeal(Reason.HAND_NOT_SHUFFLED, "this co-dealer has not shuffled this hand yet")
        if len(releases) > MAX_RELEASES or any(len(t) != RELEASE_BYTES for t in releases):
            raise refusals.invalid(
                "seat_releases",
                Reason.MALFORMED_REQUEST,
                f"want at most {MAX_RELEASES} release tokens of {RELEASE_BYTES} bytes each",
            )
        digests = [release_digest(t) for t in releases]
        seen = self.ledger.transaction(lambda db: read_releases(db, hand_id))
        missing = _unreleased(seen, digests)  # the comparisons outside the ledger's lock

        def end(db: sqlite3.Connection) -> None:
            now_row = read_hand(db, hand_id)
            state = read_releases(db, hand_id)
            # Answered once: again to a retry. Else the check, on the state this transaction sees
            # (a seal made since the first read is checked too: no seal slips in between).
            if (now_row is None or not now_row.released) and not self._hold_passed(state.last_sealed_ms):
                unreleased = missing if state == seen else _unreleased(state, digests)
                if state.restored:  # its seats are not all known: releases cannot stand for them
                    raise refusals.codeal(
                        Reason.SEATS_NOT_RELEASED,
                        "the hand was ended by codealer restored (its ledger may lack seats it was "
                        f"dealt to): its seed is answered {self.reveal_hold_ms / 1000:g} s after the "
                        "restore, whatever releases come",
                        "seat_releases",
                    )
                if unreleased:
                    raise refusals.codeal(
                        Reason.SEATS_NOT_RELEASED,
                        f"{unreleased} of the {len(state.digests)} seats dealt sealed cards have not "
                        f"released the hand: its seed is answered with a release of each (or "
                        f"{self.reveal_hold_ms / 1000:g} s after its last sealed share)",
                        "seat_releases",
                    )
            now = self.clock_ms()
            db.execute(
                "UPDATE hands SET revealed = 1, revealed_ms = coalesce(revealed_ms, ?), "
                "released_ms = coalesce(released_ms, ?) WHERE hand_id = ?",
                (now, now, hand_id),
            )

        self.ledger.transaction(end)
        return self._secrets(row)[1]

    def _hold_passed(self, last_sealed_ms: int | None) -> bool:
        """Whether a hand needs no release: nothing sealed, or the hold passed since its last seal."""
        return last_sealed_ms is None or self.clock_ms() - last_sealed_ms >= self.reveal_hold_ms

    def expire(self, go_on: Callable[[], bool] = lambda: True) -> int:
        """End every hand announced over ``lifetime_ms`` ago and not ended (one durable write per
        batch, before anything about it is answered); how many. ``expired`` counts each batch as
        it commits: a LedgerError of a later one (raised) leaves it counting those ended before.
        Between batches it stops once ``go_on()`` is False (the co-dealer stopping)."""
        if self.lifetime_ms <= 0:
            return 0
        now = self.clock_ms()

        def committed(ended: int) -> bool:
            self.expired += ended
            return go_on()

        return self.ledger.expire(now - self.lifetime_ms, now, committed)

    def seal_statements(self, hand_id: str) -> list[tuple[int, bytes, bytes, bytes]]:
        """(position, seat key, SHA-256 of the sealed share, signature) of every position sealed for
        the hand, ascending: published after the hand (spec sections 9.1 and 11)."""
        made = self.ledger.seals(hand_id)
        return [
            (p, key, hashlib.sha256(sealed).digest(), sig) for p, (key, sealed, sig) in sorted(made.items())
        ]

    # -- helpers -------------------------------------------------------------------------------

    def _hand_lock(self, hand_id: str) -> threading.Lock:
        return self._hand_locks[hash(hand_id) % HAND_LOCKS]

    def _row(self, hand_id: str) -> HandRow:
        _check_hand_id(hand_id)
        row = self.ledger.hand(hand_id)
        if row is None:
            raise refusals.hand_not_found()
        return row

    def _secrets(self, row: HandRow) -> tuple[Scalar, bytes]:
        opened = self.vault.open(row.hand_id, row.sealed_secrets)
        return Scalar(opened[:32]), opened[32:]

    def _context(self, row: HandRow, spec: DeckSpec) -> HandContext:
        blob = row.key_records or b""
        records = [KeyRecord.decode(blob[i * 128 : (i + 1) * 128], i) for i in range(row.holders)]
        return HandContext(
            spec, row.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records)
        )

    def _final(self, row: HandRow, ctx: HandContext, later: Sequence[bytes]) -> Deck:
        """The final deck: recorded, or followed from its own shuffle through ``later`` and recorded."""
        n = ctx.deck.size
        if row.final_deck is not None:
            if later and later[-1][4 : 4 + 64 * n] != row.final_deck:
                raise refusals.codeal(
                    Reason.DECK_NOT_DESCENDED,
                    "the last shuffle record is not the recorded final deck",
                    "later_shuffle_records",
                )
            return decode_deck(row.final_deck, n, "final deck")
        own = ShuffleRecord.decode(row.shuffle_record or b"", n, row.holder)
        if len(later) != row.holders - 1 - row.holder:
            raise refusals.codeal(
                Reason.DECK_NOT_DESCENDED,
                f"want the {row.holders - 1 - row.holder} shuffle records after this co-dealer's",
                "later_shuffle_records",
            )
        try:
            final = _follow(ctx, own.deck, later, row.holder + 1)
        except CodealError as e:
            raise refusals.codeal(Reason.DECK_NOT_DESCENDED, str(e), "later_shuffle_records") from None
        encoded = encode_deck(final)
        self.ledger.transaction(
            lambda db: db.execute(
                "UPDATE hands SET final_deck = ? WHERE hand_id = ? AND final_deck IS NULL",
                (encoded, row.hand_id),
            )
        )
        return final


def _follow(ctx: HandContext, deck: Deck, records: Sequence[bytes], first: int) -> Deck:
    """The deck after ``records`` (holders ``first``, ``first + 1``, ...), each verified (step 10.4)."""
    for i, data in enumerate(records):
        record = ShuffleRecord.decode(data, ctx.deck.size, first + i)
        if record.k != first + i:
            raise CodealError("transcript", f"shuffle record {first + i} names holder {record.k}")
        check_fresh(deck, record.deck, record.k)
        verify_shuffle(ctx, record.k, deck, record.deck, record.proof)
        verify_signature(ctx, deck, record)
        deck = record.deck
    return deck


def _unreleased(state: Releases, digests: Sequence[bytes]) -> int:
    """How many seat keys of ``state`` match none of ``digests`` (any one of their seals' release
    digests will do); every pair compared, each in constant time (9.3)."""
    missing = 0
    for stored in state.digests.values():
        found = False
        for mine in stored:
            for theirs in digests:
                found |= mine is not None and hmac.compare_digest(mine, theirs)
        missing += not found
    return missing


def _ended(row: HandRow) -> refusals.DealerError:
    """The refusal of a share (or a shuffle) of a hand that ended: by the dealer's RevealSeed, or
    by this co-dealer's lifetime."""
    if row.expired:
        return refusals.codeal(
            Reason.HAND_CLOSED,
            "the hand ended: it was open past this co-dealer's --max-hand-lifetime without a close; "
            "no more cards are dealt (the dealer may still close it)",
        )
    return refusals.codeal(Reason.HAND_CLOSED, "the hand ended; no more cards are dealt")


def _joined(parts: Sequence[bytes]) -> bytes:
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def _check_hand_id(hand_id: str) -> None:
    try:
        check_hand_id(hand_id)
    except SeedError as e:
        field = "hand_id"
        reason = Reason.MISSING_HAND_ID if not hand_id else Reason.INVALID_HAND_ID
        raise refusals.invalid(field, reason, str(e)) from None


def _spec(deck: str) -> DeckSpec:
    try:
        return DeckSpec.parse(deck)
    except DeckSpecError:
        raise refusals.invalid("deck", Reason.UNKNOWN_DECK, "unknown deck spec") from None
