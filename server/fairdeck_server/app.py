"""Assembling and running the dealer: storage, vault, gRPC server, health,
reflection, and a graceful drain on SIGTERM.

>>> ServerConfig().listen
'127.0.0.1:50051'
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from fairdeck.v1 import audit_pb2, dealer_pb2
from fairdeck_server import logs, reflection
from fairdeck_server.audit_servicer import AuditServicer
from fairdeck_server.auth import Authenticator, AuthInterceptor, TokenVerifier
from fairdeck_server.dealer import Dealer
from fairdeck_server.health import StorageHealth
from fairdeck_server.limits import DeadlineInterceptor, LimitsInterceptor, OpenHandsCap, RateLimiter
from fairdeck_server.metrics import MeteredStorage, Metrics, MetricsEndpoint, ObservingInterceptor
from fairdeck_server.servicer import DealerServicer, register
from fairdeck_server.storage import open_storage
from fairdeck_server.storage.base import Storage
from fairdeck_server.tls import check_listen, is_loopback, server_credentials
from fairdeck_server.transparency import CheckpointPublisher, load_or_create_signer
from fairdeck_server.vault import load_or_create_key

log = logging.getLogger(__name__)


def _service(module: ModuleType, name: str) -> ServiceDescriptor:
    service: ServiceDescriptor = module.DESCRIPTOR.services_by_name[name]
    return service


DEALER_SERVICE = _service(dealer_pb2, "DealerService").full_name
AUDIT_SERVICE = _service(audit_pb2, "AuditService").full_name
HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
HEALTH_NAMES = ("", DEALER_SERVICE, AUDIT_SERVICE)
"""What health answers for: the whole server ("") and each service it serves; all need storage."""


@dataclass(frozen=True)
class ServerConfig:
    """How to run the dealer."""

    listen: str = "127.0.0.1:50051"
    """host:port to listen on; port 0 picks a free one."""
    data_dir: Path = field(default_factory=lambda: Path("fairdeck-data"))
    """Where the SQLite database (and, by default, the keys) live."""
    seed_key_file: Path | None = None
    """AES key for seeds at rest; default DATA_DIR/seed.key (created 0600)."""
    grace_seconds: float = 10.0
    """On SIGTERM, how long calls in flight may take to finish."""
    log_key_file: Path | None = None
    """Ed25519 signed-note key of the transparency log; default DATA_DIR/log.key (created 0600)."""
    log_origin: str | None = None
    """The log's origin line (the key's name) when a new key is created."""
    checkpoint_interval: float = 0.2
    """Seconds between signed checkpoints while entries arrive."""
    max_hand_lifetime: float = 3600.0
    """Seconds a hand may stay open; older ones are voided (revealed and logged)."""
    db: str | None = None
    """A postgresql:// URL to share one database among replicas; None: SQLite in DATA_DIR."""
    db_pool_size: int = 8
    """Most PostgreSQL connections this replica opens (at least 2: one the writer keeps, the
    rest for reads); replicas times this must stay below max_connections. Not for SQLite."""
    # -- TLS and authentication (security issue) --
    tls_cert: Path | None = None
    """PEM certificate chain the server presents; with tls_key, turns TLS on."""
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    """PEM CA bundle; when set, clients must present a certificate it signed (mTLS)."""
    insecure: bool = False
    """Allow plaintext on a non-loopback address (refused otherwise)."""
    require_auth: bool | None = None
    """Require a token or client certificate; None: required unless listening on loopback."""
    # -- abuse limits --
    rate_limit: float = 500.0
    """Requests per second per tenant (token bucket); 0 turns it off."""
    rate_burst: int = 1000
    max_open_hands: int = 10_000
    """Hands a tenant may have open (not closed) at once; 0 turns it off."""
    max_message_bytes: int = 4 * 1024 * 1024
    default_deadline: float = 30.0
    """Seconds a call may run when the client set no (shorter) deadline."""
    # -- observability --
    metrics_listen: str | None = None
    """host:port for the Prometheus /metrics endpoint; None: no endpoint."""
    log_format: str = "text"
    """"text" or "json" (one object per line, with the call's request id)."""


class DealerServer:
    """The running dealer. ``start`` returns the bound port."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.storage = open_storage(config.db, config.data_dir, pool_size=config.db_pool_size)
        self.port = 0
        self.metrics = Metrics()
        # Told of every storage fault and every write that succeeds, it turns health
        # NOT_SERVING while storage does not take writes (health.py).
        self.storage_health = StorageHealth(
            self._probe, self._storage_health_changed, on_probe=self.metrics.probed
        )
        self._health_ready = False  # set once start() said SERVING, cleared by stop()
        self._health_tasks: set[asyncio.Task[None]] = set()
        # What the dealer, the log and the limits use: counts hands and storage failures.
        self.metered = cast(Storage, MeteredStorage(self.storage, self.metrics, self.storage_health))
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.metrics_port = 0

    async def start(self) -> int:
        # Refused before anything listens: half a TLS config, or plain text off loopback.
        credentials = server_credentials(self.config.tls_cert, self.config.tls_key, self.config.tls_client_ca)
        check_listen(self.config.listen, tls=credentials is not None, insecure=self.config.insecure)
        require_auth = self.config.require_auth
        self.auth = AuthInterceptor(
            Authenticator(
                TokenVerifier(self.metered),  # token lookups that fail count as storage errors
                required=not is_loopback(self.config.listen) if require_auth is None else require_auth,
            )
        )
        # Made here, not in __init__: grpc.aio binds them to the running loop.
        self.health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        config = self.config
        self.limits = LimitsInterceptor(
            RateLimiter(config.rate_limit, config.rate_burst),
            OpenHandsCap(self.metered.open_hands, config.max_open_hands),
            on_refusal=self.metrics.refused,
            on_tenant=logs.set_tenant,
        )
        # Outermost first: observing (sees every outcome), the default deadline (covers
        # stream writes), authentication, then the limits (per tenant, so after auth).
        interceptors: list[grpc.aio.ServerInterceptor[Any, Any]] = [
            ObservingInterceptor(self.metrics),
            DeadlineInterceptor(config.default_deadline),
            self.auth,
            self.limits,
        ]
        message_bytes = config.max_message_bytes or -1  # 0: no limit
        self.server = grpc.aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", message_bytes),
                ("grpc.max_send_message_length", message_bytes),
                ("grpc.so_reuseport", 0),
            ],
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        reflection.enable([DEALER_SERVICE, AUDIT_SERVICE, HEALTH_SERVICE], self.server)
        vault = load_or_create_key(self.config.seed_key_file or self.config.data_dir / "seed.key")
        signer = load_or_create_signer(
            self.config.log_key_file or self.config.data_dir / "log.key", self.config.log_origin
        )
        self.publisher = CheckpointPublisher(self.metered, signer, interval=self.config.checkpoint_interval)
        self.dealer = Dealer(self.metered, vault)
        register(self.server, DealerServicer(self.dealer), _service(dealer_pb2, "DealerService"), dealer_pb2)
        register(
            self.server,
            AuditServicer(self.metered, self.publisher, max_message_bytes=config.max_message_bytes),
            _service(audit_pb2, "AuditService"),
            audit_pb2,
        )
        if credentials is not None:
            self.port = self.server.add_secure_port(self.config.listen, credentials)
        else:
            self.port = self.server.add_insecure_port(self.config.listen)
        if self.port == 0:
            raise OSError(f"cannot listen on {self.config.listen}")
        if config.metrics_listen:
            self.metrics_endpoint = MetricsEndpoint(config.metrics_listen, self.metrics.registry)
            self.metrics_port = self.metrics_endpoint.port
        await self.server.start()
        # Health says NOT_SERVING until storage is open; calls made meanwhile wait for it.
        await self.storage.start()
        self.metrics.gauges.attach(self.metered, asyncio.get_running_loop())
        self.publisher.start()
        self._reaper = asyncio.create_task(self._void_stale_hands(), name="fairdeck-reaper")
        self._health_ready = True
        await self._set_health(self._storage_status())
        return self.port

    async def stop(self) -> None:
        """Drain: report NOT_SERVING, refuse new calls, finish those in flight, flush."""
        self._health_ready = False
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self.config.grace_seconds)
        await self.storage_health.stop()
        await self._close_metrics()
        self._reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reaper
        await self.publisher.stop()
        await self.storage.close()

    async def _close_metrics(self) -> None:
        self.metrics.gauges.detach()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.close()
            self.metrics_endpoint = None

    async def _void_stale_hands(self) -> None:
        lifetime_ms = int(self.config.max_hand_lifetime * 1000)
        while True:
            try:
                while await self.dealer.void_stale(lifetime_ms, on_skip=self._skipped_stale_hand) > 0:
                    pass
            except Exception as e:  # storage may be down for a while; try again next round
                log.error("voiding stale hands failed: %s", type(e).__name__)
            await asyncio.sleep(min(30.0, self.config.max_hand_lifetime / 4))

    def _skipped_stale_hand(self, tenant: str, hand_id: str, reason: str) -> None:
        # Ids and the reason code only: the error's text is not logged, and never a seed.
        self.metrics.reaper_skipped.labels(reason).inc()
        log.error(
            "stale hand %s of tenant %s cannot be voided (%s); skipped, other hands are voided. "
            "It stays open, and the audit lists it, until the dealer restarts able to open its seed",
            hand_id,
            tenant,
            reason,
        )

    async def _probe(self) -> None:
        await self.metered.probe()

    def _storage_health_changed(self, healthy: bool) -> None:
        self.metrics.storage_health(healthy)
        if self._health_ready:  # before start() is done, and once stop() began, health is not ours to set
            task = asyncio.get_running_loop().create_task(self._set_health(self._storage_status()))
            self._health_tasks.add(task)
            task.add_done_callback(self._health_tasks.discard)

    def _storage_status(self) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
        if self.storage_health.healthy:
            return health_pb2.HealthCheckResponse.SERVING
        return health_pb2.HealthCheckResponse.NOT_SERVING

    async def _set_health(self, status: health_pb2.HealthCheckResponse.ServingStatus.ValueType) -> None:
        for name in HEALTH_NAMES:
            await self.health.set(name, status)


async def serve(config: ServerConfig, *, ready: asyncio.Event | None = None) -> None:
    """Run until SIGTERM or SIGINT, then drain and return."""
    server = DealerServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        port = await server.start()
    except BaseException:
        await server._close_metrics()
        await server.storage.close()
        raise
    host = config.listen.rsplit(":", 1)[0]
    print(f"fairdeck dealer listening on {host}:{port} (data: {config.data_dir})", flush=True)
    if server.metrics_endpoint is not None:
        metrics_host = config.metrics_listen.rsplit(":", 1)[0] if config.metrics_listen else ""
        log.info("metrics on http://%s:%d/metrics", metrics_host, server.metrics_port)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("draining")
    await server.stop()
    print("fairdeck dealer stopped", flush=True)
