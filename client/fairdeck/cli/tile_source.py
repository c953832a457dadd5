"""Where ``fairdeck audit --tiles`` reads a C2SP tlog-tiles log: a directory or an http(s):// URL
prefix (docs/log-format.md, "Tiles"), and how the reading is spread over processes.

- ``HttpTiles`` fetches over HTTP(S): one keep-alive connection per thread, ``gzip`` asked for,
  every body held to the largest size its file can have, decompressed or not.
- ``tiles_log`` reads the checkpoint, then every entry with its leaf hash. With ``workers``,
  worker processes fetch the bundles and their level-0 tiles, eight at a time each, and check
  them (``fairdeck.log.tiles.verify_bundle``: each entry hashes to its leaf); the auditor's
  process only checks the tiles above, which are few, and replays. The entries come in order
  either way, and a file that does not match is the same TileError naming it.
"""

from __future__ import annotations

import http.client
import multiprocessing
import threading
import urllib.parse
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

from fairdeck.client.local_files import read_local_head
from fairdeck.log.audit import LogUnreadable
from fairdeck.log.audit_pool import default_workers
from fairdeck.log.checkpoint import Checkpoint, CheckpointError
from fairdeck.log.rotation import ROTATIONS_FILE, read_rotations_file
from fairdeck.log.tiles import MAX_BUNDLE_BYTES, Tile, TileError, TileLog, Verified, tiles_for, verify_bundle

MAX_CHECKPOINT_BYTES = 128 * 1024
PER_JOB = 8
"""Level-0 tiles a worker fetches (concurrently) and checks per job."""
Item = bytes | tuple[bytes, bytes]
"""An entry, or an entry with its leaf hash already checked (from tiles)."""
Source = tuple[int, list[bytes], Iterator[Item]]
"""What a log source gives the audit: the signed tree size, the checkpoint notes, the entries."""


class HttpTiles:
    """GETs of a tiled log's files over HTTP(S): one keep-alive connection per thread, asking for
    ``gzip, identity`` as tlog-tiles' clients SHOULD; a body (decompressed) is refused past
    ``limit`` bytes, so a compressed answer cannot expand without bound."""

    def __init__(self, prefix: str, timeout: float) -> None:
        parts = urllib.parse.urlsplit(prefix)
        self.prefix = prefix
        self.https = parts.scheme == "https"
        self.netloc = parts.netloc
        self.path = parts.path
        self.timeout = timeout
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            conn = kind(self.netloc, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def fetch(self, rel: str, limit: int = MAX_BUNDLE_BYTES) -> bytes:
        url = f"{self.prefix}/{rel}"
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.request("GET", f"{self.path}/{rel}", headers={"Accept-Encoding": "gzip, identity"})
                response = conn.getresponse()
                data = response.read(limit + 1)
                encoding = (response.getheader("Content-Encoding") or "identity").lower()
                if response.will_close or len(data) > limit:
                    conn.close()
                    self._local.conn = None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self._local.conn = None
                if attempt == 0 and isinstance(e, http.client.RemoteDisconnected | ConnectionResetError):
                    continue  # the server closed the idle keep-alive connection
                raise TileError(f"cannot fetch {url}: {e}") from None
            break
        if response.status != 200:
            raise TileError(f"cannot fetch {url}: HTTP {response.status} {response.reason}")
        if len(data) > limit:
            raise TileError(f"{url} is larger than {limit} bytes")
        if encoding == "gzip":
            inflate = zlib.decompressobj(wbits=31)
            try:
                data = inflate.decompress(data, limit + 1)
            except zlib.error as e:
                raise TileError(f"{url}: bad gzip: {e}") from None
            if len(data) > limit or inflate.unconsumed_tail:
                raise TileError(f"{url} is larger than {limit} bytes once decompressed")
            if not inflate.eof:
                raise TileError(f"{url}: the gzip stream ends early")
        elif encoding != "identity":
            raise TileError(f"{url} came with Content-Encoding {encoding}, not gzip or identity")
        return bytes(data)


class DirTiles:
    """Reads of a tiled log's files in a directory, each held to the largest size it can have."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def fetch(self, rel: str, limit: int = MAX_BUNDLE_BYTES) -> bytes:
        try:  # a FIFO or a device planted in the directory is refused, never waited on
            data = read_local_head(self.root / rel, limit)
        except OSError as e:
            raise TileError(f"cannot read {self.root / rel}: {e.strerror or e}") from None
        if len(data) > limit:
            raise TileError(f"{self.root / rel} is larger than {limit} bytes")
        return data


def _reader(location: str, timeout: float) -> HttpTiles | DirTiles:
    if location.startswith(("http://", "https://")):
        return HttpTiles(location.rstrip("/"), timeout)
    return DirTiles(location)


_WORKER_READER: HttpTiles | DirTiles | None = None


def _start_worker(location: str, timeout: float) -> None:
    global _WORKER_READER
    _WORKER_READER = _reader(location, timeout)


def _verify(tiles: list[Tile]) -> list[Verified]:
    """In a worker: fetch the bundles and level-0 tiles (concurrently), and check each."""
    reader = _WORKER_READER
    assert reader is not None
    with ThreadPoolExecutor(max_workers=2 * len(tiles)) as pool:
        bundles = [pool.submit(reader.fetch, t.bundle_path) for t in tiles]
        leaves = [pool.submit(reader.fetch, t.path) for t in tiles]
        return [
            verify_bundle(t, b.result(), h.result()) for t, b, h in zip(tiles, bundles, leaves, strict=True)
        ]


def _verified(location: str, timeout: float, size: int, workers: int) -> Iterator[Verified]:
    """Every level-0 tile's checked bundle, in order, from ``workers`` processes."""
    level0 = [t for t in tiles_for(size) if t.level == 0]
    jobs = [level0[i : i + PER_JOB] for i in range(0, len(level0), PER_JOB)]
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(location, timeout),
    )
    flight: deque[Future[list[Verified]]] = deque()
    try:
        for job in jobs:
            flight.append(pool.submit(_verify, job))
            if len(flight) >= 4 * workers:
                yield from flight.popleft().result()
        while flight:
            yield from flight.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def tiles_log(location: str, timeout: float, workers: int | None = 0) -> Source:
    """(tree size, [the checkpoint note, rotation statements], the entries with their leaf hashes)
    of a tiled log.

    The checkpoint is read first; each bundle is checked against its level-0 tile as it is read
    (in ``workers`` processes, if any; None: as many as ``default_workers`` gives for the log's
    size), so a tampered tile or bundle ends the audit with a finding naming it.
    """
    reader = _reader(location, timeout)
    try:
        note = reader.fetch("checkpoint", MAX_CHECKPOINT_BYTES)
    except TileError as e:
        raise LogUnreadable(f"--tiles {location}: {e}") from None
    text = note.decode("utf-8", "replace")
    try:
        size = Checkpoint.parse(text[: text.rfind("\n\n") + 1]).size
    except CheckpointError as e:
        raise LogUnreadable(f"--tiles {location}: the checkpoint does not parse: {e}") from None
    try:  # the key rotation statements beside it, if the log's key was ever rotated
        notes = [note, *read_rotations_file(reader.fetch(ROTATIONS_FILE, MAX_CHECKPOINT_BYTES))]
    except TileError:
        notes = [note]
    if workers is None:
        workers = default_workers(size)
    if workers > 0:
        log = TileLog(reader.fetch, size)
        return size, notes, log.entries_with_leaves(_verified(location, timeout, size, workers))
    # Over HTTP each file is a round trip: fetch 8 bundles ahead so the waits overlap the checks.
    ahead = 8 if isinstance(reader, HttpTiles) else 0
    return size, notes, TileLog(reader.fetch, size, prefetch=ahead).entries_with_leaves()
