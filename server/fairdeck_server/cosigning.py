"""The dealer's side of witnessing (``WitnessPublisher``): ask each witness to cosign the latest
checkpoint, and keep the cosignatures with it.

Rounds run in the background, one after another, each sending one checkpoint to every witness
that has not cosigned it, with the consistency proof from the size that witness last cosigned;
each cosignature that verifies is added to the stored checkpoint. Dealing never waits: the HTTP
calls run in threads with a timeout, and a failing witness backs off (at most ``MAX_BACKOFF_S``).
A cosignature's timestamp far from the dealer's clock is warned of once (``clock.WITNESS_SKEW_S``).
The design: docs/witness.md ("The dealer with witnesses"); clocks: docs/operations.md.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import logging
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from fairdeck.log.cosignature import CosignatureError, CosignatureVerifier, WitnessPolicy, parse_line
from fairdeck.log.note import Verifier, open_note
from fairdeck_server.clock import WITNESS_SKEW_S
from fairdeck_server.storage.base import Storage, StoredCheckpoint

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 3.0
MAX_BACKOFF_S = 30.0
MAX_ANSWER_BYTES = 64 * 1024


@dataclass
class WitnessTarget:
    """One witness the dealer asks: its URL prefix, its key, and what the dealer knows of it."""

    url: str
    verifier: CosignatureVerifier
    size: int | None = None
    """The size this witness last cosigned, as far as the dealer knows; None: not asked yet."""
    failures: int = 0
    retry_at: float = 0.0
    down: bool = field(default=False)
    skewed: bool = False
    """Whether its clock was last seen further than WITNESS_SKEW_S from the dealer's (warned once)."""

    @property
    def name(self) -> str:
        return self.verifier.name

    @classmethod
    def parse(cls, spec: str) -> WitnessTarget:
        """``URL=VKEY`` (config.py checked the form already)."""
        url, _, vkey = spec.rpartition("=")
        return cls(url.rstrip("/"), CosignatureVerifier.parse(vkey))


class WitnessFailure(Exception):
    """A witness did not cosign: unreachable, an error status, or an answer that does not verify."""


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
    ) -> None:
        self.storage = storage
        self.clock_ms = clock_ms
        """The dealer's clock (clock.DealerClock.now_ms), held against the witnesses' timestamps."""
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
        for target in self.targets:
            self.failures.labels(target.name)

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

    async def _run(self) -> None:
        while True:
            try:
                await self.round()
            except Exception as e:  # storage may come back; the next round tries again
                log.error("witnessing round failed: %s", type(e).__name__)
            await asyncio.sleep(self.interval)

    async def round(self) -> StoredCheckpoint | None:
        """Ask every due witness to cosign the latest checkpoint; store what comes back."""
        head = await self.storage.checkpoint()
        if head is None:
            return None
        self._is_final(head)
        now = time.monotonic()
        due = [t for t in self.targets if t.size != head.size and t.retry_at <= now]
        if not due:
            return head
        text = open_note(head.note, self.log_verifier).text
        answers = await asyncio.gather(*(self._ask(t, head, text) for t in due))
        lines = [line for line in answers if line is not None]
        if lines:
            stored = await self.storage.add_cosignatures(head.size, lines)
            if stored is not None:
                self._is_final(stored)
            return stored
        return head

    def _is_final(self, checkpoint: StoredCheckpoint) -> bool:
        """Whether the policy's threshold cosigned it; the largest such one becomes ``final``."""
        if self.policy is None:
            return False
        try:
            ok = self.policy.check(checkpoint.note).ok
        except CosignatureError:
            return False
        if ok and (self.final is None or checkpoint.size >= self.final.size):
            self.final = checkpoint
            self.final_size.set(checkpoint.size)
        return ok

    async def _ask(self, target: WitnessTarget, head: StoredCheckpoint, text: str) -> str | None:
        try:
            line = await self._cosign(target, head, text)
        except WitnessFailure as e:
            target.failures += 1
            target.retry_at = time.monotonic() + min(MAX_BACKOFF_S, 0.25 * 2**target.failures)
            self.failures.labels(target.name).inc()
            if not target.down:
                target.down = True
                log.warning("witness %s did not cosign checkpoint %d: %s", target.name, head.size, e)
            return None
        if target.down:
            log.info("witness %s cosigns again (checkpoint %d)", target.name, head.size)
        target.failures, target.retry_at, target.down = 0, 0.0, False
        return line

    async def _cosign(self, target: WitnessTarget, head: StoredCheckpoint, text: str) -> str:
        for _ in range(2):  # a 409 tells the witness's size: one more request from there
            old = 0 if target.size is None else target.size
            if old > head.size:
                raise WitnessFailure(
                    f"the witness cosigned size {old}, beyond this log's head {head.size}: "
                    "was the log restored from an old backup?"
                )
            proof = [] if old in (0, head.size) else await self.storage.consistency_proof(old, head.size)
            body = (
                f"old {old}\n".encode()
                + b"".join(base64.b64encode(h) + b"\n" for h in proof)
                + b"\n"
                + head.note
            )
            loop = asyncio.get_running_loop()
            status, answer = await loop.run_in_executor(self._pool, _post, target.url, body)
            if status == 409:
                try:
                    target.size = int(answer.decode("ascii").strip())
                except ValueError:
                    raise WitnessFailure("409 without a tree size") from None
                continue
            if status != 200:
                raise WitnessFailure(f"HTTP {status}: {answer[:200].decode('utf-8', 'replace').strip()}")
            line = _our_line(answer, target.verifier, text)
            target.size = head.size
            cosig = parse_line(line, target.verifier)
            self.cosigned_size.labels(target.name).set(head.size)
            self.cosigned_time.labels(target.name).set(cosig.timestamp)
            self._held_against(target, cosig.timestamp)
            return line
        raise WitnessFailure("the witness's size kept changing (another log writer?)")

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


def _post(url: str, body: bytes) -> tuple[int, bytes]:
    """POST ``body`` to ``url``/add-checkpoint; (status, answer). WitnessFailure when unreachable."""
    parts = urllib.parse.urlsplit(url)
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(parts.netloc, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request(
            "POST",
            parts.path.rstrip("/") + "/add-checkpoint",
            body=body,
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )
        response = conn.getresponse()
        return response.status, response.read(MAX_ANSWER_BYTES)
    except (OSError, http.client.HTTPException) as e:
        raise WitnessFailure(f"{type(e).__name__}: {e}") from None
    finally:
        conn.close()
