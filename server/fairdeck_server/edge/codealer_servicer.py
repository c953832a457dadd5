"""The CoDealerService servicer and the co-dealer's gRPC server (``fairdeck codealer serve``).

Every call is the dealer's or refused: it must carry the dealer's token (codealer/dealer_token.py)
before any work, else UNAUTHENTICATED MISSING_CREDENTIALS / INVALID_TOKEN; failed attempts are
limited per client address (auth.FailureLimiter, then RESOURCE_EXHAUSTED AUTH_RATE_LIMITED). At
most ``MAX_CALLS_IN_FLIGHT`` of the dealer's calls run or wait at once (then RESOURCE_EXHAUSTED
TOO_MANY_CALLS): the co-dealer's work always has an owner and a bound. Protobuf in, ``CoDealer``
calls (in a worker thread: shuffles and proofs take tens of milliseconds of CPU), protobuf out;
refusals end through status.py with their stable reason. A ledger that cannot write answers
UNAVAILABLE STORAGE_UNAVAILABLE (nothing was given) and health says NOT_SERVING until a probe
write succeeds (``LedgerWatch``); GetIdentity, the dealer's health check, is refused the same
way meanwhile. Health (``grpc.health.v1.Health``) needs no credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2_grpc

from fairdeck.v1 import codealer_pb2 as pb
from fairdeck.v1 import codealer_pb2_grpc
from fairdeck.wire import AUTHORIZATION, Reason
from fairdeck_server import refusals
from fairdeck_server.codealer.dealer_token import TokenCheck, bearer
from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import LedgerError
from fairdeck_server.dealing.vault import VaultError
from fairdeck_server.edge.health import NOT_SERVING, SERVING, HealthServicer
from fairdeck_server.edge.peers import peer_address
from fairdeck_server.edge.status import translated
from fairdeck_server.edge.transport import TRANSPORT_OPTIONS, aio_server, connection_options
from fairdeck_server.policy.auth import FailureLimiter
from fairdeck_server.policy.open_work import OpenStreams

log = logging.getLogger(__name__)
T = TypeVar("T")
SERVICE = pb.DESCRIPTOR.services_by_name["CoDealerService"].full_name
HEALTH_NAMES = ("", SERVICE)
MAX_CALLS_IN_FLIGHT = 256
"""The dealer's calls running or waiting at once (its deck pool makes one deck at a time; draws
and opens follow its tenants' own limits): beyond, RESOURCE_EXHAUSTED TOO_MANY_CALLS."""
BUSY_RETRY = 0.1
"""Seconds a call refused TOO_MANY_CALLS is asked to wait."""
PROBE_EVERY = 5.0
"""Seconds between the ledger's probe writes while it takes writes."""
PROBE_RETRY = 1.0
"""Seconds between probe writes while it does not."""
MAX_WATCH_STREAMS = 100
"""Health Watch streams one client address may hold open (as the dealer's default)."""
MAX_REQUEST_BYTES = 2 * 1024 * 1024
"""Largest request, in raw bytes, checked by gRPC before it is decoded (and before the token):
the largest the contract allows, a ShuffleDeck of 16 holders' key records and 15 shuffle records
of shoe-8 (416 cards), is 1.4 MB. gRPC's own default, 4 MiB, let strangers send twice as much."""
HANDSHAKE_S = 10.0
"""Seconds a connection has to finish the HTTP/2 preface and settings (gRPC's default: 120)."""
IDLE_S = 60.0
"""Seconds a connection with no call in flight is kept (gRPC's default: forever); the dealer's
channel reconnects by itself."""
AGE_S, AGE_GRACE_S = 3600.0, 30.0
"""Any connection is sent GOAWAY after AGE_S and closed AGE_GRACE_S later: it bounds a request
whose body never comes (the dealer's own calls take CALL_TIMEOUT, 10 s, at most)."""


class LedgerWatch:
    """Health SERVING while the ledger takes writes: a probe write every ``PROBE_EVERY`` seconds
    (``PROBE_RETRY`` while failing), and at once after a call's write failed."""

    def __init__(self, codealer: CoDealer, health: HealthServicer) -> None:
        self.codealer = codealer
        self.health = health
        self.healthy: bool | None = None
        self._wake = asyncio.Event()

    def failed(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            ok = await asyncio.to_thread(self.codealer.ledger.probe)
            if ok != self.healthy:
                if ok:
                    log.info("the co-dealer's ledger takes writes: health SERVING")
                else:
                    log.warning(
                        "the co-dealer's ledger %s does not take writes: health NOT_SERVING until a "
                        "probe write succeeds",
                        self.codealer.ledger.path,
                    )
                self.healthy = ok
                for name in HEALTH_NAMES:
                    await self.health.set(name, SERVING if ok else NOT_SERVING)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), PROBE_EVERY if ok else PROBE_RETRY)


class CoDealerServicer(codealer_pb2_grpc.CoDealerServiceServicer):
    def __init__(
        self,
        codealer: CoDealer,
        token: TokenCheck,
        *,
        failures: FailureLimiter | None = None,
        max_in_flight: int = MAX_CALLS_IN_FLIGHT,
        watch: LedgerWatch | None = None,
    ) -> None:
        self.codealer = codealer
        self.token = token
        self.failures = failures if failures is not None else FailureLimiter()
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self.watch = watch

    async def _run(self, context: Any, work: Callable[[], T]) -> T:
        """``work`` for the dealer, once its token is checked, within the cap."""
        self._admit(context)
        if self.in_flight >= self.max_in_flight:
            raise refusals.codealer_busy(self.max_in_flight, BUSY_RETRY)
        self.in_flight += 1
        try:
            return await asyncio.to_thread(work)
        except LedgerError as e:
            if self.watch is not None:
                self.watch.failed()
            raise refusals.storage_unavailable(str(e)) from None
        except VaultError as e:
            raise refusals.seed_unavailable(str(e)) from None
        finally:
            self.in_flight -= 1

    def _admit(self, context: Any) -> None:
        """The dealer's token is always let through (a stranger at its address cannot lock it
        out); any other credential, or none, counts as a failure of the caller's address."""
        headers = [v for k, v in (context.invocation_metadata() or ()) if k == AUTHORIZATION]
        presented = bearer(headers[0]) if len(headers) == 1 else None
        if presented is not None and self.token.matches(presented):
            return
        address = peer_address(context.peer())
        delay = self.failures.blocked(address)
        if delay is not None:
            raise refusals.auth_rate_limited(delay)
        self.failures.failed(address)
        if not headers:
            raise refusals.codealer_missing_token()
        log.info("refused a call from %s: %s", address, Reason.INVALID_TOKEN)
        raise refusals.codealer_invalid_token()

    @translated
    async def AnnounceHand(self, request: pb.AnnounceHandRequest, context: Any) -> pb.AnnounceHandResponse:
        record, signature = await self._run(
            context,
            lambda: self.codealer.announce(
                request.hand_id, request.deck, request.holder, request.holder_count
            ),
        )
        return pb.AnnounceHandResponse(
            key_record=record, key_record_signature=signature, identity_key=self.codealer.identity_key
        )

    @translated
    async def ShuffleDeck(self, request: pb.ShuffleDeckRequest, context: Any) -> pb.ShuffleDeckResponse:
        record, signature = await self._run(
            context,
            lambda: self.codealer.shuffle(
                request.hand_id, list(request.key_records), list(request.shuffle_records)
            ),
        )
        return pb.ShuffleDeckResponse(shuffle_record=record, shuffle_record_signature=signature)

    @translated
    async def GetShare(self, request: pb.GetShareRequest, context: Any) -> pb.GetShareResponse:
        given = await self._run(
            context,
            lambda: self.codealer.share(
                request.hand_id,
                request.position,
                request.seat_public_key,
                list(request.later_shuffle_records),
                request.count,
                list(request.seat_public_keys),
            ),
        )
        return pb.GetShareResponse(
            shares=given.shares, sealed_shares=given.sealed, seal_signatures=given.seal_signatures
        )

    @translated
    async def RevealSeed(self, request: pb.RevealSeedRequest, context: Any) -> pb.RevealSeedResponse:
        hand_id = request.hand_id
        seed, made = await self._run(
            context,
            lambda: (
                self.codealer.reveal(hand_id, list(request.seat_releases)),
                self.codealer.seal_statements(hand_id),
            ),
        )
        seals = [
            pb.PositionSeal(position=p, seat_public_key=k, sealed_share_sha256=d, signature=g)
            for p, k, d, g in made
        ]
        return pb.RevealSeedResponse(seed=seed, seals=seals)

    @translated
    async def GetIdentity(self, request: pb.GetIdentityRequest, context: Any) -> pb.GetIdentityResponse:
        self._admit(context)
        if self.watch is not None and self.watch.healthy is False:  # the dealer's health asks this
            raise refusals.storage_unavailable(
                "the co-dealer's ledger does not take writes: it can record no share now"
            )
        return pb.GetIdentityResponse(
            identity_key=self.codealer.identity_key,
            max_hand_lifetime_ms=self.codealer.lifetime_ms,
            expired_hands=self.codealer.expired,
            reveal_hold_ms=self.codealer.reveal_hold_ms,
        )


async def start_codealer_server(
    codealer: CoDealer, listen: str, token: TokenCheck
) -> tuple[grpc.aio.Server, int, LedgerWatch]:
    """A started gRPC server for ``codealer`` on ``listen`` (plain text), its bound port (0 if
    it could not bind) and its ledger's health watch (its ``run`` is the caller's to start)."""
    # The dealer's transport bounds (edge/transport.py), without a cap on connections in all:
    # strangers filling it would lock the dealer out.
    bounds = connection_options(
        idle=IDLE_S, handshake=HANDSHAKE_S, age=AGE_S, age_grace=AGE_GRACE_S, max_connections=0
    )
    options = [
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
        *TRANSPORT_OPTIONS,
        *bounds,
    ]
    server = aio_server(options)  # grpcio's log filters, as the dealer's (edge/grpc_logs.py)
    health = HealthServicer(OpenStreams(MAX_WATCH_STREAMS))
    for name in HEALTH_NAMES:
        await health.set(name, NOT_SERVING)  # until the first probe write
    watch = LedgerWatch(codealer, health)
    codealer_pb2_grpc.add_CoDealerServiceServicer_to_server(
        CoDealerServicer(codealer, token, watch=watch), server
    )
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    port = server.add_insecure_port(listen)
    if port:
        await server.start()
    return server, port, watch
