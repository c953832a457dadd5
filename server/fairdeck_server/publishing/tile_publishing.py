"""``serve --tiles DIR``: the log as live C2SP tlog-tiles, in step with every checkpoint signed.

The checkpoint publisher (log_signing.py) calls ``extend`` with the size and root it is about to
sign, *before* it stores the checkpoint, and ``show`` after. So every checkpoint the dealer hands
out has its tiles and bundles durably in DIR; the ``checkpoint`` file is written last,
atomically, never to a smaller tree; tiles are created once, never replaced or deleted.

``open`` runs at start and whenever this process becomes the log's leader (log_lease.py): it
completes what a kill left missing, going on from a whole tree or writing it again from storage
(only what is missing, checking what exists), and writes the key rotation statements beside the
checkpoint. DIR with another log in it, published further than storage goes (a database
restored from an old backup), or holding a file that does not check up to the signed root, is
refused; no link in it is followed (``fairdeck.log.safefiles``). docs/log-format.md.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from fairdeck.log import safefiles
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.rotation import ROTATIONS_FILE, is_rotation, rotations_file
from fairdeck.log.tile_writer import TileDir, TileEdge, read_file, write_tree
from fairdeck.log.tiles import HEIGHT, WIDTH, TileError, TileLog, tile_path, tiles_for
from fairdeck_server.storage.base import Storage, StoredCheckpoint

log = logging.getLogger(__name__)

PAGE = 4096
"""Entries read from storage per query while extending the tiles."""

Source = tuple[int, list[bytes], Iterator[bytes]]
"""What the read-only log readers return: entry count, every checkpoint note, the entries."""


class TileSettings(Protocol):
    """What the tiles read of the dealer's configuration (``run.config.ServerConfig`` has them
    all): named here, so publishing never imports the room that wires it."""

    @property
    def db(self) -> str | None: ...
    @property
    def data_dir(self) -> Path: ...
    @property
    def tiles(self) -> Path | None: ...


def read_whole_log(config: TileSettings) -> Source:
    """The dealer's whole log, read-only (the readers of ``fairdeck audit --data/--db``), its
    checkpoint notes alone: the key rotation statements the readers add are left out."""
    if config.db is not None:
        from fairdeck_server.storage.postgres import read_log as read_database

        size, notes, entries = read_database(config.db)
    else:
        from fairdeck_server.storage.sqlite import read_log

        size, notes, entries = read_log(config.data_dir / "fairdeck.db")
    return size, [n for n in notes if not is_rotation(n)], entries


def tiles_refusal(root: Path | None, error: Exception) -> str:
    """The one line a dealer that cannot complete its tiles stops with."""
    if isinstance(error, safefiles.UnsafeFile):
        return (
            f"--tiles {root}: {error}: remove it and start again (the dealer writes its tiles again "
            "from its database; no link in the tiles directory is followed)"
        )
    if isinstance(error, OSError):
        where = f" ({error.filename})" if error.filename else ""
        return f"--tiles {root}: cannot write the tiles there: {error.strerror or error}{where}"
    return f"--tiles {root}: {error}"


def complete_before_start(config: TileSettings, origin: str, rotations: Sequence[bytes] = ()) -> str:
    """``open`` for the supervisor of ``serve --processes N``, before any worker serves: from the
    read-only log (no storage is open yet); what was done, in words."""
    assert config.tiles is not None
    _, notes, entries = read_whole_log(config)
    close = getattr(entries, "close", None)
    if close is not None:
        close()
    head = None
    if notes:
        text = notes[-1].decode("utf-8")
        checkpoint = Checkpoint.parse(text[: text.find("\n\n") + 1])
        head = StoredCheckpoint(checkpoint.size, checkpoint.root, notes[-1])
    tiles = LiveTiles(config.tiles, origin, lambda: read_whole_log(config), rotations)
    return tiles._open(head)[1]


def _check_writable(root: Path) -> None:
    """OSError naming ``root`` unless a file can be made in it now: an empty log, or tiles already
    whole, write nothing at start, and would otherwise fail only at the next checkpoint, serving."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".probe.", suffix=".tmp"):
            pass  # the prefix and suffix of a temporary file: a kill here leaves one removed at start
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(root)) from None


def note_size(note: bytes) -> int:
    """A checkpoint note's tree size (its second line)."""
    return int(note.split(b"\n", 2)[1])


class LiveTiles:
    """The tiles of one log in ``root``; ``read_log`` reads the whole log when they must be rebuilt.
    ``rotations``: the log key's rotation statements, written beside the checkpoint when opened."""

    def __init__(
        self, root: Path, origin: str, read_log: Callable[[], Source], rotations: Sequence[bytes] = ()
    ) -> None:
        self.root = root
        self.origin = origin
        self.rotations = tuple(rotations)
        self._read_log = read_log
        self.edge: TileEdge | None = None
        """The right edge of the tiles written; None until opened, and again after a failure."""
        self._shown: bytes | None = None
        self._partials: set[str] = set()
        """The partial files this process wrote for the current size (so, known to be there)."""
        self._show_lock = threading.Lock()

    @property
    def size(self) -> int:
        """The tree size the tiles are written for (0 before they are opened)."""
        return self.edge.size if self.edge is not None else 0

    async def open(self, storage: Storage) -> str:
        """Complete the tiles up to the latest stored checkpoint; what was done, in words.
        TileError when DIR holds another log, or more than storage does."""
        head = await storage.checkpoint()
        self.edge = None
        self._partials = set()
        edge, done = await asyncio.to_thread(self._open, head)
        self.edge = edge
        return done

    def _open(self, head: StoredCheckpoint | None) -> tuple[TileEdge, str]:
        files = TileDir(self.root)
        published = files.checkpoint_size(self.origin)
        size = head.size if head is not None else 0
        if published > size:
            raise TileError(
                f"{self.root / 'checkpoint'} publishes {published:,} entries, but storage signs only "
                f"{size:,}: the database is behind what was published (restored from an old backup?); "
                "signing on from here would fork the published log"
            )
        files.remove_temporary(self.root / p for p in _edge_dirs(size))
        _check_writable(self.root)
        if self.rotations:  # an auditor holding a retired key follows them (docs/log-format.md)
            files.replace(ROTATIONS_FILE, rotations_file(self.rotations))
        if head is None:
            return TileEdge(), "no checkpoint signed yet"
        fetch = self._fetch
        try:
            edge = TileEdge.read(fetch, size)
            whole = all(
                safefiles.lstat(self.root, t.path) is not None
                and (t.level or safefiles.lstat(self.root, t.bundle_path) is not None)
                for t in tiles_for(size)
            )
        except safefiles.UnsafeFile:
            raise
        except (OSError, TileError):
            whole = False
        if whole:
            _check_every_file(fetch, size, head.root)
            return edge, f"the tiles of tree size {size:,} are whole (every file checked)"
        _, notes, entries = self._read_log()
        try:
            sizes = [n for n in map(note_size, notes) if n <= size]
            edge = write_tree(files, entries, size, sizes, published=published)
        finally:
            close = getattr(entries, "close", None)
            if close is not None:
                close()
        if not hmac.compare_digest(edge.root(), head.root):
            raise TileError(f"the stored entries do not give the root of the checkpoint of tree size {size}")
        return edge, f"wrote {files.written:,} missing files up to tree size {size:,} (kept {files.kept:,})"

    def _fetch(self, rel: str) -> bytes:
        return read_file(self.root, rel)

    async def extend(self, storage: Storage, size: int, root: bytes) -> None:
        """Write the tiles of the tree of ``size`` entries, whose root must be ``root``, durably: the
        entries are read and their full tiles written ``PAGE`` at a time (a leader catching up after
        an hour holds one page, not the hour), then the partial tiles of ``size``."""
        edge = self.edge
        if edge is None:
            raise TileError("the tiles are not open")
        if size <= edge.size:
            return
        self.edge = None  # until written: a failure part way leaves the edge to be read again
        files = TileDir(self.root, expect_new=True)
        while edge.size < size:
            page = await storage.log_entries(edge.size, min(size, edge.size + PAGE))
            if not page:
                raise TileError(f"log entry {edge.size:,} is not in storage")
            await asyncio.to_thread(self._full, files, edge, page)
        await asyncio.to_thread(self._partial, files, edge, root)
        self.edge = edge

    @staticmethod
    def _full(files: TileDir, edge: TileEdge, entries: list[bytes]) -> None:
        for rel, data in edge.extend(entries):
            files.put(rel, data)

    def _partial(self, files: TileDir, edge: TileEdge, root: bytes) -> None:
        partials = edge.partials()
        for rel, data in partials:
            if rel not in self._partials:  # a partial tile above level 0 often stays the same
                files.put(rel, data)
        self._partials = {rel for rel, _ in partials}
        if not hmac.compare_digest(edge.root(partials), root):
            raise TileError(f"the tiles of tree size {edge.size} do not give the root storage signs")
        files.sync()

    async def show(self, note: bytes) -> None:
        """Publish ``note`` as the ``checkpoint`` file, unless it is the one shown or a smaller tree
        than it, or its tiles are not written."""
        if note == self._shown or note_size(note) > self.size:
            return
        await asyncio.to_thread(self._show, note)

    def _show(self, note: bytes) -> None:
        with self._show_lock:  # read, compare and replace as one: never a smaller tree after a larger
            files = TileDir(self.root)
            if note_size(note) < files.checkpoint_size(self.origin):
                return
            files.set_checkpoint(note)
            self._shown = note


def _check_every_file(fetch: Callable[[str], bytes], size: int, root: bytes) -> None:
    """Every tile and bundle of the tree of ``size`` entries, each against the tiles below it and
    the top against ``root`` (the signed one): TileError naming the file and the fix otherwise."""
    fix = (
        "remove the files it names and start again: the dealer writes them again from its "
        "database (a served tile that does not check makes auditors fail)"
    )
    log = TileLog(fetch, size)
    try:
        for _ in log.entries_with_leaves():
            pass
        if not hmac.compare_digest(log.root(), root):
            raise TileError("the tiles do not give the root of the latest checkpoint")
    except TileError as e:
        raise TileError(f"{e}: {fix}") from None


def _edge_dirs(size: int) -> set[str]:
    """The directories where a writer killed while extending the tree of ``size`` most likely left a
    temporary file: those of the tiles and bundles at the right edge, and of the next ones."""
    dirs = {"."}
    level = 0
    while level == 0 or size >> (HEIGHT * level):
        index = (size >> (HEIGHT * level)) // WIDTH
        for kind in (level, "entries") if level == 0 else (level,):
            for n in (index, index + 1):
                dirs.add(tile_path(kind, n).rpartition("/")[0])
                dirs.add(tile_path(kind, n, 1).rpartition("/")[0])
        level += 1
    return dirs
