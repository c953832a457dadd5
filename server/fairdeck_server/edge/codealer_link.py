"""The dealer's client of the co-dealer's CoDealerService (``serve --codealer HOST:PORT``).

Each call has a deadline and carries the dealer's token (``--codealer-token @FILE``). A co-dealer
that is down, too slow, drops the call, is busy, or refuses the token becomes UNAVAILABLE
CODEALER_UNAVAILABLE (ordinary hands are not touched; the message says which, never the token),
and any other refusal of the co-dealer's becomes FAILED_PRECONDITION CODEALER_REFUSED carrying
its own reason and message, so the game server sees why a co-dealt hand was not dealt; a
RevealSeed refused SEATS_NOT_RELEASED is passed on as it is (the game server's releases are short).
``codeal_dealer`` also starts co-dealt health (codeal_health.py) on the dealer's health service,
and the voids of co-dealt hands past their lifetime (codeal_voids.py); it opens codeal.db bound to
the log's keys (codeal_record.py) and, on PostgreSQL, claims its record (codeal_claim.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from fairdeck.v1 import codealer_pb2 as pb
from fairdeck.v1 import codealer_pb2_grpc
from fairdeck.wire import AUTHORIZATION, Reason
from fairdeck_server import refusals
from fairdeck_server.codealer.dealer_token import parse_token
from fairdeck_server.dealing.codeal_health import CODEAL_HEALTH, CodealerWatch
from fairdeck_server.dealing.codeal_open import open_codeal_store
from fairdeck_server.dealing.codeal_store import CodealStore, CodealStoreError, CodealStoreLost
from fairdeck_server.dealing.vault import SeedVault, read_private_text
from fairdeck_server.edge.health import NOT_SERVING, SERVING, HealthServicer
from fairdeck_server.observe.metrics import Metrics
from fairdeck_server.refusals import StartupRefused

if TYPE_CHECKING:  # loaded only with --codealer: the co-dealt code needs libsodium
    from fairdeck_server.dealing.codeal_claim import CodealClaim
    from fairdeck_server.dealing.codeal_dealing import CodealDealer
    from fairdeck_server.dealing.codeal_voids import CodealReaper
    from fairdeck_server.dealing.dealer import Dealer
    from fairdeck_server.edge.interceptors import LimitsInterceptor

log = logging.getLogger(__name__)
T = TypeVar("T")
CALL_TIMEOUT = 10.0
"""Seconds a co-dealer call may take (a 52-card shuffle with its proof takes well under one)."""
_DOWN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
_REFUSED_FIX = "give --codealer-token @FILE the co-dealer's current DIR/dealer.token"


class HealthHost(Protocol):
    """What co-dealt hands need of the app: the ordinary dealer (whose log they append to), and
    its health service and metrics, to which co-dealt health is published (app.py)."""

    dealer: Dealer
    health: HealthServicer
    metrics: Metrics
    limits: LimitsInterceptor
    """Its call limits: co-dealt voids take slots of its fair admission, as ordinary calls."""


def _reason(error: grpc.aio.AioRpcError) -> str:
    """The co-dealer's ErrorInfo reason (its refusals use the same contract), or ""."""
    try:
        status = rpc_status.from_call(cast(Any, error))
    except ValueError:
        return ""
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return str(info.reason)
    return ""


class GrpcCoDealerLink:
    def __init__(self, target: str, token: str, *, timeout: float = CALL_TIMEOUT) -> None:
        self.target = target
        self.timeout = timeout
        self._metadata = ((AUTHORIZATION, f"Bearer {token}"),)
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = codealer_pb2_grpc.CoDealerServiceStub(self._channel)
        self.lifetime_ms = 0
        """The co-dealer's hand lifetime, as its last identity answer said (0: none said)."""
        self.expired_hands = 0
        """Hands it ended at its lifetime since it started, as its last identity answer said."""
        self.reveal_hold_ms = 0
        """Its hold (spec 9.3), as its last identity answer said (0: none said)."""

    async def close(self) -> None:
        await self._channel.close(None)

    async def _call(self, method: Callable[..., Awaitable[T]], request: Any) -> T:
        try:
            return await method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE and _reason(e) == Reason.STORAGE_UNAVAILABLE:
                raise refusals.codeal(
                    Reason.CODEALER_UNAVAILABLE,
                    f"the co-dealer at {self.target} cannot record shares (its ledger does not take "
                    "writes); retry later",
                ) from None
            if e.code() in _DOWN:
                raise refusals.codeal(
                    Reason.CODEALER_UNAVAILABLE, f"the co-dealer at {self.target} is unreachable; retry later"
                ) from None
            if e.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise refusals.codeal(
                    Reason.CODEALER_UNAVAILABLE,
                    f"the co-dealer at {self.target} refused the dealer's token ({_reason(e)}): "
                    + _REFUSED_FIX,
                ) from None
            if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise refusals.codeal(
                    Reason.CODEALER_UNAVAILABLE,
                    f"the co-dealer at {self.target} is busy ({_reason(e)}); retry later",
                ) from None
            if _reason(e) == Reason.SEATS_NOT_RELEASED:  # the game server's to fix: passed on as is
                raise refusals.codeal(Reason.SEATS_NOT_RELEASED, e.details() or "", "seat_releases") from None
            raise refusals.codeal(
                Reason.CODEALER_REFUSED,
                f"the co-dealer refused ({e.code().name} {_reason(e)}): {e.details()}",
            ) from None

    async def announce(
        self, hand_id: str, deck: str, holder: int, holders: int
    ) -> tuple[bytes, bytes, bytes]:
        request = pb.AnnounceHandRequest(hand_id=hand_id, deck=deck, holder=holder, holder_count=holders)
        r = await self._call(self._stub.AnnounceHand, request)
        return r.key_record, r.key_record_signature, r.identity_key

    async def shuffle(
        self, hand_id: str, key_records: Sequence[bytes], shuffles: Sequence[bytes]
    ) -> tuple[bytes, bytes]:
        request = pb.ShuffleDeckRequest(hand_id=hand_id, key_records=key_records, shuffle_records=shuffles)
        r = await self._call(self._stub.ShuffleDeck, request)
        return r.shuffle_record, r.shuffle_record_signature

    async def share(
        self, hand_id: str, position: int, seat_key: bytes, count: int, seats: Sequence[bytes] = ()
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        request = pb.GetShareRequest(
            hand_id=hand_id, position=position, seat_public_key=seat_key, count=count, seat_public_keys=seats
        )
        r = await self._call(self._stub.GetShare, request)
        return list(r.shares), list(r.sealed_shares), list(r.seal_signatures)

    async def reveal(
        self, hand_id: str, releases: Sequence[bytes] = ()
    ) -> tuple[bytes, list[tuple[int, bytes, bytes, bytes]]]:
        request = pb.RevealSeedRequest(hand_id=hand_id, seat_releases=releases)
        r = await self._call(self._stub.RevealSeed, request)
        seals = [(s.position, s.seat_public_key, s.sealed_share_sha256, s.signature) for s in r.seals]
        return r.seed, seals

    async def identity(self) -> bytes:
        r = await self._call(self._stub.GetIdentity, pb.GetIdentityRequest())
        self.lifetime_ms, self.expired_hands = r.max_hand_lifetime_ms, r.expired_hands
        self.reveal_hold_ms = r.reveal_hold_ms
        return r.identity_key


def codealer_token(value: str | None) -> str:
    """The token of ``--codealer-token @FILE``; StartupRefused says what is wrong and the fix."""
    if value is None:
        raise StartupRefused(
            "--codealer needs --codealer-token @FILE: the co-dealer's DIR/dealer.token (`fairdeck codealer "
            "init` or `fairdeck codealer token` makes it), copied to this host with mode 0600"
        )
    if not value.startswith("@"):
        raise StartupRefused(
            "--codealer-token: want @FILE (a token is a secret: never a flag's value), the co-dealer's "
            "DIR/dealer.token copied to this host with mode 0600"
        )
    text = read_private_text(Path(value[1:]), "--codealer-token: token file", StartupRefused)
    try:
        return parse_token(text)
    except ValueError as e:
        raise StartupRefused(f"--codealer-token: token file {value[1:]}: {e}") from None


class CodealSettings(Protocol):
    """What ``codeal_dealer`` reads of the dealer's configuration (``run.config.ServerConfig``
    has them all): named here, so the edge never imports the room that wires it."""

    @property
    def codealer(self) -> str | None: ...
    @property
    def codealer_key(self) -> str | None: ...
    @property
    def codealer_token(self) -> str | None: ...
    @property
    def codeal_default(self) -> bool: ...
    @property
    def codeal_pool(self) -> int: ...
    @property
    def processes(self) -> int: ...
    @property
    def data_dir(self) -> Path: ...
    @property
    def replica_name(self) -> str | None: ...
    @property
    def max_hand_lifetime(self) -> float: ...
    @property
    def db(self) -> str | None: ...


def codeal_dealer(
    config: CodealSettings,
    vault: SeedVault,
    new_hand_id: Callable[[int], str],
    clock_ms: Callable[[], int],
    host: HealthHost,
    log_keys: Sequence[str] = (),
) -> CodealDealer | None:
    """Co-dealt hands, with --codealer: their own file in the data dir, sealed by the dealer's vault,
    logged to ``host.dealer``'s log; their health (``CODEAL_HEALTH``) and
    ``fairdeck_codealer_healthy`` kept in ``host``'s. ``log_keys``: the log's verifier keys, current
    first, that the file's record may belong to."""
    if config.codealer is None and config.codealer_key is None and not config.codeal_default:
        return None
    from fairdeck_server.dealing.codeal_dealing import CodealDealer, codealer_identity
    from fairdeck_server.dealing.codeal_log import CodealLog

    if config.codealer is None or config.codealer_key is None:
        raise StartupRefused("--codealer and --codealer-key go together (and --codeal-default needs them)")
    if config.processes > 1:
        raise StartupRefused("--codealer runs with one serving process: drop --processes (or set it to 1)")
    try:
        identity = codealer_identity(config.codealer_key)
    except ValueError as e:
        raise StartupRefused(f"--codealer-key: {e}") from None
    token = codealer_token(config.codealer_token)
    try:
        store = open_codeal_store(config.data_dir, config.db, log_keys)  # as a take-over opens it
    except CodealStoreLost as e:
        raise StartupRefused(str(e)) from None
    except CodealStoreError as e:
        raise StartupRefused(f"{e}; check the data dir's permissions and free space") from None
    claim = _claim(config, store)
    link = GrpcCoDealerLink(config.codealer, token)
    log = CodealLog(host.dealer)  # its entries go to the ordinary dealer's log

    def watched(codeal: CodealDealer) -> CodealerWatch:
        also = _lifetimes(link, config.max_hand_lifetime, codeal, host.metrics)

        def held() -> str | None:  # each round: why the claim is lost or unconfirmed (renewed apart)
            return codeal.held_now()

        host.health.gate(CODEAL_HEALTH, lambda: codeal.held_now() is None)  # as calls check it
        return CodealerWatch(
            link.identity,
            identity,
            _publisher(host),
            probe=store.probe,
            also=also,
            held=held,
            lapses=(lambda: None) if claim is None else claim.vouched_for,
        )

    codeal = CodealDealer(
        link,
        identity,
        store,
        vault,
        log=log,
        new_hand_id=new_hand_id,
        clock_ms=clock_ms,
        watch=watched,
        reaper=lambda codeal: codeal_reaper(codeal, config.max_hand_lifetime, clock_ms, host),
        release=None if claim is None else claim.let_go,
        unconfirmed=(lambda: None) if claim is None else claim.unconfirmed,
    )
    if claim is not None:  # on their own thread: a slow co-dealer never delays them
        claim.start_renewals(lambda why: setattr(codeal, "not_held", why))
    codeal.start_pool(config.codeal_pool)  # decks per tenant and spec (codeal_deckpool.DeckPool)
    if codeal.watch is not None:
        codeal.watch.start()
    return codeal


def _claim(config: CodealSettings, store: CodealStore) -> CodealClaim | None:
    """On PostgreSQL: the store's record claimed for this replica (codeal_claim.py), or refused."""
    if config.db is None:
        return None
    import psycopg

    from fairdeck_server.dealing.codeal_claim import ClaimRefused, CodealClaim, Holder
    from fairdeck_server.storage.postgres.diagnosis import describe, what

    holder = Holder.here(config.data_dir, config.replica_name)
    claim = CodealClaim(config.db, store.path, store.record, holder)
    try:
        claim.claim(store.hand_ids)
    except ClaimRefused as e:
        store.close()
        raise StartupRefused(str(e)) from None
    except (psycopg.Error, CodealStoreError) as e:
        store.close()
        raise StartupRefused(
            f"co-dealt hands {store.path}: cannot claim its record {store.record.record_id} on the "
            f"PostgreSQL database {describe(config.db)} ({what(e) if isinstance(e, psycopg.Error) else e}); "
            "check that the database is up and retry"
        ) from None
    return claim


def codeal_reaper(
    codeal: CodealDealer, lifetime_s: float, clock_ms: Callable[[], int], host: HealthHost
) -> CodealReaper:
    """Co-dealt hands voided within the ordinary hands' lifetime (codeal_voids.py), said in
    ``host``'s metrics; not started (app.py starts it once storage is open)."""
    from fairdeck_server.dealing.codeal_voids import CodealReaper

    metrics = host.metrics
    reaper = CodealReaper(
        codeal,
        lifetime_s,
        clock_ms,
        on_voided=lambda kind: metrics.codeal_voided.labels(kind).inc(),
        on_skip=_skipped(metrics),
        on_behind=lambda behind: metrics.codeal_voids_behind.set(1 if behind else 0),
        admission=host.limits.admission,
    )
    return reaper


def _skipped(metrics: Metrics) -> Callable[[str, str, str], None]:
    def skipped(tenant: str, hand_id: str, reason: str) -> None:
        metrics.codeal_void_skipped.labels(reason).inc()
        log.error(
            "co-dealt hand %s of tenant %s is past its lifetime and cannot be voided (%s); skipped "
            "until the dealer restarts, other hands are voided",
            hand_id,
            tenant,
            reason,
        )

    return skipped


def _lifetimes(
    link: GrpcCoDealerLink, lifetime_s: float, codeal: CodealDealer, metrics: Metrics
) -> Callable[[], str | None]:
    """After each identity answer: why the co-dealer's lifetime cannot serve this dealer's (it
    must be at least twice it: a pooled deck waits up to one lifetime, then lives one as a hand;
    else the co-dealer would end hands still played), kept in ``codeal.misconfigured`` so that
    co-dealt opens are refused; and the hands it ended at its lifetime, in the metrics. A hold
    longer than this dealer's lifetime is said once (WARNING): voids wait for it (spec 9.3)."""
    said: list[int] = []

    def check() -> str | None:
        metrics.codealer_expired_hands.set(link.expired_hands)
        hold, void_at = link.reveal_hold_ms / 1000, lifetime_s - min(2.0, lifetime_s / 4)  # reaper's margin
        if hold > void_at and link.reveal_hold_ms not in said:
            said.append(link.reveal_hold_ms)
            log.warning(
                "the co-dealer answers an unreleased hand's seed only %g s after its last sealed share "
                "(its --reveal-hold), over this dealer's --max-hand-lifetime of %g s: voids of "
                "abandoned co-dealt hands wait for its hold (the hands read open past their lifetime); "
                "give the co-dealer --reveal-hold %g or less",
                hold,
                lifetime_s,
                void_at,
            )
        theirs = link.lifetime_ms / 1000
        codeal.codealer_lifetime_ms = link.lifetime_ms
        codeal.misconfigured = None
        if theirs and theirs < 2 * lifetime_s:
            codeal.misconfigured = (
                f"the co-dealer ends hands {theirs:g} s after they open (its --max-hand-lifetime), under "
                f"twice this dealer's --max-hand-lifetime of {lifetime_s:g} s: give the co-dealer "
                f"--max-hand-lifetime {2 * lifetime_s:g} or more, or this dealer {theirs / 2:g} or less"
            )
        return codeal.misconfigured

    return check


def _publisher(host: HealthHost) -> Callable[[bool], Awaitable[None]]:
    async def publish(ok: bool) -> None:
        host.metrics.codealer_healthy.set(1 if ok else 0)
        able = ok and host.health.status("") == SERVING  # and the dealer itself serves
        await host.health.set(CODEAL_HEALTH, SERVING if able else NOT_SERVING)

    return publish
