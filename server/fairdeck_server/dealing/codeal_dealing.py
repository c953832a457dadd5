"""Co-dealt hands on the dealer's side: the dealer is key holder 0, the co-dealer holder 1.

Opening a hand: the dealer draws its own key and seed, asks the co-dealer to announce its key
record (signed by its pinned identity), shuffles first, hands its shuffle to the co-dealer (which
verifies it and shuffles in turn), then verifies the co-dealer's proof, signature and identity
signature. A draw asks the co-dealer for its share of each next position, sealed to the seat's
X25519 key (or public), checks and relays the co-dealer's signed seal statements (section 9.1),
and seals its own; the dealer never holds the co-dealer's secrets, so it
cannot open a seat's card. Closing asks for the co-dealer's seed and public shares and checks the
whole hand with ``fairdeck.codeal.verify_hand``. ``CoDealerLink`` is the co-dealer's transport
(edge/codealer_link.py); no grpc here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import Deck, V, initial_deck
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import Random, Scalar
from fairdeck.codeal.identity import key_statement, shuffle_statement, verify_identity
from fairdeck.codeal.keys import KeyRecord, new_holder, verify_key_record
from fairdeck.codeal.proof import prove_shuffle, verify_shuffle
from fairdeck.codeal.record import ShuffleRecord, sign_shuffle, verify_signature
from fairdeck.codeal.seal import check_seat_key, seal_share
from fairdeck.codeal.seal_statement import SealStatement
from fairdeck.codeal.shares import Share, make_share, open_card, verify_share
from fairdeck.codeal.shuffle import check_fresh, permutation, randomness, shuffle_deck
from fairdeck.codeal.verify import CodealHand, DealtPosition, verify_hand
from fairdeck.core.decks import DeckSpec, DeckSpecError
from fairdeck.wire import Reason
from fairdeck_server import refusals
from fairdeck_server.dealing.codeal_deckpool import DeckPool
from fairdeck_server.dealing.codeal_ended import REVEAL_ASKED, pruned_after_reveal
from fairdeck_server.dealing.codeal_health import CodealerWatch
from fairdeck_server.dealing.codeal_log import CLOSED, OPENED, CodealLog, logged
from fairdeck_server.dealing.codeal_seals import checked_seals, draw_seals, unrecorded
from fairdeck_server.dealing.codeal_seals import invalid as _invalid
from fairdeck_server.dealing.codeal_store import CodealRow, CodealStore
from fairdeck_server.dealing.codeal_take import take_live
from fairdeck_server.dealing.vault import SeedVault

log = logging.getLogger(__name__)
T = TypeVar("T")

HOLDERS = 2
"""The dealer and one co-dealer (docs/codealing-spec.md section 13.3 on more)."""
MAX_RELEASES = 4096
"""Seat release tokens one CloseHand may carry (the co-dealer's own bound)."""


def codealer_identity(value: str) -> bytes:
    """The 32-byte key of ``--codealer-key``: 64 hex digits, or @FILE holding them; ValueError says why."""
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"cannot read {value[1:]}: {getattr(e, 'strerror', None) or e}") from None
    text = text.strip()
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text.lower()):
        raise ValueError("want the co-dealer's identity key, 64 hex digits (`fairdeck codealer key`)")
    return bytes.fromhex(text)


class CoDealerLink(Protocol):
    """The co-dealer's CoDealerService; refusals come back as DealerError (CODEALER_*)."""

    async def announce(
        self, hand_id: str, deck: str, holder: int, holders: int
    ) -> tuple[bytes, bytes, bytes]: ...
    async def shuffle(
        self, hand_id: str, key_records: Sequence[bytes], shuffles: Sequence[bytes]
    ) -> tuple[bytes, bytes]: ...
    async def share(
        self, hand_id: str, position: int, seat_key: bytes, count: int, seats: Sequence[bytes] = ()
    ) -> tuple[list[bytes], list[bytes], list[bytes]]: ...
    async def reveal(
        self, hand_id: str, releases: Sequence[bytes] = ()
    ) -> tuple[bytes, list[tuple[int, bytes, bytes, bytes]]]: ...
    async def identity(self) -> bytes: ...
    async def close(self) -> None: ...


class VoidTask(Protocol):
    def start(self) -> None: ...
    async def stop(self) -> None: ...


@dataclass(frozen=True)
class CodealDraw:
    """The shares of each position drawn, holder order; ``cards`` only for a public draw."""

    deck: str
    position: int
    shares: tuple[tuple[bytes, ...], ...]
    cards: tuple[int, ...]
    remaining: int
    seals: tuple[tuple[SealStatement, ...], ...] = ()
    """Sealed draws: per position, the co-dealer's signed seal statement (spec section 9.1), which
    the dealer relays for the seat's device to check."""


class CodealDealer:
    def __init__(
        self,
        link: CoDealerLink,
        identity_key: bytes,
        store: CodealStore,
        vault: SeedVault,
        *,
        log: CodealLog,
        new_hand_id: Callable[[int], str],
        clock_ms: Callable[[], int],
        random: Callable[[int], bytes] = secrets.token_bytes,
        watch: Callable[[CodealDealer], CodealerWatch] | None = None,
        reaper: Callable[[CodealDealer], VoidTask] | None = None,
        release: Callable[[], None] | None = None,
        unconfirmed: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``watch`` and ``reaper`` build, from this dealer, its co-dealt health and what voids its
        hands past their lifetime (edge/codealer_link.py); neither is set on it later. ``release``:
        called at ``aclose`` (the claim let go, on PostgreSQL). ``unconfirmed``: why this process
        cannot count on its claim now (no renewal confirmed lately: codeal_claim.py), or None."""
        self.release = release
        self.unconfirmed = unconfirmed
        self.link = link
        self.identity_key = identity_key
        self.store = store
        self.vault = vault
        self.log = log
        self.new_hand_id = new_hand_id
        self.clock_ms = clock_ms
        self.random = random
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # lock, users
        self.pool: DeckPool | None = None
        self.codealer_lifetime_ms = 0
        """The co-dealer's hand lifetime, as its identity answer said (0: not said)."""
        self.misconfigured: str | None = None
        """Why co-dealt hands are not opened now (the co-dealer's lifetime too short for this
        dealer's: edge/codealer_link.py), or None."""
        self.not_held: str | None = None
        """Why this process no longer holds its co-dealt record (on PostgreSQL another process took
        its claim: dealing/codeal_claim.py), or None: it then opens, deals and closes none."""
        self._rows: dict[str, CodealRow] = {}
        self._states: dict[str, tuple[HandContext, Deck, Scalar]] = {}
        self.watch: CodealerWatch | None = watch(self) if watch is not None else None
        """Co-dealt health (codeal_health.py), when the edge gave one; it starts it."""
        self.reaper: VoidTask | None = reaper(self) if reaper is not None else None
        """What ends co-dealt hands past their lifetime (codeal_voids.py); the app starts it once
        storage is open."""

    def start_pool(self, per_tenant: int) -> None:
        """Keep ``per_tenant`` decks shuffled ahead for each (tenant, deck) that opened a co-dealt
        hand, refilled in the background (``DeckPool``)."""
        if per_tenant > 0 and self.pool is None:
            self.pool = DeckPool(self, per_tenant)
            self.pool.start()

    # -- open ----------------------------------------------------------------------------------

    async def open_hand(self, tenant: str, deck: str) -> CodealRow:
        """A co-dealt hand for ``tenant``: a pooled deck if one is ready, else one made now."""
        try:
            DeckSpec.parse(deck)
        except DeckSpecError:
            raise refusals.invalid("deck", Reason.UNKNOWN_DECK, "unknown deck spec") from None
        self._check_configured()
        if self.pool is not None:
            self.pool.busy()
            row = await take_live(
                self.link, self.store, tenant, deck, self.clock_ms, self.pool.per_tenant, self._check_held
            )
            self.pool.wanted(tenant, deck)
            if row is not None:  # taken, then logged: a deck is logged once, for the hand it became
                await self.log.opened(row, self.clock_ms())
                await asyncio.to_thread(self.store.put, row)
                return row
        return await self.make_hand(tenant, deck)

    async def make_hand(self, tenant: str, deck: str, *, pool_tenant: str = "") -> CodealRow:
        """Open a hand now: keys, both shuffles cross-checked, stored (pooled for ``pool_tenant``
        when ``tenant`` is empty)."""
        spec = DeckSpec.parse(deck)
        self._check_configured()
        hand_id = self.new_hand_id(self.clock_ms())  # the dealer's clock, as its entries' times
        mine = new_holder(spec, hand_id, 0, self.random)
        theirs, key_sig, identity = await self.link.announce(hand_id, deck, 1, HOLDERS)
        if identity != self.identity_key:
            raise refusals.codeal(Reason.CODEALER_INVALID, "the co-dealer answered with another identity key")
        key_records = (mine.record.encode(), theirs)
        try:
            verify_identity(
                identity, key_statement(spec, hand_id, 1, HOLDERS, theirs), key_sig, "key", "holder 1"
            )
            records = [KeyRecord.decode(r, k) for k, r in enumerate(key_records)]
            verify_key_record(spec, hand_id, 1, records[1])
            ctx = HandContext(
                spec, hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records)
            )
        except CodealError as e:
            raise _invalid("key record", e) from None
        own = await asyncio.to_thread(self._shuffle, ctx, mine.x, mine.seed)
        shuffled, shuffle_sig = await self.link.shuffle(hand_id, key_records, [own])
        try:
            verify_identity(identity, shuffle_statement(ctx, shuffled), shuffle_sig, "shuffle", "holder 1")
            await asyncio.to_thread(_check_shuffle, ctx, own, shuffled)
        except CodealError as e:
            raise _invalid("shuffle", e) from None
        row = CodealRow(
            hand_id,
            tenant,
            deck,
            self.clock_ms(),
            None,
            self.vault.seal(hand_id, mine.x + mine.seed),
            {
                "version": V,
                "keys": [r.hex() for r in key_records],
                "shuffles": [own.hex(), shuffled.hex()],
                "identities": [
                    {
                        "holder": 1,
                        "key": identity.hex(),
                        "key_signature": key_sig.hex(),
                        "shuffle_signature": shuffle_sig.hex(),
                    }
                ],
                "seats": [],
                "dealt": [],
                "seeds": [],
            },
            pool_tenant,
        )
        self._check_held()  # again before its first write: the claim may have lapsed meanwhile
        if tenant:  # a pooled deck is logged when it is taken for a hand (open_hand)
            await self.log.opened(row, self.clock_ms())
        await asyncio.to_thread(self.store.put, row, new=True)
        return row

    def held_now(self) -> str | None:
        """Why this process may not open, deal, close or void co-dealt hands now (its record held
        by another, or its claim not confirmed lately), or None."""
        return self.not_held if self.not_held is not None else self.unconfirmed()

    def _check_held(self) -> None:
        if (why := self.held_now()) is not None:
            raise refusals.storage_unavailable(why)

    def _check_configured(self) -> None:
        self._check_held()
        if self.misconfigured is not None:
            raise refusals.codeal(Reason.CODEAL_NOT_CONFIGURED, self.misconfigured)

    def _shuffle(self, ctx: HandContext, x: Scalar, seed: bytes) -> bytes:
        spec, before = ctx.deck, initial_deck(ctx.deck)
        psi = permutation(spec, ctx.hand_id, 0, seed)
        rs = randomness(spec, ctx.hand_id, 0, seed)
        after = shuffle_deck(before, psi, rs, ctx.joint_key)
        proof = prove_shuffle(ctx, 0, before, after, psi, rs, self.random)
        return sign_shuffle(ctx, 0, before, after, proof, x, self.random).encode()

    # -- draw ----------------------------------------------------------------------------------

    async def draw(
        self, tenant: str, hand_id: str, count: int, seat_key: bytes, seats: Sequence[bytes] = ()
    ) -> CodealDraw:
        """The next ``count`` positions, sealed to ``seat_key`` (empty: public), or ``count`` to
        each of ``seats`` in turn (the hole cards of a whole table in one call)."""
        self._check_held()
        field = "seat_public_keys" if seats else "seat_public_key"
        if seats and seat_key:
            raise refusals.invalid(field, Reason.INVALID_SEAT_KEY, "give seat_public_key or seat_public_keys")
        keys = list(seats) if seats else [seat_key]
        if any(len(k) != 32 for k in keys if k or seats):
            raise refusals.invalid(field, Reason.INVALID_SEAT_KEY, "an X25519 key is 32 bytes")
        if len(set(keys)) != len(keys):  # the co-dealer refuses it too (spec section 9.1)
            raise refusals.invalid(
                field, Reason.INVALID_SEAT_KEY, "two seats with one key: each seat makes its own"
            )
        if self.pool is not None:
            self.pool.busy()
        async with self._lock(hand_id):
            row = await self._row(tenant, hand_id)
            if row.closed_ms is not None:
                raise refusals.hand_closed()
            if not logged(row, OPENED):  # opened before this dealer logged co-dealt hands, or
                # its OpenHand failed to log (then its id was never answered): logged before a card
                await self.log.opened(row, self.clock_ms())
                await asyncio.to_thread(self.store.put, row)
            spec = DeckSpec.parse(row.deck)
            first = len(row.public["seats"])
            if not 1 <= count <= spec.size:
                raise refusals.invalid("count", Reason.INVALID_COUNT, f"count must be 1..{spec.size}")
            owners = [k for k in keys for _ in range(count)]
            if first + len(owners) > spec.size:
                raise refusals.not_enough_cards(spec.size - first, len(owners))
            _check_seat_keys(field, keys)  # bounded by the deck now: an X25519 exchange per key
            ctx, final, x = self._state(row)
            # The dealer's own shares (and their seals) need nothing from the co-dealer: made on
            # another thread while the co-dealer makes its own, and answered only after it did.
            own_work = asyncio.ensure_future(
                asyncio.to_thread(_own_shares, ctx, first, owners, x, final, self.random, field)
            )
            try:
                theirs, sealed, signatures = await self.link.share(
                    hand_id, first, seat_key, count, keys if seats else []
                )
            except BaseException:
                own_work.add_done_callback(_forget)
                raise
            own = await own_work
            if len(sealed if any(owners) else theirs) != len(owners):
                raise _invalid("answer")
            seals = draw_seals(ctx, self.identity_key, first, owners, sealed, signatures)
            shares, cards = [], []
            for i, (owner, (share0, mine)) in enumerate(zip(owners, own, strict=True)):
                p = first + i
                if owner:
                    shares.append((mine, sealed[i]))
                    continue
                try:
                    share = Share.decode(theirs[i], f"position {p} share 1")
                    verify_share(ctx, p, 1, final[p], share)
                    cards.append(open_card(ctx, p, final[p], [share0, share]))
                except CodealError as e:
                    raise _invalid("share", e) from None
                shares.append((share0.encode(), theirs[i]))
            # The co-dealer recorded each position's seat before answering (its ledger is the
            # guard); the dealer's record follows, so the next draw starts after these.
            await asyncio.to_thread(self.store.add_seats, hand_id, first, owners)
            row.public["seats"].extend(k.hex() for k in owners)
            left = spec.size - first - len(owners)
            return CodealDraw(row.deck, first, tuple(shares), tuple(cards), left, seals)

    # -- close ---------------------------------------------------------------------------------

    async def close(
        self, tenant: str, hand_id: str, *, voided: bool = False, releases: Sequence[bytes] = ()
    ) -> CodealRow:
        """CloseHand; ``voided``: the reaper ends a hand open past its lifetime (codeal_voids.py),
        the same close, its row marked ``voided``. ``releases``: the seats' release tokens, passed
        to the co-dealer (spec 9.3); refused there, the hand stays open (SEATS_NOT_RELEASED)."""
        self._check_held()
        if len(releases) > MAX_RELEASES or any(len(t) != 32 for t in releases):
            raise refusals.invalid(
                "seat_releases", Reason.MALFORMED_REQUEST, f"want at most {MAX_RELEASES} tokens of 32 bytes"
            )
        async with self._lock(hand_id):
            row = await self._row(tenant, hand_id)
            if row.closed_ms is not None:
                if not logged(row, CLOSED):  # its closing entries failed to append: now
                    await self._log_closed(row)
                return row
            ctx = _context(row)
            x, seed = self._secrets(row)
            final = _final_deck(ctx, row)
            if REVEAL_ASKED not in row.public:  # a retry after the co-dealer's retention knows it
                row.public[REVEAL_ASKED] = self.clock_ms()
                await asyncio.to_thread(self.store.put, row)
            try:
                theirs_seed, seals = await self.link.reveal(hand_id, releases)
            except refusals.DealerError as e:
                if not pruned_after_reveal(row.public, e, self.clock_ms()):
                    raise
                log.warning(
                    "co-dealt hand %s: its close was cut off after the co-dealer ended it, which has "
                    "since pruned it: closed on the dealer's side alone, no closing entries logged",
                    hand_id,
                )
                return await self._close_alone(row)
            lost = unrecorded(row.public["seats"], seals)
            seats = [*row.public["seats"], *(k.hex() for k in lost)]
            statements = checked_seals(ctx, self.identity_key, seats, seals)
            if lost:  # sealed and signed by the co-dealer, never recorded here: recorded now
                first = len(row.public["seats"])
                await asyncio.to_thread(self.store.add_seats, hand_id, first, lost)
                row.public["seats"] = seats
                log.warning(
                    "co-dealt hand %s: positions %d..%d were dealt but their draw's answer was lost; "
                    "recorded now from the co-dealer's signed seal statements",
                    hand_id,
                    first,
                    len(seats) - 1,
                )
            dealt_count = len(row.public["seats"])
            public = (await self.link.share(hand_id, 0, b"", dealt_count))[0] if dealt_count else []
            if len(public) != dealt_count:
                raise _invalid("answer")
            dealt = []
            for p, share in enumerate(public):
                own = make_share(ctx, p, 0, x, final[p], self.random)
                try:
                    card = open_card(ctx, p, final[p], [own, Share.decode(share, f"position {p} share 1")])
                except CodealError as e:
                    raise _invalid("share", e) from None
                dealt.append(DealtPosition(p, card, (own.encode(), share)))
            hand = CodealHand(
                row.deck,
                hand_id,
                tuple(bytes.fromhex(k) for k in row.public["keys"]),
                tuple(bytes.fromhex(s) for s in row.public["shuffles"]),
                tuple(dealt),
                (seed, theirs_seed),
            )
            try:
                await asyncio.to_thread(verify_hand, hand)
            except CodealError as e:
                raise _invalid("close", e) from None
            row.public["dealt"] = [
                {"position": d.position, "card": d.card, "shares": [s.hex() for s in d.shares]} for d in dealt
            ]
            row.public["seeds"] = [seed.hex(), theirs_seed.hex()]
            row.public["seals"] = [statements]
            if voided:
                row.public["voided"] = True
            row.closed_ms = self.clock_ms()
            await asyncio.to_thread(self.store.put, row)  # closed first: never closed and logged twice
            await self._log_closed(row)
            return row

    async def void_alone(self, tenant: str, hand_id: str) -> CodealRow:
        """Close a hand the co-dealer no longer has (it ended it at its lifetime and pruned it)
        without its seed or shares: nothing of its closing can be logged, so it is noted as done
        with no entries (never retried); its setup and shuffles stay its last word in the log."""
        self._check_held()
        async with self._lock(hand_id):
            row = await self._row(tenant, hand_id)
            return row if row.closed_ms is not None else await self._close_alone(row)

    async def _close_alone(self, row: CodealRow) -> CodealRow:
        row.public.update(voided=True, codealer_gone=True)
        row.public.setdefault("log", {})[CLOSED] = -1
        row.closed_ms = self.clock_ms()
        await asyncio.to_thread(self.store.put, row)
        return row

    async def _log_closed(self, row: CodealRow) -> None:
        await self.log.closed(row, self.clock_ms())
        await asyncio.to_thread(self.store.put, row)

    async def get(self, tenant: str, hand_id: str) -> CodealRow:
        return await self._row(tenant, hand_id, keep=False)

    def owns(self, hand_id: str) -> bool:
        """Whether ``hand_id`` is a co-dealt hand of this dealer."""
        return bool(hand_id) and self.store.get(hand_id) is not None

    async def aclose(self) -> None:
        if self.watch is not None:
            await self.watch.stop()
        if self.reaper is not None:
            await self.reaper.stop()
        if self.pool is not None:
            await self.pool.stop()
        await self.link.close()
        if self.release is not None:
            self.release()
        self.store.close()

    # -- helpers -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lock(self, hand_id: str) -> AsyncIterator[None]:
        """The hand's lock, kept only while someone holds or waits for it (a month of hands, or
        a caller naming made-up hand ids, must not keep one lock per id ever seen)."""
        entry = self._locks.setdefault(hand_id, (asyncio.Lock(), [0]))
        entry[1][0] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1][0] -= 1
            if not entry[1][0]:
                del self._locks[hand_id]

    async def _row(self, tenant: str, hand_id: str, *, keep: bool = True) -> CodealRow:
        """The hand's row, read once under the hand's lock and then kept (this process is the only
        writer of its co-dealt hands: codealer_link refuses --processes with --codealer). A read
        without the lock (``get``: keep False) is never kept: racing a close, it would pin the row
        as it was before, and the hand would read open, and be dealt from, for ever."""
        row = self._rows.get(hand_id)
        if row is None:
            row = await asyncio.to_thread(self.store.get, hand_id)
            if row is not None and row.tenant and keep:
                _remember(self._rows, hand_id, row)
        if row is None or row.tenant != tenant:
            raise refusals.hand_not_found()
        return row

    def _state(self, row: CodealRow) -> tuple[HandContext, Deck, Scalar]:
        """The hand's context, final deck and the dealer's key, decoded once."""
        state = self._states.get(row.hand_id)
        if state is None:
            ctx = _context(row)
            state = (ctx, _final_deck(ctx, row), self._secrets(row)[0])
            _remember(self._states, row.hand_id, state)
        return state

    def _secrets(self, row: CodealRow) -> tuple[Scalar, bytes]:
        opened = self.vault.open(row.hand_id, row.sealed_secrets)
        return Scalar(opened[:32]), opened[32:]


CACHE_HANDS = 4096
"""Co-dealt hands whose row and decoded state the dealer keeps in memory."""


def _remember(cache: dict[str, T], key: str, value: T) -> None:
    if len(cache) >= CACHE_HANDS:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _context(row: CodealRow) -> HandContext:
    spec = DeckSpec.parse(row.deck)
    records = [KeyRecord.decode(bytes.fromhex(k), i) for i, k in enumerate(row.public["keys"])]
    return HandContext(spec, row.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))


def _final_deck(ctx: HandContext, row: CodealRow) -> Deck:
    last = row.public["shuffles"][-1]
    return ShuffleRecord.decode(bytes.fromhex(last), ctx.deck.size, len(row.public["shuffles"]) - 1).deck


def _check_shuffle(ctx: HandContext, own: bytes, theirs: bytes) -> None:
    """Step 10.4 for the co-dealer's shuffle, after the dealer's own."""
    n = ctx.deck.size
    before = ShuffleRecord.decode(own, n, 0).deck
    record = ShuffleRecord.decode(theirs, n, 1)
    if record.k != 1:
        raise CodealError("transcript", "the co-dealer's shuffle record is not holder 1's")
    check_fresh(before, record.deck, 1)
    verify_shuffle(ctx, 1, before, record.deck, record.proof)
    verify_signature(ctx, before, record)


def _own_shares(
    ctx: HandContext, first: int, owners: Sequence[bytes], x: Scalar, final: Deck, random: Random, field: str
) -> list[tuple[Share, bytes]]:
    """The dealer's share of each position from ``first``, sealed to its seat's key (empty: public,
    not sealed), as (share, sealed share or b""); a low-order key refused as ``field``."""
    made = []
    for i, owner in enumerate(owners):
        p = first + i
        own = make_share(ctx, p, 0, x, final[p], random)
        try:
            mine = seal_share(ctx.deck, ctx.hand_id, p, 0, own.encode(), owner, random) if owner else b""
        except CodealError:
            raise refusals.invalid(field, Reason.INVALID_SEAT_KEY, "a low-order X25519 key") from None
        made.append((own, mine))
    return made


def _forget(task: asyncio.Future[Any]) -> None:
    """A done callback: the task's outcome is not wanted (its caller failed first), and not logged."""
    if not task.cancelled():
        task.exception()


def _check_seat_keys(field: str, keys: Sequence[bytes]) -> None:
    """Refuse a low-order or non-canonical seat key here, as a bad argument, not as the
    co-dealer's refusal relayed after a round trip."""
    try:
        for key in filter(None, keys):
            check_seat_key(key)
    except CodealError as e:
        what = "a non-canonical X25519 key" if "non-canonical" in str(e) else "a low-order X25519 key"
        raise refusals.invalid(field, Reason.INVALID_SEAT_KEY, what) from None
