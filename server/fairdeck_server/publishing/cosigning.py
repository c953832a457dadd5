"""The dealer's side of witnessing (``WitnessPublisher``): ask each witness to cosign the latest
checkpoint, and keep the cosignatures with it.

Rounds run in the background: each sends the latest checkpoint to every witness that has not
cosigned it and whose turn it is (its own cadence, one a second by default; longer after a
failure, at least ``Retry-After`` after a 429 or 503), with the consistency proof from the size it
last cosigned (tlog-witness, "add-checkpoint"). Each cosignature that verifies is added to the
stored checkpoint. Only the log's leader asks (log_lease.py); replicas share the final size.
Dealing never waits: the HTTP calls run in threads, one keep-alive connection per witness. A
cosignature's timestamp far from the dealer's clock is warned of once (``clock.WITNESS_SKEW_S``).
The design: docs/witness.md ("The dealer with witnesses"); clocks: docs/operations.md.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import http.client
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from fairdeck.log.cosignature import CosignatureError, CosignatureVerifier, WitnessPolicy, parse_line
from fairdeck.log.note import Verifier, open_note
from fairdeck_server.dealing.clock import WITNESS_SKEW_S
from fairdeck_server.log_causes import Repeats, cause
from fairdeck_server.storage.base import Storage, StoredCheckpoint

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 3.0
MAX_BACKOFF_S = 30.0
DEFAULT_CADENCE_S = 1.0
"""At most one add-checkpoint a second per witness: the public witness network's budget for a log."""
MAX_RETRY_AFTER_S = 300.0
"""A witness's Retry-After is honoured up to this; a longer one is treated as this long."""
FINAL_META = "witnessed_size"
"""fairdeck_meta row: the size of the latest final checkpoint, for replicas that do not lead."""
MAX_ANSWER_BYTES = 64 * 1024


@dataclass
class WitnessTarget:
    """One witness the dealer asks: its URL prefix, its key, and what the dealer knows of it."""

    url: str
    verifier: CosignatureVerifier
    size: int | None = None
    """The size this witness last cosigned, as far as the dealer knows; None: not asked yet."""
    failures: int = 0
    next_at: float = 0.0
    """monotonic time of this witness's next turn (its cadence, a backoff, a Retry-After)."""
    down: bool = field(default=False)
    skewed: bool = False
    """Whether its clock was last seen further than WITNESS_SKEW_S from the dealer's (warned once)."""
    connection: http.client.HTTPConnection | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.verifier.name

    @classmethod
    def parse(cls, spec: str) -> WitnessTarget:
        """``URL=VKEY`` (config.py checked the form already)."""
        url, _, vkey = spec.rpartition("=")
        return cls(url.rstrip("/"), CosignatureVerifier.parse(vkey))


class WitnessFailure(Exception):
    """A witness did not cosign: unreachable, an error status, or an answer that does not verify.
    ``retry_after``: seconds the witness asked to be left alone (429 or 503)."""

    def __init__(self, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class WitnessPublisher:
    """Gets the latest checkpoint cosigned by each witness, in the background."""

    def __init__(
        self,
        storage: Storage,
        log_verifier: Verifier,
        specs: tuple[str, ...],
        threshold: int,
        registry: CollectorRegistry,
        *,
        interval: float,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        cadence: float = DEFAULT_CADENCE_S,
        leads: Callable[[], bool] = lambda: True,
        on_final: Callable[[bytes], Awaitable[None]] | None = None,
        shared: bool = False,
    ) -> None:
        """``leads``: whether this process asks the witnesses now (log_lease.py). ``on_final``: told
        each new final checkpoint's note (the tiles' checkpoint file). ``shared``: other replicas
        serve this log and learn the final size from storage."""
        self.storage = storage
        self.clock_ms = clock_ms
        """The dealer's clock (clock.DealerClock.now_ms), held against the witnesses' timestamps."""
        self.cadence = cadence
        self.leads = leads
        self.on_final = on_final
        self.shared = shared
        self._failures = Repeats(log)
        self.log_verifier = log_verifier
        self.targets = [WitnessTarget.parse(spec) for spec in specs]
        self.policy = (
            WitnessPolicy({t.name: t.verifier for t in self.targets}, threshold or len(self.targets))
            if self.targets
            else None
        )
        self.interval = interval
        self.final: StoredCheckpoint | None = None
        """The largest checkpoint known to be cosigned by the threshold of witnesses."""
        self._task: asyncio.Task[None] | None = None
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.targets)), thread_name_prefix="witness")
        self.cosigned_size = Gauge(
            "fairdeck_witness_cosigned_size",
            "Tree size of the latest checkpoint the witness cosigned",
            ["witness"],
            registry=registry,
        )
        self.cosigned_time = Gauge(
            "fairdeck_witness_cosigned_timestamp_seconds",
            "When the witness made its latest cosignature (its own timestamp)",
            ["witness"],
            registry=registry,
        )
        self.failures = Counter(
            "fairdeck_witness_failures",
            "Requests to the witness that did not end in a valid cosignature",
            ["witness"],
            registry=registry,
        )
        self.skew = Gauge(
            "fairdeck_witness_clock_skew_seconds",
            "The witness's cosignature timestamp minus the dealer's clock when the answer came",
            ["witness"],
            registry=registry,
        )
        self.final_size = Gauge(
            "fairdeck_checkpoint_final_size",
            "Tree size of the largest checkpoint cosigned by the witness threshold (final)",
            registry=registry,
        )
        self.requests = Counter(
            "fairdeck_witness_requests",
            "add-checkpoint requests sent to the witness (each answer counts, a 409 too)",
            ["witness"],
            registry=registry,
        )
        for target in self.targets:
            self.failures.labels(target.name)
            self.requests.labels(target.name)

    def start(self) -> None:
        if self.targets:
            self._task = asyncio.create_task(self._run(), name="fairdeck-witnessing")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._pool.shutdown(wait=False, cancel_futures=True)
        for target in self.targets:
            if target.connection is not None:
                target.connection.close()

    async def _run(self) -> None:
        while True:
            try:
                await self.round()
            except Exception as e:  # storage may come back; the next round tries again
                self._failures.log(logging.ERROR, f"witnessing round failed: {cause(e)}")
            await asyncio.sleep(self.interval)

    async def round(self) -> StoredCheckpoint | None:
        """Ask every witness whose turn it is to cosign the latest checkpoint; store what comes back.
        A process that does not lead only learns which checkpoint is final."""
        if not self.leads():
            return await self._follow()
        head = await self.storage.checkpoint()
        if head is None:
            return None
        await self._is_final(head)
        now = time.monotonic()
        due = [t for t in self.targets if t.size != head.size and t.next_at <= now]
        if not due:
            return head
        text = open_note(head.note, self.log_verifier).text
        answers = await asyncio.gather(*(self._ask(t, head, text) for t in due))
        lines = [line for line in answers if line is not None]
        if lines:
            stored = await self.storage.add_cosignatures(head.size, lines)
            if stored is not None:
                await self._is_final(stored)
            return stored
        return head

    async def _follow(self) -> StoredCheckpoint | None:
        """The leader's final checkpoint, from the size it recorded in storage."""
        if not self.shared or self.policy is None:
            return None
        text = await self.storage.get_meta(FINAL_META)
        if text is None or not text.isdigit():
            return None
        checkpoint = await self.storage.checkpoint(int(text))
        if checkpoint is not None:
            await self._is_final(checkpoint)
        return checkpoint

    async def _is_final(self, checkpoint: StoredCheckpoint) -> bool:
        """Whether the policy's threshold cosigned it; the largest such one becomes ``final``."""
        if self.policy is None:
            return False
        try:
            ok = self.policy.check(checkpoint.note).ok
        except CosignatureError:
            return False
        if not ok or (self.final is not None and checkpoint.size < self.final.size):
            return ok
        changed = self.final is None or self.final.note != checkpoint.note
        self.final = checkpoint
        self.final_size.set(checkpoint.size)
        if changed and self.leads():
            if self.on_final is not None:
                await self.on_final(checkpoint.note)
            if self.shared:
                await self._record_final(checkpoint.size)
        return ok

    async def _record_final(self, size: int) -> None:
        recorded = await self.storage.get_meta(FINAL_META)
        if recorded is None or not recorded.isdigit() or int(recorded) < size:
            await self.storage.set_meta(FINAL_META, recorded, str(size))

    async def _ask(self, target: WitnessTarget, head: StoredCheckpoint, text: str) -> str | None:
        """One add-checkpoint request to ``target`` (its turn); its cosignature line, or None. The
        next turn counts from the answer, not from the start: a request slow to arrive (its
        proof, a connect) would otherwise leave the witness less than an interval before the next."""
        target.next_at = time.monotonic() + self.cadence  # no second turn while this one runs
        try:
            line = await self._cosign(target, head, text)
            target.next_at = time.monotonic() + self.cadence
        except WitnessFailure as e:
            target.failures += 1
            pause = max(self.cadence, min(MAX_BACKOFF_S, 0.25 * 2**target.failures), e.retry_after)
            target.next_at = time.monotonic() + pause
            self.failures.labels(target.name).inc()
            if not target.down:
                target.down = True
                log.warning("witness %s did not cosign checkpoint %d: %s", target.name, head.size, e)
            return None
        if line is None:
            return None
        if target.down:
            log.info("witness %s cosigns again (checkpoint %d)", target.name, head.size)
        target.failures, target.down = 0, False
        return line

    async def _cosign(self, target: WitnessTarget, head: StoredCheckpoint, text: str) -> str | None:
        """The request and its answer; None after a 409 (the witness's size, used at its next turn)."""
        old = 0 if target.size is None else target.size
        if old > head.size:
            raise WitnessFailure(
                f"the witness cosigned size {old}, beyond this log's head {head.size}: "
                "was the log restored from an old backup?"
            )
        proof = [] if old in (0, head.size) else await self.storage.consistency_proof(old, head.size)
        body = (
            f"old {old}\n".encode() + b"".join(base64.b64encode(h) + b"\n" for h in proof) + b"\n" + head.note
        )
        loop = asyncio.get_running_loop()
        self.requests.labels(target.name).inc()
        status, answer, retry_after = await loop.run_in_executor(self._pool, _post, target, body)
        if status == 409:
            try:
                target.size = int(answer.decode("ascii").strip())
            except ValueError:
                raise WitnessFailure("409 without a tree size") from None
            return None
        if status in (429, 503):
            raise WitnessFailure(f"HTTP {status}: the witness asks to wait {retry_after:g} s", retry_after)
        if status != 200:
            raise WitnessFailure(f"HTTP {status}: {answer[:200].decode('utf-8', 'replace').strip()}")
        line = _our_line(answer, target.verifier, text)
        target.size = head.size
        cosig = parse_line(line, target.verifier)
        self.cosigned_size.labels(target.name).set(head.size)
        self.cosigned_time.labels(target.name).set(cosig.timestamp)
        self._held_against(target, cosig.timestamp)
        return line

    def _held_against(self, target: WitnessTarget, timestamp: int) -> None:
        """Compare the witness's timestamp with the dealer's clock; warn once per episode of skew."""
        skew = timestamp - self.clock_ms() / 1000
        self.skew.labels(target.name).set(skew)
        if abs(skew) <= WITNESS_SKEW_S:
            if target.skewed:
                log.info("witness %s and the dealer's clock agree again (%+.1f s)", target.name, skew)
            target.skewed = False
            return
        if not target.skewed:
            log.warning(
                "witness %s cosigned at a time %+.0f s from the dealer's clock: one of the two clocks "
                'is wrong; check NTP on both (docs/operations.md, "The dealer\'s clock")',
                target.name,
                skew,
            )
        target.skewed = True


def _our_line(answer: bytes, verifier: CosignatureVerifier, text: str) -> str:
    """The answer's cosignature line by ``verifier`` that verifies over ``text``."""
    try:
        lines = answer.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise WitnessFailure("the answer is not UTF-8") from None
    for line in lines:
        try:
            cosig = parse_line(line, verifier)
        except CosignatureError:
            continue  # another key's line: ignored, as tlog-witness asks
        if verifier.verify(text, cosig.timestamp, cosig.signature):
            return line + "\n"
        raise WitnessFailure("the witness's cosignature does not verify under its key")
    raise WitnessFailure("the answer holds no cosignature by the witness's key")


def retry_after_seconds(value: str | None, now: float | None = None) -> float:
    """An HTTP Retry-After (RFC 9110 section 10.2.3: delay-seconds or an HTTP-date) in seconds,
    at most MAX_RETRY_AFTER_S; 0 when absent or unreadable."""
    if not value:
        return 0.0
    value = value.strip()
    if value.isascii() and value.isdigit():  # str.isdigit() takes "²", which int() refuses
        return float(min(int(value), MAX_RETRY_AFTER_S))
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return 0.0
    return min(max(0.0, when - (time.time() if now is None else now)), MAX_RETRY_AFTER_S)


def _post(target: WitnessTarget, body: bytes) -> tuple[int, bytes, float]:
    """POST ``body`` to the witness's add-checkpoint; (status, answer, Retry-After seconds).
    One keep-alive connection per witness (tlog-witness: clients SHOULD use keep-alive), made
    again once if the witness closed it while idle. WitnessFailure when unreachable."""
    parts = urllib.parse.urlsplit(target.url)
    path = parts.path.rstrip("/") + "/add-checkpoint"
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    for attempt in (0, 1):
        reused = target.connection is not None
        if target.connection is None:
            conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            target.connection = conn_type(parts.netloc, timeout=REQUEST_TIMEOUT_S)
        conn = target.connection
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            answer = response.read(MAX_ANSWER_BYTES)
            if response.will_close or response.length:  # not all read, or the witness closes it
                conn.close()
                target.connection = None
            return response.status, answer, retry_after_seconds(response.getheader("Retry-After"))
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
            conn.close()
            target.connection = None
            if reused and attempt == 0:
                continue  # the witness closed the idle connection before reading this request
            raise WitnessFailure(f"{type(e).__name__}: {e}") from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            target.connection = None
            raise WitnessFailure(f"{type(e).__name__}: {e}") from None
    raise AssertionError("unreachable")
