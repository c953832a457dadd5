"""Assembling and running the dealer: storage, vault, gRPC server, health,
reflection, and a graceful drain on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.log.logentry import time_of
from fairdeck.log.tiles import TileError
from fairdeck.v1 import audit_pb2, dealer_pb2
from fairdeck.wire import Reason
from fairdeck_server import fair
from fairdeck_server.addresses import check_listen, is_loopback, probe_listen
from fairdeck_server.dealing.clock import CHECK_INTERVAL_S, DealerClock, iso, start_after_log
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.dealer import _new_hand_id as new_hand_id
from fairdeck_server.dealing.reaper import Reaper
from fairdeck_server.dealing.stored_decks import Decks
from fairdeck_server.dealing.voids import Voider
from fairdeck_server.edge import connections, reflection
from fairdeck_server.edge.audit_servicer import AuditServicer
from fairdeck_server.edge.chain import CallInterceptor
from fairdeck_server.edge.codealer_link import codeal_dealer
from fairdeck_server.edge.connections import fit_descriptors
from fairdeck_server.edge.deadline import DeadlineInterceptor
from fairdeck_server.edge.dealer_servicer import DealerServicer
from fairdeck_server.edge.health import HealthServicer
from fairdeck_server.edge.interceptors import (
    AuthInterceptor,
    LimitsInterceptor,
    ObservingInterceptor,
    StreamCap,
)
from fairdeck_server.edge.methods import UNKNOWN_METHOD, loggable_method, register, unknown_method_handler
from fairdeck_server.edge.peers import peer_address
from fairdeck_server.edge.transport import aio_server, grpc_options, server_credentials
from fairdeck_server.log_causes import cause
from fairdeck_server.observe import heap, logging_setup
from fairdeck_server.observe.heap import TRIM_SECONDS
from fairdeck_server.observe.metrics import MeteredStorage, Metrics, MetricsEndpoint
from fairdeck_server.observe.storage_health import StorageHealth
from fairdeck_server.policy.auth import Authenticator, FailureLimiter, TokenVerifier
from fairdeck_server.policy.group_counts import GroupCounts
from fairdeck_server.policy.limits import OpenHandsCap, RateLimiter
from fairdeck_server.policy.open_work import OpenStreams
from fairdeck_server.publishing.cosigning import WitnessPublisher
from fairdeck_server.publishing.log_lease import FixedLease, Lease, PostgresLease
from fairdeck_server.publishing.log_signing import RANDOM_ORIGIN, CheckpointPublisher
from fairdeck_server.publishing.tile_publishing import LiveTiles, Source, read_whole_log, tiles_refusal
from fairdeck_server.refusals import DealerError, StartupRefused
from fairdeck_server.run.config import ServerConfig
from fairdeck_server.run.option_ranges import HEARTBEAT_SECONDS
from fairdeck_server.run.startup import Identity, check_store, prepare
from fairdeck_server.storage import open_storage
from fairdeck_server.storage.sqlite.batches import LOCK_TIMEOUT
from fairdeck_server.storage.sqlite.handoff import give_way

if TYPE_CHECKING:
    from fairdeck_server.dealing.codeal_dealing import CodealDealer
    from fairdeck_server.run.processes import Worker

ADMISSION_SLOTS = 64
"""Calls at work at once in one process, of all tenants; more wait for their tenant's turn
(fair.Admission). Enough to keep the storage writer's batches full; few enough that the event
loop's queue of ready work, which every call waits in, stays short."""

log = logging.getLogger(__name__)
STOP_WRITE_TIMEOUT_S = 10.0
"""On SIGTERM, how long the last checkpoint's signing may wait for storage (after the drain)."""


def _service(module: ModuleType, name: str) -> ServiceDescriptor:
    service: ServiceDescriptor = module.DESCRIPTOR.services_by_name[name]
    return service


DEALER_SERVICE = _service(dealer_pb2, "DealerService").full_name
AUDIT_SERVICE = _service(audit_pb2, "AuditService").full_name
HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
HEALTH_NAMES = ("", DEALER_SERVICE, AUDIT_SERVICE)
"""What health answers for: the whole server ("") and each service it serves; all need storage."""


class DealerServer:
    """The running dealer: ``start`` returns the bound port, ``stop`` drains.

    ``__init__`` makes storage, the metrics, health tracking and the call layers. ``start`` makes
    the rest, in this order: the gRPC server (bound to the running loop) and its port, the
    metrics endpoint, the identity (keys and the data dir lock, only once the port is ours), what
    needs the identity (the dealer, the checkpoint publisher, the cosigning), then opens storage.
    """

    server: grpc.aio.Server
    health: HealthServicer
    open_streams: OpenStreams
    publisher: CheckpointPublisher
    witnessing: WitnessPublisher
    dealer: Dealer
    codeal: CodealDealer | None = None
    reaper: Reaper

    def __init__(self, config: ServerConfig, worker: Worker | None = None, *, trim_heap: bool = True) -> None:
        """``worker``: this is one of the processes of ``serve --processes N`` (processes.py).
        ``trim_heap``: False for a dealer sharing a process (a test's): the heap is not its own."""
        self.trim_heap = trim_heap
        if worker is not None:
            config = replace(
                config, listen=worker.listen, metrics_listen=worker.metrics_listen(config.metrics_listen)
            )
        self.config = config
        self.worker = worker
        lock_fd = None if worker is None else worker.writer_lock_fd
        self.storage = open_storage(
            config.db,
            config.data_dir,
            pool_size=config.db_pool_size,
            processes=config.processes,
            writer_lock_fd=lock_fd,
        )
        self.port = 0
        self.clock = DealerClock()
        """The time the dealer logs and measures lifetimes by: monotonic while it runs (clock.py)."""
        self.metrics = Metrics()
        # Told of every storage fault and every write that succeeds, it turns health
        # NOT_SERVING while storage does not take writes (storage_health.py).
        self.storage_health = StorageHealth(
            self._probe, self._storage_health_changed, on_probe=self.metrics.probed
        )
        self._health_tasks: set[asyncio.Task[None]] = set()
        # What the dealer, the log and the limits use: counts hands and storage failures.
        self.metered = MeteredStorage(self.storage, self.metrics, self.storage_health)
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.metrics_port = 0
        self.identity: Identity | None = None
        self._started = False
        required = config.require_auth
        # token lookups that fail count as storage errors
        self.tokens = TokenVerifier(
            self.metered, failures=FailureLimiter(config.auth_failure_rate, config.auth_failure_burst)
        )
        self.auth = AuthInterceptor(
            Authenticator(
                self.tokens, required=not is_loopback(config.listen) if required is None else required
            ),
            on_tenant=logging_setup.set_tenant,
        )
        # serve --processes N: caps count across the group's processes (group_counts.py).
        group = None
        if worker is not None and worker.counts_fd is not None:
            group = GroupCounts(worker.counts_fd, worker.index, worker.count)
            group.reset_own()  # what a process it replaces held is free again
        self.limits = LimitsInterceptor(
            RateLimiter(config.rate_limit, config.rate_burst, on_pace=self.metrics.paced_call),
            OpenHandsCap(self.metered.open_hands, config.max_open_hands, group=group),
            # No cap on calls in flight (0) turns the fair admission off with it.
            admission=fair.Admission(
                ADMISSION_SLOTS if config.max_calls_in_flight else 0, config.max_calls_in_flight
            ),
            streams=StreamCap(config.max_streams, group),
            on_refusal=self.metrics.refused,
            default_deadline=config.default_deadline,
            group=group,
            give_way=give_way,
        )
        # Outermost first: observing (sees every outcome), the default deadline (covers
        # stream writes), authentication (tells the access log the tenant), then the limits
        # (per tenant, so after auth). One interceptor, wrapped once per method (edge/chain.py).
        observing = ObservingInterceptor(self.metrics)
        unknown = unknown_method_handler(self._unknown_method_called)
        self.interceptor = CallInterceptor(
            [observing, DeadlineInterceptor(config.default_deadline), self.auth, self.limits],
            # A method nobody serves: counted once under one label, refused, no traceback.
            unknown=lambda method: observing.wrap(loggable_method(method), unknown, label=UNKNOWN_METHOD),
        )

    async def start(self) -> int:
        """Start serving; on any failure, undo what was started (ports, lock, storage) and raise."""
        try:
            return await self._start()
        except BaseException:
            await self._abort()
            raise

    async def _abort(self) -> None:
        witnessing = getattr(self, "witnessing", None)
        if witnessing is not None:
            await witnessing.stop()
        server = getattr(self, "server", None)
        if server is not None:  # stopped even if never started: grpc's finaliser needs a live loop
            await server.stop(None)
        self.tokens.close()
        self.limits.cap.close()
        await self.storage_health.stop()
        await self._close_metrics()
        await self.storage.close()
        if self.codeal is not None:
            await self.codeal.aclose()
        if self.identity is not None:
            self.identity.release()

    async def _start(self) -> int:
        config = self.config
        # Refused before anything listens: half a TLS config, or plain text off loopback.
        credentials = server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca)
        check_listen(config.listen, tls=credentials is not None, insecure=config.insecure)
        self._make_server()
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        # Ports first: a port in use is refused before a fresh data dir gets its keys.
        self._bind(credentials)
        self._open_metrics_endpoint()
        self.identity = prepare(config, lock_fd=None if self.worker is None else self.worker.lock_fd)
        self._make_services(self.identity)
        await self.server.start()
        # Health says NOT_SERVING until storage is open and checked; calls made meanwhile wait for it.
        where = "the PostgreSQL database" if config.db else f"database {config.data_dir / 'fairdeck.db'}"
        try:
            await self.storage.start()
            await check_store(self.storage, self.identity, where)
            await self._start_clock()
            # A store that cannot take the dealer's writes (a read-only file or mount, a full disk,
            # a lock held outside) is said now, in one line, not at the first client's write.
            await self.storage.probe()
            # Hands that outlived their lifetime while the dealer was down are voided before any
            # call can log an entry (reaper.py).
            await self.reaper.round()
        except DealerError as e:  # storage unreachable at start: a refusal to start, in one line
            raise StartupRefused(self._storage_refusal(e, where)) from None
        try:  # before anything is served: the tiles of every stored checkpoint are whole
            await self.publisher.prepare()
        except (TileError, OSError) as e:
            raise StartupRefused(tiles_refusal(config.tiles, e)) from None
        except DealerError as e:
            raise StartupRefused(self._storage_refusal(e, where)) from None
        self.storage.serving()
        self.metrics.gauges.attach(self.metered, asyncio.get_running_loop())
        watching = connections.watch(
            self.port,
            self.config.max_connections_per_peer,
            on_cut=self.metrics.cut_connections,
            on_count=self.metrics.connections.set,
        )
        self._warden = asyncio.create_task(watching, name="fairdeck-connections")
        self._trimmer = asyncio.create_task(
            self._trim_heap() if self.trim_heap else asyncio.Event().wait(), name="fairdeck-heap"
        )
        self.publisher.start()
        self.witnessing.start()
        self._reaper = asyncio.create_task(self.reaper.run(), name="fairdeck-reaper")
        if self.codeal is not None and self.codeal.reaper is not None:  # once storage is open
            self.codeal.reaper.start()
        self._clock_watch = asyncio.create_task(self._watch_clock(), name="fairdeck-clock")
        self._started = True
        await self._set_health(self._storage_status())
        return self.port

    def _make_server(self) -> None:
        """The gRPC server with health and reflection (made here, not in __init__: grpc.aio binds
        them to the running loop)."""
        self.server = aio_server(  # grpcio's log filters first: it logs a non-UTF-8 token whole
            interceptors=[self.interceptor],
            options=grpc_options(
                self.config,
                reuseport=self.worker is not None,
                max_connections=fit_descriptors(self.config.max_connections),
            ),
        )
        # Health Watch and reflection take no credentials: their streams count per client address.
        self.open_streams = OpenStreams(self.config.max_open_streams_per_peer)
        self.health = HealthServicer(self.open_streams)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable([DEALER_SERVICE, AUDIT_SERVICE, HEALTH_SERVICE], self.server, self.open_streams)

    def _bind(self, credentials: grpc.ServerCredentials | None) -> None:
        """Take the port, or refuse to start naming --listen. The probe gives the refusal its reason
        without grpc's own error line; grpc's bind stays the test."""
        listen = self.config.listen
        if self.worker is None:  # a worker's port is its group's, which the probe would call busy
            probe_listen("--listen", listen)
        try:
            if credentials is not None:
                self.port = self.server.add_secure_port(listen, credentials)
            else:
                self.port = self.server.add_insecure_port(listen)
        except RuntimeError:  # grpc's "Failed to bind", with no errno
            self.port = 0
        if self.port == 0:
            raise StartupRefused(
                f"--listen {listen}: cannot listen there (the port is in use, or the address "
                "is not this host's); stop what holds it, or pick another --listen"
            )

    def _open_metrics_endpoint(self) -> None:
        listen = self.config.metrics_listen
        if not listen:
            return
        try:
            self.metrics_endpoint = MetricsEndpoint(listen, self.metrics.registry)
        except OSError as e:
            raise StartupRefused(
                f"--metrics-listen {listen}: cannot listen there ({e.strerror or e}); "
                "stop what holds it, or pick another --metrics-listen"
            ) from None
        self.metrics_port = self.metrics_endpoint.port

    def _make_services(self, identity: Identity) -> None:
        """The dealer, the checkpoint publisher and the cosigning, and the two services on the server."""
        config = self.config
        signer = identity.log_keys.signer
        tiles = (
            None
            if config.tiles is None
            else LiveTiles(config.tiles, signer.name, self._read_log, identity.log_keys.rotations)
        )
        if tiles is not None and signer.name.startswith(RANDOM_ORIGIN):
            log.warning(
                "the log's origin %s is a random name; tlog-tiles asks for the URL prefix of the tiles "
                "without the scheme (a new log gets one with fairdeck init --log-origin)",
                signer.name,
            )
        self.publisher = CheckpointPublisher(
            self.metered,
            signer,
            interval=config.checkpoint_interval,
            tiles=tiles,
            lease=self._lease(),
            show_latest=not config.witnesses,
        )
        self.witnessing = WitnessPublisher(
            self.metered,
            signer.verifier,
            config.witnesses,
            config.witness_threshold,
            self.metrics.registry,
            interval=config.checkpoint_interval,
            clock_ms=self.clock.now_ms,
            cadence=config.witness_interval,
            leads=lambda: self.publisher.leading,
            on_final=None if tiles is None else tiles.show,
            shared=config.db is not None,
        )
        # The reaper voids through a Voider of its own, sharing the dealer's decks, so the dealer
        # calls the reaper (before it logs) and the reaper never calls the dealer back.
        voider = Voider(self.metered, Decks(identity.vault), self.clock.now_ms)
        self.reaper = Reaper(
            voider,
            config.max_hand_lifetime,
            self.clock.now_ms,
            on_skip=self._skipped_stale_hand,
            on_behind=self._reaper_behind,
        )
        self.dealer = Dealer(
            self.metered,
            identity.vault,
            clock_ms=self.clock.now_ms,
            before_logging=self.reaper.ensure_fresh,
            others_call=self.limits.admission.others,
            voider=voider,
        )
        keys = identity.log_keys  # the log a co-dealt record may belong to: its key, or one rotated from
        bound = [keys.signer.verifier.to_string(), *(v.to_string() for v in keys.retired)]
        self.codeal = codeal_dealer(self.config, identity.vault, new_hand_id, self.clock.now_ms, self, bound)
        servicer = DealerServicer(self.dealer, self.codeal, codeal_default=config.codeal_default)
        register(self.server, servicer, _service(dealer_pb2, "DealerService"), dealer_pb2)
        audit = AuditServicer(
            self.metered,
            self.publisher,
            max_message_bytes=config.max_message_bytes,
            final=lambda: self.witnessing.final,
            rotations=identity.log_keys.rotations,
        )
        register(self.server, audit, _service(audit_pb2, "AuditService"), audit_pb2)

    def _lease(self) -> Lease | None:
        """Who leads the log (log_lease.py), when anything needs one leader: tiles or witnesses."""
        config = self.config
        if config.tiles is None and not config.witnesses:
            return None
        if config.db is not None:
            return PostgresLease(config.db)
        return FixedLease(self.worker is None or self.worker.index == 0)

    def _read_log(self) -> Source:
        """The whole log, read-only, for rebuilding the tiles."""
        return read_whole_log(self.config)

    async def stop(self) -> None:
        """Drain: report NOT_SERVING, refuse new calls, finish those in flight, flush."""
        if not self._started:  # a start that failed has undone itself already
            return
        self._started = False
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self.config.grace_seconds)
        self.tokens.close()  # reads ahead of need: no call is left to want them
        self.limits.cap.close()
        await self.storage_health.stop()
        await self._close_metrics()
        self._warden.cancel()
        self._trimmer.cancel()
        for task in (self._reaper, self._clock_watch):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.codeal is not None and self.codeal.reaper is not None:  # before storage closes
            await self.codeal.reaper.stop()
        await self.witnessing.stop()
        try:  # sign the last entries, within a bound: SIGTERM always ends the process
            await asyncio.wait_for(self.publisher.stop(), timeout=STOP_WRITE_TIMEOUT_S)
        except Exception as e:  # storage failing as it stops (a full disk, a lock): said, and not fatal
            if isinstance(e, TimeoutError):
                where = f"storage did not answer within {STOP_WRITE_TIMEOUT_S:g} s"
            elif isinstance(e, DealerError):
                where = self._storage_refusal(e, "storage")
            else:
                where = cause(e)
            log.error(
                "the last checkpoint could not be signed while stopping: %s. Nothing acknowledged is "
                "lost; the next start signs it",
                where,
            )
        await self.storage.close()
        if self.codeal is not None:
            await self.codeal.aclose()
        if self.identity is not None:
            self.identity.release()  # after the last write: the next dealer may take the dir

    async def _close_metrics(self) -> None:
        self.metrics.gauges.detach()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.close()
            self.metrics_endpoint = None

    def _storage_refusal(self, error: DealerError, where: str) -> str:
        """The one line for storage failing at start: what the engine found (a full disk, a
        read-only file or mount, a lock, damage), with its fix; else the error as it is."""
        return self.storage.diagnose() or f"{where}: {error}"

    async def _start_clock(self) -> None:
        """Refuse a clock behind the log's latest entry (unless allowed), or start after it."""
        size = await self.metered.log_size()
        latest = None
        if size:
            (entry,) = await self.metered.log_entries(size - 1, size)
            time_ms = time_of(entry)
            latest = None if time_ms is None else (size - 1, time_ms)
        warning = start_after_log(self.clock, latest, allow_behind=self.config.allow_clock_behind_log)
        if warning is not None:
            log.warning("%s", warning)

    async def _watch_clock(self) -> None:
        """Compare the wall clock with the dealer's every second; say so once per step."""
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            step = self.clock.step()
            if step is None:
                continue
            direction = "forward" if step > 0 else "back"
            self.metrics.clock_steps.labels(direction).inc()
            self.metrics.clock_offset.set(self.clock.offset_ms / 1000)
            log.warning(
                "the wall clock stepped %s by %.1f s (it says %s; the log's time is %s): entry times and "
                "hand lifetimes keep to the monotonic clock, no hand is voided early; the log's time "
                "follows the wall clock again at the next restart",
                direction,
                abs(step) / 1000,
                iso(self.clock.wall_ms()),
                iso(self.clock.now_ms()),
            )

    async def _trim_heap(self) -> None:
        """Every TRIM_SECONDS: what ended calls freed goes back to the system (heap.py)."""
        trimmer = heap.Trimmer()
        while True:
            await asyncio.sleep(TRIM_SECONDS)
            await asyncio.to_thread(trimmer.tick)

    def _skipped_stale_hand(self, tenant: str, hand_id: str, reason: str) -> None:
        # Ids and the reason code only: the error's text is not logged, and never a seed.
        self.metrics.reaper_skipped.labels(reason).inc()
        until = (
            'its row is repaired (docs/operations.md, "A damaged row")'
            if reason == Reason.HAND_UNREADABLE
            else "the dealer restarts able to open its seed"
        )
        log.error(
            "stale hand %s of tenant %s cannot be voided (%s); skipped, other hands are voided. "
            "It stays open, and the audit lists it, until %s",
            hand_id,
            tenant,
            reason,
            until,
        )

    async def _unknown_method_called(self, peer: str) -> None:
        """A call of a method nobody serves is a failed call of the client's address, limited
        as failed authentications are (auth.FailureLimiter): refused AUTH_RATE_LIMITED, after
        being held, once the address has used up its failures."""
        address = peer_address(peer)
        await self.tokens.check_address(address)
        self.tokens.failures.failed(address)

    async def _probe(self) -> None:
        await self.metered.probe()

    def _storage_health_changed(self, healthy: bool) -> None:
        self.metrics.storage_health(healthy)
        if self._started:  # before start() is done, and once stop() began, health is not ours to set
            task = logging_setup.own_task(self._set_health(self._storage_status()), name="fairdeck-health")
            self._health_tasks.add(task)
            task.add_done_callback(self._health_tasks.discard)

    def _reaper_behind(self, behind: bool) -> None:
        self.metrics.reaper_behind.set(1 if behind else 0)
        self._storage_health_changed(self.storage_health.healthy)  # health says it too

    def _storage_status(self) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
        """SERVING while storage takes writes and voids keep up (reaper.py: entries wait else)."""
        if self.storage_health.healthy and not self.reaper.behind:
            return health_pb2.HealthCheckResponse.SERVING
        return health_pb2.HealthCheckResponse.NOT_SERVING

    async def _set_health(self, status: health_pb2.HealthCheckResponse.ServingStatus.ValueType) -> None:
        for name in HEALTH_NAMES:
            await self.health.set(name, status)


async def _heartbeat(fd: int, server: DealerServer) -> None:
    """A worker's sign of progress to its supervisor (processes.py): a byte every
    HEARTBEAT_SECONDS while its event loop runs, except while its storage writer has held the
    writers' lock longer than the others wait for it (then it is the one stuck, not them)."""
    os.set_blocking(fd, False)
    held_for = server.storage.lock_held_for
    while True:
        if held_for() < LOCK_TIMEOUT:
            try:
                os.write(fd, b".")
            except BlockingIOError:  # the supervisor is behind in reading: it has beats enough
                pass
            except OSError:  # the supervisor is gone: the lifeline says so too
                return
        await asyncio.sleep(HEARTBEAT_SECONDS)


async def serve(
    config: ServerConfig,
    *,
    ready: asyncio.Event | None = None,
    described: str | None = None,
    worker: Worker | None = None,
) -> None:
    """Run until SIGTERM or SIGINT, then drain and return.

    ``described``: the configuration, logged once the dealer has started (a refusal
    before then is one line on stderr, nothing else)."""
    server = DealerServer(config, worker)
    config = server.config
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if worker is not None and worker.lifeline_fd is not None:
        # The supervisor holds the pipe's other end: end of file means it is gone (even by
        # SIGKILL), and a worker never serves on without it.
        loop.add_reader(worker.lifeline_fd, stop.set)
    port = await server.start()  # on a failure it has undone itself
    if described is not None:
        log.info("configuration: %s", described)
    host = config.listen.rsplit(":", 1)[0]
    part = "" if worker is None else f"; process {worker.index + 1} of {worker.count}"
    print(f"fairdeck dealer listening on {host}:{port} (data: {config.data_dir}{part})", flush=True)
    if server.metrics_endpoint is not None:
        metrics_host = config.metrics_listen.rsplit(":", 1)[0] if config.metrics_listen else ""
        log.info("metrics on http://%s:%d/metrics", metrics_host, server.metrics_port)
    if ready is not None:
        ready.set()
    beating = None
    if worker is not None and worker.heartbeat_fd is not None:
        beating = asyncio.create_task(_heartbeat(worker.heartbeat_fd, server), name="fairdeck-heartbeat")
    await stop.wait()
    log.info("draining")
    if beating is not None:
        beating.cancel()
    await server.stop()
    print("fairdeck dealer stopped", flush=True)
