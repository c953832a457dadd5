"""The log's signing side: the Ed25519 key and the checkpoint publisher.

The key (a C2SP signed-note signer key, ``PRIVATE+KEY+origin+hash+base64``)
is created on first start in the data dir with mode 0600, or supplied by the
operator. Its name is the log's origin line. The publisher signs a checkpoint
whenever the log has grown, at most every ``interval`` seconds, and on
demand; storage's compare-and-swap keeps one root per size across restarts
and writers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from pathlib import Path

from fairdeck.checkpoint import Checkpoint as CheckpointBody
from fairdeck.checkpoint import sign_checkpoint
from fairdeck.note import Signer
from fairdeck_server.storage.base import Checkpoint, Storage

log = logging.getLogger(__name__)
DEFAULT_INTERVAL = 0.2


class LogKeyError(Exception):
    """A log key file that cannot be used."""


def load_or_create_signer(path: Path, origin: str | None = None) -> Signer:
    """The log signer from ``path``, created (0600) with ``origin`` as its name if missing."""
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise LogKeyError(f"log key file {path} is readable by others (mode {mode:o}); chmod 600 it")
        signer = Signer.parse(path.read_text().strip())
        if origin is not None and signer.name != origin:
            raise LogKeyError(f"log key file {path} is for origin {signer.name!r}, not {origin!r}")
        return signer
    signer = Signer.generate(origin or f"fairdeck.log/{secrets.token_hex(6)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(signer.to_string() + "\n")
        f.flush()
        os.fsync(f.fileno())
    return signer


class CheckpointPublisher:
    """Signs checkpoints of a Storage's log as it grows."""

    def __init__(self, storage: Storage, signer: Signer, *, interval: float = DEFAULT_INTERVAL) -> None:
        self.storage = storage
        self.signer = signer
        self.interval = interval
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    @property
    def origin(self) -> str:
        return self.signer.name

    async def publish(self) -> Checkpoint | None:
        """Sign the current tree if it is larger than the head; return the head."""
        async with self._lock:
            head = await self.storage.checkpoint()
            size, root = await self.storage.log_head()
            if head is not None and head.size >= size:
                return head
            if size == 0:
                return head
            note = sign_checkpoint(CheckpointBody(self.origin, size, root), self.signer)
            return await self.storage.put_checkpoint(size, root, note, time.time_ns() // 1_000_000)

    async def covering(self, index: int) -> Checkpoint:
        """A checkpoint whose tree includes entry ``index`` (signing one if needed)."""
        head = await self.storage.checkpoint()
        if head is None or head.size <= index:
            head = await self.publish()
        if head is None or head.size <= index:
            raise LookupError(f"log entry {index} does not exist")
        return head

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="fairdeck-checkpoints")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.publish()  # the last entries get a signed checkpoint before exit

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.publish()
            except Exception as e:  # keep publishing; storage may come back
                log.error("checkpoint publishing failed: %s", type(e).__name__)
