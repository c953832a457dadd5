"""Prometheus metrics (``Metrics``, in a registry of each DealerServer's own), the gauges read
from storage at scrape time, the storage wrapper that counts hands and storage faults
(``MeteredStorage``), and the /metrics endpoint. No grpc: the observing interceptor feeds it.

Labels never hold request data or the tenant (the access log has it): the service and method,
the status code name, a hand's outcome, a limit's reason, a storage operation. Counters count
what this process did (sum them across replicas); gauges read from storage describe the shared
database (take their max).
"""

from __future__ import annotations

import asyncio
import logging
import platform
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from typing import Any, TypeVar

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.log import logentry
from fairdeck.wire import Reason
from fairdeck_server import refusals
from fairdeck_server.addresses import split_host_port
from fairdeck_server.log_causes import Repeats, cause
from fairdeck_server.observe.storage_health import StorageHealth
from fairdeck_server.storage.base import (
    Change,
    Created,
    HandBatch,
    HandRecord,
    LogForkError,
    NewHand,
    Storage,
    StoredCheckpoint,
    StoredHandState,
    TokenRecord,
    WriterStats,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
OUTCOMES = {logentry.CLOSED: "closed", logentry.VOIDED: "voided"}
STORAGE_FAULTS = (refusals.Status.UNAVAILABLE, refusals.Status.INTERNAL)
GAUGE_MAX_AGE = 1.0
"""Seconds a scrape may reuse the gauges read from storage by the previous one."""
WRITER_COUNTERS = (
    ("batches", "fairdeck_storage_batches", "Transactions committed by this process's storage writer"),
    ("operations", "fairdeck_storage_operations", "Storage operations run in those transactions"),
    ("appends", "fairdeck_log_appends", "Log entries this process appended"),
    ("transaction_seconds", "fairdeck_storage_transaction_seconds", "Time in transactions, COMMIT included"),
    ("lock_wait_seconds", "fairdeck_log_lock_wait_seconds", "Time the writer waited for the shared log lock"),
    ("hashing_seconds", "fairdeck_log_hashing_seconds", "Time the log lock was held to hash new leaves"),
)
"""The storage writer's counts (WriterStats), exported when the engine keeps them."""
WRITES = frozenset(
    {
        "create_hands",
        "create_batch",
        "update_hand",
        "update_hands",
        "put_checkpoint",
        "put_token",
        "revoke_token",
        "probe",
    }
)
"""Storage operations that write: one that returns means storage takes writes (storage_health.py)."""


class Metrics:
    """The dealer's instruments, in a registry of its own."""

    def __init__(self) -> None:
        # No *_created series: a timestamp per counter that no one reads (the switch is
        # prometheus_client's, process-wide; a dealer's process is its own).
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry()
        r = self.registry
        prometheus_client.Info("fairdeck_build", "What this dealer runs", registry=r).info(build_info())
        self.rpcs_started = Counter(
            "fairdeck_rpcs_started",
            "RPCs begun, by method: less those finished, the calls in flight",
            ["service", "method"],
            registry=r,
        )
        self.rpcs = Counter(
            "fairdeck_rpcs",
            "RPCs finished, by method and status code",
            ["service", "method", "code"],
            registry=r,
        )
        self.rpc_seconds = Histogram(
            "fairdeck_rpc_duration_seconds",
            "Time from the call's start to its status, by method",
            ["service", "method"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.hands_opened = Counter("fairdeck_hands_opened", "Hands created (commitment logged)", registry=r)
        self.hands_closed = Counter(
            "fairdeck_hands_closed",
            "Hands revealed: outcome closed (by the client) or voided (too old)",
            ["outcome"],
            registry=r,
        )
        self.refusals = Counter(
            "fairdeck_limit_refusals",
            "Calls refused with RESOURCE_EXHAUSTED by a limit",
            ["reason"],
            registry=r,
        )
        self.paced = Counter(
            "fairdeck_paced_calls",
            "Calls of a tenant's burst that waited to start at its rate while tenants shared",
            registry=r,
        )
        self.paced_seconds = Counter(
            "fairdeck_paced_seconds", "Seconds those calls waited to start, in all", registry=r
        )
        self.storage_errors = Counter(
            "fairdeck_storage_errors",
            "Storage operations that failed (UNAVAILABLE or INTERNAL), by operation",
            ["operation"],
            registry=r,
        )
        self.storage_healthy = Gauge(
            "fairdeck_storage_healthy",
            "1 while storage takes writes, 0 after a failed write and a failed probe write",
            registry=r,
        )
        self.storage_healthy.set(1)
        self.storage_probes = Counter(
            "fairdeck_storage_probes",
            "Probe writes made while storage was failing, by outcome (ok, failed)",
            ["outcome"],
            registry=r,
        )
        self.codealer_healthy = Gauge(
            "fairdeck_codealer_healthy",
            "1 while the co-dealer answers the dealer's token with the pinned identity (co-dealt health "
            "SERVING); 0 otherwise, and without --codealer",
            registry=r,
        )
        self.connections = Gauge(
            "fairdeck_connections", "Client connections open on the serving port (this process)", registry=r
        )
        self.connections_cut = Counter(
            "fairdeck_connections_cut",
            "Connections closed because their client address held more than max_connections_per_peer",
            registry=r,
        )
        self.reaper_behind = Gauge(
            "fairdeck_reaper_behind",
            "1 while voiding stale hands lags what an entry needs by over a second (health NOT_SERVING)",
            registry=r,
        )
        self.codeal_voids_behind = Gauge(
            "fairdeck_codeal_voids_behind",
            "1 while a co-dealt hand is open past --max-hand-lifetime (the co-dealer down, say): its "
            "void is retried; ordinary hands and entries do not wait for it",
            registry=r,
        )
        self.codeal_voided = Counter(
            "fairdeck_codeal_voided",
            "Co-dealt hands voided past their lifetime (hand), pooled decks retired unused (pooled), "
            "closed hands whose entries the log had refused, logged (logged)",
            ["kind"],
            registry=r,
        )
        self.codealer_expired_hands = Gauge(
            "fairdeck_codealer_expired_hands",
            "Hands the co-dealer ended at its own --max-hand-lifetime since it started (hands this "
            "dealer opened and never closed), as the co-dealer says every identity check",
            registry=r,
        )
        self.codeal_void_skipped = Counter(
            "fairdeck_codeal_void_skipped_hands",
            "Co-dealt hands past their lifetime that could not be voided (refused, not verifying), by reason",
            ["reason"],
            registry=r,
        )
        self.reaper_skipped = Counter(
            "fairdeck_reaper_skipped_hands",
            "Stale hands the reaper could not void and skipped (once per hand and process), by reason",
            ["reason"],
            registry=r,
        )
        self.unreadable_rows = Counter(
            "fairdeck_unreadable_rows",
            "Stored rows (hands) an operation could not read, damaged: the operation failed alone",
            ["operation"],
            registry=r,
        )
        self.clock_steps = Counter(
            "fairdeck_clock_steps",
            "Wall-clock steps beyond the tolerance, by direction; log times keep to the monotonic clock",
            ["direction"],
            registry=r,
        )
        self.clock_offset = Gauge(
            "fairdeck_clock_offset_seconds",
            "The wall clock minus the dealer's log clock (0 until the wall clock steps)",
            registry=r,
        )
        for direction in ("forward", "back"):
            self.clock_steps.labels(direction)
        for outcome in OUTCOMES.values():
            self.hands_closed.labels(outcome)
        for probe_outcome in ("ok", "failed"):
            self.storage_probes.labels(probe_outcome)
        self.reaper_skipped.labels(Reason.SEED_UNAVAILABLE)
        self.reaper_skipped.labels(Reason.HAND_UNREADABLE)
        for reason in (
            Reason.RATE_LIMITED,
            Reason.TOO_MANY_OPEN_HANDS,
            Reason.TOO_MANY_CALLS,
            Reason.TOO_MANY_STREAMS,
        ):
            self.refusals.labels(reason)
        self.gauges = StorageGauges()
        r.register(self.gauges)

    def started_rpc(self, method: str) -> None:
        service, _, name = method.lstrip("/").partition("/")
        self.rpcs_started.labels(service, name).inc()

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        service, _, name = method.lstrip("/").partition("/")
        self.rpcs.labels(service, name, code).inc()
        self.rpc_seconds.labels(service, name).observe(seconds)

    def refused(self, tenant: str, reason: str) -> None:
        self.refusals.labels(reason).inc()

    def paced_call(self, wait: float) -> None:
        self.paced.inc()
        self.paced_seconds.inc(wait)

    def cut_connections(self, peer: str, count: int) -> None:
        self.connections_cut.inc(count)  # the peer is not a label: it would grow without bound

    def storage_health(self, healthy: bool) -> None:
        self.storage_healthy.set(1 if healthy else 0)

    def probed(self, ok: bool) -> None:
        self.storage_probes.labels("ok" if ok else "failed").inc()


def build_info() -> dict[str, str]:
    """fairdeck_build_info's labels: the package's version, the deal algorithm, Python and grpcio
    (read from the installed distributions, so that this needs no grpc import)."""

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "unknown"

    return {
        "version": installed("fairdeck"),
        "algorithm": CURRENT_VERSION,
        "python": platform.python_version(),
        "grpcio": installed("grpcio"),
    }


class StorageGauges(Collector):
    """Gauges read from storage when scraped (at most every GAUGE_MAX_AGE seconds).

    A scrape is served on the metrics server's thread; the reads run on the
    dealer's event loop. ``checkpoint_age`` counts from when this process saw
    the signed head move (or, for a head older than the process, from the
    first scrape): alert on it only while the log is ahead of the checkpoint.
    """

    def __init__(self) -> None:
        self._storage: Storage | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._failures = Repeats(log)
        self._values: dict[str, float] = {}
        self._head: tuple[int, float] | None = None  # (checkpoint size, when first seen)
        self._writer: WriterStats | None = None  # read without a lock: counts, at worst a batch behind

    def attach(self, storage: Storage, loop: asyncio.AbstractEventLoop) -> None:
        self._storage, self._loop = storage, loop
        self._writer = storage.stats

    def detach(self) -> None:
        self._storage = self._loop = None

    async def read(self) -> dict[str, float]:
        """Read the gauges from storage now (on the dealer's loop)."""
        storage = self._storage
        if storage is None:
            return {}
        open_hands = await storage.open_hands(None)
        log_size = await storage.log_size()
        head = await storage.checkpoint()
        now = time.time()
        size = head.size if head is not None else 0
        if self._head is None or self._head[0] != size:
            self._head = (size, now)
        return {
            "open_hands": open_hands,
            "log_size": log_size,
            "checkpoint_size": size,
            "checkpoint_age": now - self._head[1],
        }

    def _refresh(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed() or time.monotonic() - self._read_at < GAUGE_MAX_AGE:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return  # scraped on the loop itself (a test): cannot wait for it; keep the last values
        try:
            self._values = asyncio.run_coroutine_threadsafe(self.read(), loop).result(timeout=5)
            self._read_at = time.monotonic()
        except Exception as e:  # storage down: serve the last values; storage_errors tells why
            self._failures.log(logging.WARNING, f"reading gauges from storage failed: {cause(e)}")

    def collect(self) -> list[Metric]:
        with self._lock:
            self._refresh()
            values = dict(self._values)
        out: list[Metric] = []
        for name, doc in (
            ("open_hands", "Hands not closed, all tenants (from storage)"),
            ("log_size", "Entries in the transparency log"),
            ("checkpoint_size", "Tree size of the newest signed checkpoint"),
            ("checkpoint_age", "Seconds since the newest signed checkpoint was first seen"),
        ):
            full = f"fairdeck_{name}_seconds" if name == "checkpoint_age" else f"fairdeck_{name}"
            gauge = GaugeMetricFamily(full, doc)
            if name in values:
                gauge.add_metric([], values[name])
            out.append(gauge)
        writer = self._writer
        for attribute, name, doc in WRITER_COUNTERS if writer is not None else ():
            value = getattr(writer, attribute)
            if value is not None:  # None: this engine does not measure it
                out.append(CounterMetricFamily(name, doc, value=value))
        return out

    def describe(self) -> list[Metric]:
        return []


class MeteredStorage(Storage):
    """A Storage that counts hands opened and closed and the storage's own
    failures, then passes everything through unchanged. Hands are counted
    from what storage returns after it is durable, so an idempotent retry
    (the stored hand returned again) or a rolled-back close counts nothing.
    With ``health``, it also reports storage faults and successful writes. Every method of Storage
    is here, each a call of the engine's, so a method new to Storage fails here until it is added
    (tests/test_storage_layout.py)."""

    def __init__(self, inner: Storage, metrics: Metrics, health: StorageHealth | None = None) -> None:
        self._inner = inner
        self._metrics = metrics
        self._health = health
        self._unreadable: set[str] = set()
        """Messages of damaged rows already logged: each is logged once per process."""

    async def _counted(
        self, operation: str, call: Awaitable[T], decided: list[BaseException] | None = None
    ) -> T:
        try:
            result = await call
        except Exception as e:
            if decided is None or not any(e is d for d in decided):
                self._count_error(operation, e)
            raise
        if self._health is not None and operation in WRITES:
            self._health.wrote()
        return result

    def _count_error(self, operation: str, e: Exception) -> None:
        if isinstance(e, refusals.DealerError) and e.reason == Reason.HAND_UNREADABLE:
            # One damaged row: the operation on it failed alone, storage still works.
            self._metrics.unreadable_rows.labels(operation).inc()
            if str(e) not in self._unreadable:
                self._unreadable.add(str(e))
                log.error("%s (in %s); the other hands are served", e, operation)
            return
        if isinstance(e, refusals.DealerError):
            fault = e.status in STORAGE_FAULTS
        else:  # a bad argument or an attempted fork is not the storage failing
            fault = not isinstance(e, ValueError | LookupError | LogForkError)
        if fault:
            self._metrics.storage_errors.labels(operation).inc()
            if self._health is not None:
                self._health.failed()

    async def create_hands(self, hands: Sequence[NewHand]) -> list[Created]:
        created = await self._counted("create_hands", self._inner.create_hands(hands))
        for c in created:
            if not c.found:  # an idempotent retry's stored hand was counted when it was stored
                self._metrics.hands_opened.inc()
                if c.record.state is StoredHandState.CLOSED:
                    self._metrics.hands_closed.labels(OUTCOMES[logentry.CLOSED]).inc()
        return created

    async def create_batch(self, batch: HandBatch) -> int:
        first = await self._counted("create_batch", self._inner.create_batch(batch))
        self._metrics.hands_opened.inc(len(batch))
        if batch.closed:
            self._metrics.hands_closed.labels(OUTCOMES[logentry.CLOSED]).inc(len(batch))
        return first

    async def update_hand(
        self, tenant: str, hand_id: str, decide: Callable[[HandRecord], tuple[Change, T]]
    ) -> tuple[HandRecord, T]:
        seen: list[tuple[HandRecord, Change]] = []
        decided: list[BaseException] = []

        def watched(record: HandRecord) -> tuple[Change, T]:
            try:
                change, result = decide(record)
            except BaseException as e:  # the dealer's refusal, not a storage failure
                decided.append(e)
                raise
            seen.append((record, change))  # the last one is what was stored (engines may retry)
            return change, result

        out = await self._counted("update_hand", self._inner.update_hand(tenant, hand_id, watched), decided)
        if seen:
            before, change = seen[-1]
            if before.state is not StoredHandState.CLOSED and change.record.state is StoredHandState.CLOSED:
                self._metrics.hands_closed.labels(
                    OUTCOMES.get(change.outcome or logentry.CLOSED, "closed")
                ).inc()
        return out

    async def update_hands(
        self, tenant: str, hand_ids: Sequence[str], decide: Callable[[HandRecord], tuple[Change, Any]]
    ) -> list[HandRecord | refusals.DealerError]:
        """As ``update_hand``, per hand: a hand's damaged row is counted as its ``update_hand``."""
        seen: dict[str, tuple[HandRecord, Change]] = {}
        decided: list[BaseException] = []

        def watched(record: HandRecord) -> tuple[Change, Any]:
            try:
                change, result = decide(record)
            except BaseException as e:
                decided.append(e)
                raise
            seen[record.hand_id] = (record, change)
            return change, result

        out = await self._counted("update_hands", self._inner.update_hands(tenant, hand_ids, watched))
        for outcome in out:
            if isinstance(outcome, refusals.DealerError):
                if not any(outcome is d for d in decided):
                    self._count_error("update_hand", outcome)
                continue
            before, change = seen.get(outcome.hand_id, (outcome, Change(outcome)))
            if before.state is not StoredHandState.CLOSED and change.record.state is StoredHandState.CLOSED:
                outcome_name = OUTCOMES.get(change.outcome or logentry.CLOSED, "closed")
                self._metrics.hands_closed.labels(outcome_name).inc()
        return out

    # -- the rest of Storage: counted (failures, and writes for health), otherwise as they are ----

    @property
    def stats(self) -> WriterStats:
        return self._inner.stats

    async def start(self) -> None:
        await self._counted("start", self._inner.start())

    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        return await self._counted("get_hand", self._inner.get_hand(tenant, hand_id))

    async def stale_hands(self, created_before_ms: int, limit: int) -> list[tuple[str, str, int]]:
        return await self._counted("stale_hands", self._inner.stale_hands(created_before_ms, limit))

    async def log_size(self) -> int:
        return await self._counted("log_size", self._inner.log_size())

    async def log_entries(self, start: int, end: int) -> list[bytes]:
        return await self._counted("log_entries", self._inner.log_entries(start, end))

    async def log_head(self) -> tuple[int, bytes]:
        return await self._counted("log_head", self._inner.log_head())

    async def checkpoint(self, size: int | None = None) -> StoredCheckpoint | None:
        return await self._counted("checkpoint", self._inner.checkpoint(size))

    async def put_checkpoint(self, size: int, root: bytes, note: bytes, time_ms: int) -> StoredCheckpoint:
        return await self._counted("put_checkpoint", self._inner.put_checkpoint(size, root, note, time_ms))

    async def add_cosignatures(self, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
        return await self._counted("add_cosignatures", self._inner.add_cosignatures(size, lines))

    async def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        return await self._counted("inclusion_proof", self._inner.inclusion_proof(index, size))

    async def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        return await self._counted("consistency_proof", self._inner.consistency_proof(size1, size2))

    async def entry_index(self, hand_id: str, reveal: bool) -> int | None:
        return await self._counted("entry_index", self._inner.entry_index(hand_id, reveal))

    async def open_hands(self, tenant: str | None = None) -> int:
        return await self._counted("open_hands", self._inner.open_hands(tenant))

    async def put_token(self, token: TokenRecord) -> None:
        await self._counted("put_token", self._inner.put_token(token))

    async def get_token(self, token_id: str) -> TokenRecord | None:
        return await self._counted("get_token", self._inner.get_token(token_id))

    async def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        return await self._counted("list_tokens", self._inner.list_tokens(tenant))

    async def revoke_token(self, token_id: str, when_ms: int) -> TokenRecord | None:
        return await self._counted("revoke_token", self._inner.revoke_token(token_id, when_ms))

    async def get_meta(self, name: str) -> str | None:
        return await self._counted("get_meta", self._inner.get_meta(name))

    async def set_meta(self, name: str, expected: str | None, value: str) -> bool:
        return await self._counted("set_meta", self._inner.set_meta(name, expected, value))

    async def sealed_seed_samples(self) -> list[tuple[str, bytes]]:
        return await self._counted("sealed_seed_samples", self._inner.sealed_seed_samples())

    async def probe(self) -> None:
        await self._counted("probe", self._inner.probe())

    async def close(self) -> None:
        await self._counted("close", self._inner.close())

    def diagnose(self) -> str | None:
        return self._inner.diagnose()

    def serving(self) -> None:
        self._inner.serving()

    def lock_held_for(self) -> float:
        return self._inner.lock_held_for()


class MetricsEndpoint:
    """The HTTP /metrics endpoint on ``host:port`` (port 0 picks one), in a thread."""

    def __init__(self, listen: str, registry: CollectorRegistry) -> None:
        host, port = split_host_port(listen)
        self.server, self.thread = start_http_server(port, host, registry)
        self.port: int = self.server.server_port

    async def close(self) -> None:
        await asyncio.to_thread(self.server.shutdown)
        self.server.server_close()
