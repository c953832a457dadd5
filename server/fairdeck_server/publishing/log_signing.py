"""The log's signing side: the Ed25519 key (``LogKeys``) and the ``CheckpointPublisher``.

The key is a C2SP signed-note signer key named for the log's origin, made 0600 only by ``fairdeck
init`` or a fresh data dir's first start (startup.py), never because a file went missing; after a
rotation its file also lists the retired verifier keys and the rotation statements each old key
signed to name its successor (``load_log_keys``; fairdeck.log.rotation). The publisher signs a
checkpoint whenever the log has grown, at most every ``interval`` seconds, and on demand;
storage's compare-and-swap keeps one root per size. docs/log-format.md ("Signed checkpoints").
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.note import NoteError, Signer, Verifier, is_valid_key_name
from fairdeck.log.rotation import RotationError, open_rotation, sign_rotation
from fairdeck.log.tiles import TileError
from fairdeck_server import refusals
from fairdeck_server.dealing.vault import read_private_text, write_private_file
from fairdeck_server.log_causes import Repeats, cause
from fairdeck_server.publishing.log_lease import Lease
from fairdeck_server.publishing.tile_publishing import LiveTiles
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.storage.base import Storage, StoredCheckpoint

log = logging.getLogger(__name__)
DEFAULT_INTERVAL = 0.2
RANDOM_ORIGIN = "fairdeck.log/"
"""The prefix of the origin a log gets when none is given (then a random suffix)."""
FOLLOW_WAIT_S = 5.0
"""How long a process that does not lead waits for the leader's checkpoint of a new entry."""


class LogKeyError(StartupRefused):
    """A log key file that cannot be used."""


@dataclass(frozen=True)
class LogKeys:
    """The key that signs new checkpoints, and the verifier keys of keys it replaced."""

    signer: Signer = field(repr=False)
    retired: tuple[Verifier, ...] = ()
    rotations: tuple[bytes, ...] = ()
    """Rotation statements (signed notes), newest first: each retired key naming its successor."""

    @property
    def verifiers(self) -> list[Verifier]:
        """Every verifier key, the current one first: what an auditor of the whole history needs."""
        return [self.signer.verifier, *self.retired]

    def to_text(self) -> str:
        """The key file: the signer key, then one retired verifier key per line, then one rotation
        statement per line (``rotation`` and the note in base64)."""
        lines = [self.signer.to_string(), *(v.to_string() for v in self.retired)]
        lines += [f"{ROTATION_PREFIX}{base64.b64encode(note).decode()}" for note in self.rotations]
        return "".join(line + "\n" for line in lines)

    def unvouched(self) -> list[Verifier]:
        """Retired keys no statement in the file hands over from (rotated by an older fairdeck)."""
        vouched = set()
        for note in self.rotations:
            with contextlib.suppress(RotationError):
                vouched.add(open_rotation(note).old)
        return [v for v in self.retired if v not in vouched]


ROTATION_PREFIX = "rotation "
"""A key file line holding a rotation statement: this, then the signed note in base64."""


def load_or_create_signer(path: Path, origin: str | None = None) -> Signer:
    """The log signer from ``path``, created (0600) with ``origin`` as its name if missing.

    For tests and benchmarks that set up a log by hand; the dealer never creates a key
    as a side effect (fairdeck_server.run.startup decides when one is made)."""
    if path.exists():
        return load_log_keys(path, origin).signer
    return create_log_keys(path, origin).signer


def load_log_keys(path: Path, origin: str | None = None) -> LogKeys:
    """The keys in ``path``; a missing file is a LogKeyError (nothing is created).

    The file's first line is the signer key (``PRIVATE+KEY+...``); each later
    line is the verifier key of a retired signer, newest first. Retired keys
    are kept public only: after a rotation nothing can sign with them here.
    """
    if not path.exists():
        raise LogKeyError(f"no log key at {path}")
    keys = _parse_keys(read_private_text(path, "log key file", LogKeyError), path)
    if origin is not None and keys.signer.name != origin:
        raise LogKeyError(f"log key file {path} is for origin {keys.signer.name!r}, not {origin!r}")
    return keys


def new_log_keys(origin: str | None = None) -> LogKeys:
    """A new signer named ``origin`` (default a random ``fairdeck.log/...``); LogKeyError if the
    name is not a valid key name."""
    name = origin or f"{RANDOM_ORIGIN}{secrets.token_hex(6)}"
    if not is_valid_key_name(name):
        raise LogKeyError(f"--log-origin {name!r} is not a valid key name (non-empty, no spaces, no '+')")
    return LogKeys(Signer.generate(name))


def create_log_keys(path: Path, origin: str | None = None) -> LogKeys:
    """Write a new signer to ``path`` (0600, which must not exist: O_EXCL)."""
    keys = new_log_keys(origin)
    write_private_file(path, keys.to_text(), create=True)
    return keys


def rotate_log_key(path: Path) -> LogKeys:
    """Replace the signer in ``path`` by a new key of the same name (the log's
    origin); the old signer's verifier key becomes the first retired key.

    Takes effect when the dealer restarts. Checkpoints signed before stay
    verifiable with the retired key; auditors pass every key to ``--key``. The old key signs a
    rotation statement naming the new one (fairdeck.log.rotation), kept in the file: the dealer
    publishes it, so an auditor who holds only the old key can follow the rotation.
    """
    old = load_log_keys(path) if path.exists() else None
    if old is None:
        raise LogKeyError(f"no log key at {path} to rotate")
    signer = Signer.generate(old.signer.name)
    statement = sign_rotation(old.signer, signer)
    new = LogKeys(signer, (old.signer.verifier, *old.retired), (statement, *old.rotations))
    write_private_file(path, new.to_text(), create=False)
    return new


def _parse_keys(text: str, path: Path) -> LogKeys:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise LogKeyError(f"log key file {path} is empty")
    try:
        signer = Signer.parse(lines[0])
    except NoteError as e:
        raise LogKeyError(f"log key file {path}, line 1: {e}") from None
    retired = []
    rotations = []
    for number, line in enumerate(lines[1:], start=2):
        if line.startswith(ROTATION_PREFIX):
            rotations.append(_rotation(line[len(ROTATION_PREFIX) :], signer.name, path, number))
            continue
        if rotations:
            raise LogKeyError(
                f"log key file {path}, line {number}: retired keys come before rotation statements"
            )
        if line.startswith("PRIVATE+"):
            raise LogKeyError(f"log key file {path}, line {number}: keep retired keys as verifier keys only")
        try:
            verifier = Verifier.parse(line)
        except NoteError as e:
            raise LogKeyError(f"log key file {path}, line {number}: {e}") from None
        if verifier.name != signer.name:
            raise LogKeyError(f"log key file {path}, line {number}: retired key is for another origin")
        retired.append(verifier)
    if len({(v.name, v.key_id) for v in [signer.verifier, *retired]}) != 1 + len(retired):
        raise LogKeyError(f"log key file {path} lists a key twice")
    return LogKeys(signer, tuple(retired), tuple(rotations))


def _rotation(text: str, origin: str, path: Path, number: int) -> bytes:
    """A rotation statement line's note, checked: it verifies, and is for this log."""
    try:
        note = base64.b64decode(text.strip(), validate=True)
        rotation = open_rotation(note)
    except (binascii.Error, RotationError) as e:
        raise LogKeyError(
            f"log key file {path}, line {number}: not a valid rotation statement ({e})"
        ) from None
    if rotation.old.name != origin:
        raise LogKeyError(f"log key file {path}, line {number}: the rotation statement is for another origin")
    return note


class CheckpointPublisher:
    """Signs checkpoints of a Storage's log as it grows.

    With ``tiles`` (``serve --tiles``), the tiles of each checkpoint are written before it is
    stored, and only the log's leader (``lease``, log_lease.py) signs: the other processes hand
    out the checkpoints it stored. Without a ``lease`` this process always leads."""

    def __init__(
        self,
        storage: Storage,
        signer: Signer,
        *,
        interval: float = DEFAULT_INTERVAL,
        tiles: LiveTiles | None = None,
        lease: Lease | None = None,
        show_latest: bool = True,
    ) -> None:
        self.storage = storage
        self.signer = signer
        self.interval = interval
        self._failures = Repeats(log)
        self.tiles = tiles
        self.lease = lease
        self.show_latest = show_latest
        """Publish each new checkpoint as the tiles' ``checkpoint`` file (off with witnesses: the
        file then holds the latest final checkpoint, cosigning.py)."""
        self.leading = lease is None
        self._next_try = 0.0
        self._lock = asyncio.Lock()
        self._ready = asyncio.Event()
        if tiles is None and lease is None:
            self._ready.set()  # nothing to complete or to take before signing
        self._task: asyncio.Task[None] | None = None

    @property
    def origin(self) -> str:
        return self.signer.name

    async def prepare(self) -> None:
        """Before the dealer serves: take the lead if this process can, and complete the tiles.
        TileError or OSError when the tiles cannot be completed (the caller refuses to start)."""
        try:
            async with self._lock:
                await self._lead()
        finally:
            self._ready.set()

    async def ready(self) -> None:
        """Wait until ``prepare`` is over: no checkpoint is handed out before the tiles are whole."""
        await self._ready.wait()

    async def _lead(self) -> bool:
        """Whether this process leads the log now: it keeps the lead or tries to take it (at most
        once an interval); a new leader completes the tiles first."""
        if self.lease is not None:
            if self.leading and not await self.lease.held():
                self.leading = False
                if self.tiles is not None:  # another process signs now: read the tiles again on return
                    self.tiles.edge = None
            if not self.leading:
                now = time.monotonic()
                if now < self._next_try:
                    return False
                self._next_try = now + self.interval
                if not await self.lease.acquire():
                    return False
                self.leading = True
                log.info("this process leads the log now%s", " and writes its tiles" if self.tiles else "")
        if self.tiles is not None and self.tiles.edge is None:
            done = await self.tiles.open(self.storage)
            log.info("tiles in %s: %s", self.tiles.root, done)
            head = await self.storage.checkpoint()
            if head is not None and self.show_latest:  # a kill may have come before the file
                await self.tiles.show(head.note)
        return True

    async def publish(self) -> StoredCheckpoint | None:
        """Sign the current tree if it is larger than the head; return the head."""
        await self._ready.wait()
        async with self._lock:
            leads = await self._lead()
            head = await self.storage.checkpoint()
            if self.tiles is None:
                return await self._sign(head)
            if not leads:  # the leader signs, with its tiles; this process hands out what it stored
                return head
            if head is not None and head.size > self.tiles.size:
                # Signed by a process without --tiles (every dealer of a log needs the same flag).
                log.error(
                    "checkpoint %d was signed by another dealer process without its tiles; writing "
                    "them now. Run every process of this log with --tiles",
                    head.size,
                )
                await self.tiles.extend(self.storage, head.size, head.root)
            stored = await self._sign(head)
            if stored is not None and self.show_latest:
                await self.tiles.show(stored.note)
            return stored

    async def _sign(self, head: StoredCheckpoint | None) -> StoredCheckpoint | None:
        size, root = await self.storage.log_head()
        if (head is not None and head.size >= size) or size == 0:
            return head
        note = sign_checkpoint(Checkpoint(self.origin, size, root), self.signer)
        if self.tiles is not None:
            await self.tiles.extend(self.storage, size, root)  # before anyone can be handed it
        return await self.storage.put_checkpoint(size, root, note, time.time_ns() // 1_000_000)

    async def covering(self, index: int) -> StoredCheckpoint:
        """A checkpoint whose tree includes entry ``index`` (signing one if needed; a process that
        does not lead waits a while for the leader's)."""
        head = await self.storage.checkpoint()
        if head is None or head.size <= index:
            head = await self.publish()
        deadline = time.monotonic() + max(FOLLOW_WAIT_S, 10 * self.interval)
        while (head is None or head.size <= index) and not self.leading and time.monotonic() < deadline:
            if index >= await self.storage.log_size():
                break
            await asyncio.sleep(min(0.05, self.interval / 2))
            head = await self.publish()
        if head is None or head.size <= index:
            if not self.leading and index < await self.storage.log_size():
                raise refusals.storage_unavailable(
                    f"no signed checkpoint covers log entry {index} yet: the process that leads the "
                    "log has not signed one; try again"
                )
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
        try:
            await self.publish()  # the last entries get a signed checkpoint before exit
        finally:
            if self.lease is not None:
                await self.lease.release()

    async def _run(self) -> None:
        failing: str | None = None
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.publish()
            except (TileError, OSError) as e:  # paths and sizes only: nothing secret in these
                where = self.tiles.root if self.tiles is not None else "storage"
                why = (e.strerror or str(e)) if isinstance(e, OSError) else str(e)
                problem = f"no checkpoint signed: the tiles in {where} cannot be written: {why}"
                if problem != failing:  # once per cause, not five times a second
                    log.error("%s", problem)
                failing = problem
                continue
            except Exception as e:  # keep publishing; storage may come back
                # The cause, once per cause and then every few seconds: a lock held elsewhere
                # fails every round, five times a second in each worker.
                self._failures.log(logging.ERROR, f"checkpoint publishing failed: {cause(e)}")
                failing = "storage"
                continue
            if failing is not None:
                again = ", with their tiles" if failing != "storage" else ": storage takes writes again"
                log.info("checkpoints are signed again%s", again)
                self._failures.clear()
                failing = None
