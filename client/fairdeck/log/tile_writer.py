"""Writing C2SP tlog-tiles (https://c2sp.org/tlog-tiles): the tree's right edge, a directory that
never rewrites a tile, and the offline export.

- ``TileEdge`` is the right edge of a tiled tree: per level the hashes of its partial tile, and
  the entries of the partial bundle. Appending entries yields each full tile and bundle they
  complete; ``partials()`` is every partial tile and bundle of the current size, the files a
  checkpoint of that size needs beyond the full ones ("Partial Tiles": a log MUST serve them
  for every size it made a checkpoint for). Its root is computed from the partial tiles alone.
- ``TileDir`` writes files into a directory it does not trust (``safefiles``: no link below its
  root followed, regular files only): a tile or bundle is created once, atomically (a fresh
  temporary name, fsynced, then linked into place, which fails rather than replace), and one
  that exists must hold exactly these bytes; ``sync`` fsyncs the directories written; the
  ``checkpoint`` is replaced atomically and never by a smaller tree.
- ``TileWriter`` is ``fairdeck tiles``: a whole log, its partial tiles at every signed size.

>>> edge = TileEdge()
>>> full = edge.extend([b"%d" % i for i in range(300)])
>>> [path for path, _ in full]
['tile/entries/000', 'tile/0/000']
>>> [path for path, _ in edge.partials()]
['tile/entries/001.p/44', 'tile/0/001.p/44', 'tile/1/000.p/1']
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from fairdeck.log import merkle, safefiles
from fairdeck.log.tiles import (
    HEIGHT,
    WIDTH,
    TileError,
    TileLog,
    decode_bundle,
    encode_bundle,
    subtree_root,
    tile_path,
)

File = tuple[str, bytes]
"""A file of a tiled log: its path under the root, and its bytes."""


class TileEdge:
    """The right edge of a tiled tree of ``size`` entries (see the module docstring)."""

    __slots__ = ("bundle", "levels", "size")

    def __init__(self) -> None:
        self.size = 0
        self.levels: list[list[bytes]] = []
        """Per level, the hashes of its partial tile (level 0: leaf hashes)."""
        self.bundle: list[bytes] = []

    def extend(self, entries: Iterable[bytes]) -> list[File]:
        """Append entries; return the full bundles and tiles they complete, bundles first."""
        out: list[File] = []
        for entry in entries:
            self.bundle.append(entry)
            self.size += 1
            if len(self.bundle) == WIDTH:
                out.append((tile_path("entries", self.size // WIDTH - 1), encode_bundle(self.bundle)))
                self.bundle = []
            self._push(0, merkle.leaf_hash(entry), out)
        return out

    def _push(self, level: int, h: bytes, out: list[File]) -> None:
        while True:
            if len(self.levels) == level:
                self.levels.append([])
            row = self.levels[level]
            row.append(h)
            if len(row) < WIDTH:
                return
            # Level ``level`` counts size >> (8 * level) hashes; a multiple of 256 completes a tile.
            out.append((tile_path(level, (self.size >> (HEIGHT * (level + 1))) - 1), b"".join(row)))
            h = subtree_root(row)
            self.levels[level] = []
            level += 1

    def partials(self) -> list[File]:
        """The partial bundle and the partial tile of each level, at the current size."""
        out: list[File] = []
        if self.bundle:
            out.append(
                (tile_path("entries", self.size // WIDTH, len(self.bundle)), encode_bundle(self.bundle))
            )
        for level, row in enumerate(self.levels):
            if row:
                out.append(
                    (tile_path(level, (self.size >> (HEIGHT * level)) // WIDTH, len(row)), b"".join(row))
                )
        return out

    def root(self, partials: list[File] | None = None) -> bytes:
        """The tree's root. Every complete subtree of the right edge lies in a partial tile
        (``partials``: those of ``partials()``, made already)."""
        if self.size == 0:
            return merkle.EMPTY_ROOT
        files = dict(self.partials() if partials is None else partials)
        return TileLog(files.__getitem__, self.size).root()

    @classmethod
    def read(cls, fetch: Callable[[str], bytes], size: int) -> TileEdge:
        """The edge of a published tree of ``size`` entries, from its partial tiles and bundle; the
        bundle is checked against its level-0 tile. TileError (or the fetch's own error, such as
        FileNotFoundError) when a file is missing or malformed."""
        edge = cls()
        edge.size = size
        level = 0
        while (count := size >> (HEIGHT * level)) > 0:
            width = count % WIDTH
            row: list[bytes] = []
            if width:
                path = tile_path(level, count // WIDTH, width)
                data = fetch(path)
                if len(data) != width * merkle.HASH_SIZE:
                    raise TileError(f"{path} is {len(data)} bytes, want {width * merkle.HASH_SIZE}")
                row = [data[i : i + merkle.HASH_SIZE] for i in range(0, len(data), merkle.HASH_SIZE)]
            edge.levels.append(row)
            level += 1
        if size % WIDTH:
            path = tile_path("entries", size // WIDTH, size % WIDTH)
            try:
                edge.bundle = decode_bundle(fetch(path), size % WIDTH)
            except TileError as e:
                raise TileError(f"{path}: {e}") from None
            leaves = edge.levels[0]
            if any(
                not hmac.compare_digest(merkle.leaf_hash(e), h)
                for e, h in zip(edge.bundle, leaves, strict=True)
            ):
                raise TileError(f"{path} does not hash to its level-0 tile")
        return edge


MAX_FILE_BYTES = 256 * (2 + (1 << 16))
"""The largest file of a tiled log: a bundle of 256 entries of at most 64 KiB (a tile: 8 KiB)."""


def read_file(root: Path, rel: str) -> bytes:
    """A file of the tiled log in ``root``: a regular file, through no link, of a size a tile
    directory's file can have (UnsafeFile otherwise; FileNotFoundError if it is not there)."""
    return safefiles.read_bytes(root, rel, max_bytes=MAX_FILE_BYTES)


def read_checkpoint_size(path: Path, origin: str) -> int:
    """The tree size of the ``checkpoint`` file at ``path`` (0 if there is none); TileError if it is
    not a checkpoint of ``origin`` (the directory holds another log)."""
    try:
        data = read_file(path.parent, path.name)
    except FileNotFoundError:
        return 0
    first, _, rest = data.partition(b"\n")
    size_text = rest.partition(b"\n")[0]
    if first.decode("utf-8", "replace") != origin or not size_text.isdigit():
        raise TileError(f"{path} is not a checkpoint of {origin}: the directory holds another log")
    return int(size_text)


class TileDir:
    """A tiled log's directory (see the module docstring): tiles and bundles are created once and
    never replaced, the checkpoint is replaced atomically. ``written`` and ``kept`` count files."""

    def __init__(self, root: Path, *, expect_new: bool = False) -> None:
        """``expect_new``: the files put are most likely not there yet (a live writer's): write at
        once rather than first look for them (an export run again finds most of them there)."""
        self.root = root
        self.expect_new = expect_new
        self.written = 0
        self.kept = 0
        self._made: set[Path] = set()
        self._dirty: set[Path] = set()
        self._put: set[str] = set()
        """Paths put by this TileDir: a partial tile the same at two sizes is checked once."""

    def _mkdir(self, directory: Path) -> None:
        if directory in self._made:
            return
        missing = []
        d = directory
        while d != self.root and not os.path.lexists(d):
            missing.append(d)
            d = d.parent
        rel = directory.relative_to(self.root).as_posix()
        self.root.mkdir(parents=True, exist_ok=True)  # the root is trusted as typed
        os.close(safefiles.open_dir(self.root, rel, create=True))  # a link on the way is refused
        for d in missing:
            self._dirty.add(d.parent)  # a new directory is durable once its parent is synced
        self._made.add(directory)

    def put(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` with ``data`` unless it exists; True if written. An existing file must hold
        exactly ``data``: TileError otherwise (another log, or a fork of this one)."""
        if rel in self._put:
            return False
        self._put.add(rel)
        path = self.root / rel
        if not self.expect_new and safefiles.lstat(self.root, rel) is not None:
            return self._compare(path, read_file(self.root, rel), data)
        self._mkdir(path.parent)
        if safefiles.create_new(self.root, rel, data):  # never replaces: what is there is compared
            self._dirty.add(path.parent)
            self.written += 1
            return True
        return self._compare(path, read_file(self.root, rel), data)

    def _compare(self, path: Path, existing: bytes, data: bytes) -> bool:
        if existing != data:
            raise TileError(
                f"{path} holds other bytes than this log's: the directory holds another log (or a "
                "fork of this one); tiles are never overwritten"
            )
        self.kept += 1
        return False

    def sync(self) -> None:
        """Make the files written so far durable: fsync every directory that gained an entry."""
        for directory in sorted(self._dirty, key=lambda d: len(d.parts), reverse=True):
            _fsync_dir(directory)
        self._dirty.clear()

    def checkpoint_size(self, origin: str) -> int:
        return read_checkpoint_size(self.root / "checkpoint", origin)

    def set_checkpoint(self, note: bytes) -> None:
        """Replace the checkpoint, atomically, after making every file written before it durable."""
        self.sync()
        self.replace("checkpoint", note)

    def replace(self, name: str, data: bytes) -> None:
        """Replace the file ``name`` at the top (the checkpoint, the key rotations) atomically: a
        reader sees the old file or the new one, never part of one."""
        self.root.mkdir(parents=True, exist_ok=True)
        safefiles.write_replacing(self.root, name, data)

    def remove_temporary(self, directories: Iterable[Path]) -> int:
        """Remove the temporary files a killed writer left in ``directories``; how many."""
        removed = 0
        for directory in directories:
            try:
                fd = safefiles.open_dir(self.root, directory.relative_to(self.root).as_posix())
            except (FileNotFoundError, NotADirectoryError, safefiles.UnsafeFile):
                continue  # nothing there, or not a directory of ours: nothing of ours to remove
            try:
                for name in os.listdir(fd):
                    if name.startswith(".") and name.endswith(".tmp"):
                        os.unlink(name, dir_fd=fd)
                        removed += 1
            finally:
                os.close(fd)
        return removed


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class WriteReport:
    size: int
    written: int = 0
    kept: int = 0


class TileWriter:
    """``fairdeck tiles``: writes a whole log into a directory, adding only what is missing.

    ``write(entries, size, origin, root, note, sizes)`` streams the entries of the checkpoint's
    tree. The partial tiles of every size in ``sizes`` (the log's other signed checkpoints) are
    written too, as tlog-tiles requires. The files of the checkpoint already published there
    must be exactly this log's, and every file that exists too: otherwise TileError, before
    anything of the new tree is published (another log, or a fork of this one). The checkpoint
    comes last, after a check that the tiles give its root.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(
        self,
        entries: Iterable[bytes],
        checkpoint_size: int,
        origin: str,
        root: bytes,
        note: bytes,
        sizes: Iterable[int] = (),
    ) -> WriteReport:
        size = checkpoint_size
        files = TileDir(self.root)
        try:
            old = files.checkpoint_size(origin)
        except TileError as e:
            raise TileError(f"{e}; use an empty --out") from None
        if old > size:
            raise TileError(
                f"{self.root / 'checkpoint'} signs {old} entries, the store only {size}: the store is behind "
                "the published tiles (a restored backup?); tiles never go back"
            )
        edge = write_tree(files, entries, size, sizes, published=old)
        if size and not hmac.compare_digest(edge.root(), root):
            raise TileError(
                "the tiles written do not give the checkpoint's root; the checkpoint was not written"
            )
        files.set_checkpoint(note)
        return WriteReport(size, files.written, files.kept)


def write_tree(
    files: TileDir, entries: Iterable[bytes], size: int, sizes: Iterable[int] = (), *, published: int = 0
) -> TileEdge:
    """Write the tree of the first ``size`` entries into ``files`` (only what is missing), with the
    partial tiles of each size in ``sizes`` at most ``size``, and make it durable; its edge.

    ``published``: the size of the checkpoint published there before, whose partial files must be
    this log's (TileError otherwise: a fork, or another log)."""
    stops = sorted(
        {s for s in sizes if 0 < s < size} | {size} | ({published} if 0 < published <= size else set())
    )
    edge = TileEdge()
    feed = iter(entries)
    for stop in stops:
        batch = [e for _, e in zip(range(stop - edge.size), feed, strict=False)]
        if len(batch) != stop - edge.size:
            raise TileError(f"the store has {edge.size + len(batch)} entries, the checkpoint signs {size}")
        for rel, data in edge.extend(batch):
            files.put(rel, data)
        if stop == published:
            _check_published(files, edge)
        for rel, data in edge.partials():
            files.put(rel, data)
    files.sync()
    return edge


def _check_published(files: TileDir, edge: TileEdge) -> None:
    """The partial files of the checkpoint published before must be this log's at that size."""
    for rel, data in edge.partials():
        path = files.root / rel
        if path.exists() and path.read_bytes() != data:
            raise TileError(
                f"{path} (of the checkpoint published before) is not this log's: the log forked, or the "
                "directory holds another log; nothing was overwritten"
            )
