"""The dealer's rules: the lifecycle of a hand, on top of the core and a Storage.

No grpc here: the servicer turns requests into these calls and DealerError into status codes.
Entropy, the clock and hand ids are injected so tests can pin them. Every state change goes through
``Storage.update_hand`` with a pure ``decide`` function, so the rules hold the same on every engine.
Before it logs an entry (open, deal, close), an operation awaits ``before_logging``, given to the
constructor: the reaper's (reaper.py), which voids overdue hands first (through the voids' own
``Decks``, never back through the dealer), so the log never shows a hand left open past its
lifetime while the dealer deals on. DealHands, many hands in one call, is bulk.py's pipeline.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from fairdeck.core.commitment import commit
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.derivation import Plan, plan
from fairdeck.core.encoding import lp
from fairdeck.core.errors import InvalidInput
from fairdeck.core.seeds import MAX_CLIENT_SEEDS, check_hand_id, normalize_client_seed
from fairdeck.core.transcript import Transcript
from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.log.logentry import (
    CLOSED,
    CommitEntry,
    RevealEntry,
    deck_digest,
)
from fairdeck.wire import Reason
from fairdeck_server import principal, refusals
from fairdeck_server.dealing import voids
from fairdeck_server.dealing.bulk import MAX_BATCH_HANDS, BulkDealing, DealtSlice
from fairdeck_server.dealing.stored_decks import Decks
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.base import Change, HandRecord, NewHand, Storage, StoredHandState
from fairdeck_server.storage.rows import encode_seeds

DEFAULT_TENANT = principal.DEFAULT_TENANT
UNKNOWN_DECK = f"unknown deck spec; known: {', '.join(SPEC_NAMES)}"
"""An unknown deck's refusal: the decks there are, not the caller's text echoed back."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _new_hand_id(now_ms: int) -> str:
    """Time-ordered and unguessable: 11 hex digits of ``now_ms`` (the dealer's clock, as its entries'
    times, not the wall clock), then 40 random bits. Ordered ids make every insert land on the right
    edge of the hands table's b-tree; random ones dirtied a page per hand and made COMMIT 8x dearer."""
    return f"{now_ms:011x}{secrets.token_hex(5)}"


@dataclass(frozen=True)
class DrawnCards:
    deck: str
    cards: tuple[int, ...]
    position: int
    remaining: int


class Dealer:
    """Opens, shuffles, deals and closes hands."""

    def __init__(
        self,
        storage: Storage,
        vault: SeedVault,
        *,
        entropy: Callable[[int], bytes] = secrets.token_bytes,
        clock_ms: Callable[[], int] = _now_ms,
        new_hand_id: Callable[[int], str] = _new_hand_id,
        version: str = CURRENT_VERSION,
        before_logging: Callable[[], Awaitable[None]] | None = None,
        others_call: Callable[[str], bool] | None = None,
        voider: voids.Voider | None = None,
    ) -> None:
        """``before_logging``: awaited before an operation logs an entry (the reaper's
        ``ensure_fresh``). ``others_call``: whether tenants other than the one given call now (the
        admission's ``others``): see bulk.REST. ``voider``: the voids of these hands, whose ``Decks``
        the dealer shares (one of its own on ``storage`` and ``vault`` by default)."""
        self.storage = storage
        self.vault = vault
        self._entropy = entropy
        self._clock_ms = clock_ms
        self._new_hand_id = new_hand_id
        self._version = version
        self.voider = voider if voider is not None else voids.Voider(storage, Decks(vault), clock_ms)
        self.decks = self.voider.decks
        self.before_logging: Callable[[], Awaitable[None]] = before_logging or _nothing
        self.others_call: Callable[[str], bool] = others_call or _nobody_else
        self.bulk = BulkDealing(
            storage,
            vault,
            entropy=entropy,
            clock_ms=clock_ms,
            new_hand_ids=self._new_hand_ids,
            version=version,
            before_logging=self.before_logging,
            others_call=self.others_call,
        )
        """DealHands (bulk.py)."""

    # -- opening ----------------------------------------------------------------

    async def open_hand(self, tenant: str, deck: str, request_id: str) -> HandRecord:
        p = self._plan(deck)
        rid = _request_id(request_id)
        await self.before_logging()
        new, _, _ = self._new_hand(tenant, p, rid, ())
        (created,) = await self.storage.create_hands([new])
        return created.record

    async def deal_new_hand(
        self, tenant: str, deck: str, client_seeds: Sequence[str | bytes], request_id: str
    ) -> tuple[HandRecord, tuple[int, ...]]:
        """Open, shuffle and deal the whole deck in one durable step."""
        p = self._plan(deck)
        seeds = _client_seeds(client_seeds)
        rid = _request_id(request_id)
        await self.before_logging()
        new, _, cards = self._new_hand(tenant, p, rid, seeds, state=StoredHandState.SHUFFLED)
        (created,) = await self.storage.create_hands([new])
        if created.found:  # an idempotent retry: deal what was stored
            cards = self.decks.cards(created.record)
        return created.record, cards

    async def deal_hands(
        self, tenant: str, deck: str, count: int, client_seeds: Sequence[str | bytes], close: bool
    ) -> AsyncIterator[list[DealtSlice]]:
        """Open and deal ``count`` hands, in durable chunks of BATCH_CHUNK."""
        p = self._plan(deck)
        if not 1 <= count <= MAX_BATCH_HANDS:
            raise refusals.invalid("hand_count", Reason.INVALID_HAND_COUNT, f"must be 1..{MAX_BATCH_HANDS}")
        seeds = _client_seeds(client_seeds)
        return self.bulk.deal(tenant, p, count, seeds, close)

    def _new_hand_ids(self, n: int) -> list[str]:
        """``n`` new hand ids: with the default maker, one call for all their random parts."""
        now = self._clock_ms()
        if self._new_hand_id is not _new_hand_id:
            return [self._new_hand_id(now) for _ in range(n)]
        head = f"{now:011x}"
        tail = secrets.token_bytes(5 * n).hex()
        return [head + tail[10 * i : 10 * i + 10] for i in range(n)]

    def _new_hand(
        self,
        tenant: str,
        p: Plan,
        request_id: str | None,
        seeds: tuple[bytes, ...],
        state: StoredHandState = StoredHandState.OPEN,
    ) -> tuple[NewHand, bytes, tuple[int, ...]]:
        """A new hand: fresh seed, commitment, sealed seed, commit entry (and
        the deck, unless it stays open for client seeds)."""
        now = self._clock_ms()
        hand_id = self._new_hand_id(now)
        seed = self._entropy(p.seed_bytes)
        commitment = commit(p.spec.name, hand_id, seed, version=self._version)
        cards = p.derive(hand_id, seed, seeds) if state is not StoredHandState.OPEN else ()
        closed = state is StoredHandState.CLOSED
        record = HandRecord(
            tenant=tenant,
            hand_id=hand_id,
            request_id=request_id,
            deck=p.spec.name,
            version=self._version,
            commitment=commitment,
            sealed_seed=self.vault.seal(hand_id, seed),
            client_seeds=seeds,
            state=state,
            dealt=len(cards),
            created_ms=now,
            commit_index=-1,
            request_fingerprint=None
            if request_id is None
            else request_fingerprint(state, p.spec.name, seeds),
            closed_ms=now if closed else None,
            server_seed=seed if closed else None,
        )
        entry = CommitEntry(now, hand_id, self._version, p.spec.name, commitment).encode()
        reveal = (
            RevealEntry(now, hand_id, CLOSED, seed, seeds, deck_digest(cards)).encode() if closed else None
        )
        return NewHand(record, entry, reveal), seed, cards

    # -- seeds and shuffling ---------------------------------------------------------

    async def add_client_seeds(
        self, tenant: str, hand_id: str, client_seeds: Sequence[str | bytes]
    ) -> HandRecord:
        validate_hand_id(hand_id)
        seeds = _client_seeds(client_seeds)

        def decide(r: HandRecord) -> tuple[Change, HandRecord]:
            if r.state is not StoredHandState.OPEN:
                raise _not_open(r)
            new = replace(r, client_seeds=_combined(r.client_seeds, seeds))
            return Change(new), new

        return (await self.storage.update_hand(tenant, hand_id, decide))[0]

    async def shuffle(self, tenant: str, hand_id: str, client_seeds: Sequence[str | bytes]) -> HandRecord:
        validate_hand_id(hand_id)
        seeds = _client_seeds(client_seeds)

        def decide(r: HandRecord) -> tuple[Change, HandRecord]:
            if r.state is not StoredHandState.OPEN:
                raise _not_open(r)
            new = replace(r, client_seeds=_combined(r.client_seeds, seeds), state=StoredHandState.SHUFFLED)
            self.decks.cards(new)  # derive now, so the first draw is a cache hit
            return Change(new), new

        return (await self.storage.update_hand(tenant, hand_id, decide))[0]

    # -- dealing -------------------------------------------------------------------

    async def draw(
        self, tenant: str, hand_id: str, count: int, expected_position: int | None = None
    ) -> DrawnCards:
        """The next ``count`` cards. With ``expected_position``, a retry is safe: the same draw
        again (the hand is at that position plus ``count``) answers the same cards and moves
        nothing; any other position is WRONG_POSITION."""
        validate_hand_id(hand_id)
        if count < 1:
            raise refusals.invalid("count", Reason.INVALID_COUNT, "must be at least 1")

        def decide(r: HandRecord) -> tuple[Change, DrawnCards]:
            r = self._shuffled(r)
            size = DeckSpec.parse(r.deck).size
            if count > size:
                raise refusals.invalid("count", Reason.INVALID_COUNT, f"must be at most the deck size {size}")
            if expected_position is not None and r.dealt != expected_position:
                if r.dealt == expected_position + count:
                    # The same draw, done already (its answer was lost): the same cards again.
                    again = self.decks.cards(r)[expected_position : r.dealt]
                    return Change(r), DrawnCards(r.deck, again, expected_position, size - r.dealt)
                raise refusals.wrong_position(r.dealt, expected_position)
            if r.dealt + count > size:
                raise refusals.not_enough_cards(size - r.dealt, count)
            cards = self.decks.cards(r)[r.dealt : r.dealt + count]
            new = replace(r, dealt=r.dealt + count)
            return Change(new), DrawnCards(r.deck, cards, r.dealt, size - new.dealt)

        return (await self.storage.update_hand(tenant, hand_id, decide))[1]

    async def deal(self, tenant: str, hand_id: str) -> DrawnCards:
        """Deal every card not dealt yet."""
        validate_hand_id(hand_id)

        def decide(r: HandRecord) -> tuple[Change, DrawnCards]:
            r = self._shuffled(r)
            cards = self.decks.cards(r)
            new = replace(r, dealt=len(cards))
            return Change(new), DrawnCards(r.deck, cards[r.dealt :], r.dealt, 0)

        return (await self.storage.update_hand(tenant, hand_id, decide))[1]

    # -- closing and reading -------------------------------------------------------------

    async def close(self, tenant: str, hand_id: str) -> HandRecord:
        """Reveal the seed and record it. Closing a closed hand returns it as is."""
        validate_hand_id(hand_id)
        await self.before_logging()
        return await self._reveal(tenant, hand_id, CLOSED)

    async def void_stale(
        self,
        max_lifetime_ms: int,
        limit: int = 1000,
        on_skip: Callable[[str, str, str], None] = lambda tenant, hand_id, reason: None,
    ) -> int:
        """Void (reveal and log) up to ``limit`` hands open longer than the lifetime;
        return how many it dealt with (voided, or skipped for the first time)."""
        return (await self.void_before(self._clock_ms() - max_lifetime_ms, limit, on_skip)).handled

    async def void_before(
        self,
        cutoff_ms: int,
        limit: int = 1000,
        on_skip: Callable[[str, str, str], None] = lambda tenant, hand_id, reason: None,
    ) -> voids.Progress:
        """Void up to ``limit`` hands created before ``cutoff_ms``, in batches (voids.py).

        An honest log then has no commitment without a reveal older than the
        lifetime, which is what the auditor checks to catch deck shopping.

        A hand that cannot be voided (its seed does not open, its row cannot be read) is
        skipped and reported once through ``on_skip(tenant, hand_id, reason)``, the others voided
        all the same; skipped hands are remembered for the life of its ``voider`` (a restart, e.g.
        with the missing key loaded, tries them again). Storage failing raises.
        """
        return await self.voider.void_before(cutoff_ms, limit, on_skip)

    async def _reveal(self, tenant: str, hand_id: str, outcome: int) -> HandRecord:
        now = self._clock_ms()  # when it was decided, after before_logging; storage never makes it earlier
        return (await self.storage.update_hand(tenant, hand_id, self.decks.revealing(outcome, now)))[0]

    async def get(self, tenant: str, hand_id: str) -> HandRecord:
        validate_hand_id(hand_id)
        record = await self.storage.get_hand(tenant, hand_id)
        if record is None:
            raise refusals.hand_not_found()
        return record

    def transcript(self, record: HandRecord) -> Transcript:
        """The transcript of a closed hand."""
        if record.server_seed is None:
            raise refusals.hand_not_closed()
        return Transcript(
            version=record.version,
            deck=record.deck,
            hand_id=record.hand_id,
            commitment=record.commitment,
            server_seed=record.server_seed,
            client_seeds=record.client_seeds,
            cards=self.decks.cards(record),
        )

    # -- helpers ---------------------------------------------------------------------------

    def _plan(self, deck: str) -> Plan:
        try:
            return plan(self._version, deck)
        except InvalidInput:
            raise refusals.invalid("deck", Reason.UNKNOWN_DECK, UNKNOWN_DECK) from None

    def _shuffled(self, r: HandRecord) -> HandRecord:
        if r.state is StoredHandState.CLOSED:
            raise refusals.hand_closed()
        return replace(r, state=StoredHandState.SHUFFLED) if r.state is StoredHandState.OPEN else r


async def _nothing() -> None:
    return None


def _nobody_else(tenant: str) -> bool:
    return False


def _not_open(r: HandRecord) -> refusals.DealerError:
    if r.state is StoredHandState.CLOSED:
        return refusals.hand_closed()
    return refusals.hand_already_shuffled()


def _combined(old: tuple[bytes, ...], new: tuple[bytes, ...]) -> tuple[bytes, ...]:
    if len(old) + len(new) > MAX_CLIENT_SEEDS:
        raise refusals.invalid(
            "client_seeds", Reason.TOO_MANY_CLIENT_SEEDS, f"at most {MAX_CLIENT_SEEDS} client seeds per hand"
        )
    return old + new


def _client_seeds(seeds: Sequence[str | bytes]) -> tuple[bytes, ...]:
    if len(seeds) > MAX_CLIENT_SEEDS:
        raise refusals.invalid(
            "client_seeds", Reason.TOO_MANY_CLIENT_SEEDS, f"at most {MAX_CLIENT_SEEDS} client seeds per hand"
        )
    out = []
    for i, seed in enumerate(seeds):
        try:
            out.append(normalize_client_seed(seed))
        except InvalidInput as e:
            raise refusals.invalid(f"client_seeds[{i}]", Reason.INVALID_CLIENT_SEED, str(e)) from None
    return tuple(out)


def _request_id(request_id: str) -> str | None:
    if not request_id:
        return None
    try:
        check_hand_id(request_id)
    except InvalidInput:
        raise refusals.invalid(
            "request_id", Reason.INVALID_REQUEST_ID, "must be 1..64 characters of A-Z a-z 0-9 . _ : -"
        ) from None
    return request_id


def request_fingerprint(state: StoredHandState, deck: str, seeds: tuple[bytes, ...]) -> bytes:
    """What a retry must repeat exactly: the kind of open (OpenHand creates an
    OPEN hand, DealNewHand a SHUFFLED one), the deck and the client seeds."""
    kind = bytes([int(state)])
    return hashlib.sha256(b"fairdeck request v1" + kind + lp(deck.encode()) + encode_seeds(seeds)).digest()


def validate_hand_id(hand_id: str) -> None:
    if not hand_id:
        raise refusals.invalid("hand_id", Reason.MISSING_HAND_ID, "required")
    try:
        check_hand_id(hand_id)
    except InvalidInput:
        raise refusals.invalid(
            "hand_id", Reason.INVALID_HAND_ID, "must be 1..64 characters of A-Z a-z 0-9 . _ : -"
        ) from None
