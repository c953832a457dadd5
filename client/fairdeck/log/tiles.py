"""The log as static files: C2SP tlog-tiles (https://c2sp.org/tlog-tiles).

A tiled log is a ``checkpoint`` file, hash tiles of height 8 and entry bundles, with RFC 9162
hashing as in ``merkle``; anyone can serve it from a plain file host and an auditor reads it
there without touching the dealer. Paths, partial tiles and bundles: docs/log-format.md,
"Tiles". ``fairdeck.log.tile_writer`` writes them; ``TileLog`` reads one through
``fetch(path) -> bytes``, checks every hash tile it reads against the entries, and serves any
stored hash through ``hash_reader`` for ``merkle``'s proofs.

>>> tile_path(0, 1234067)
'tile/0/x001/x234/067'
>>> [tile_path(t.level, t.index, t.width) for t in tiles_for(70_000) if t.width < 256]
['tile/0/273.p/112', 'tile/1/001.p/17', 'tile/2/000.p/1']
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from fairdeck.log import merkle

HEIGHT = 8
WIDTH = 1 << HEIGHT  # 256 hashes, or entries, per full tile
MAX_ENTRY_BYTES = 0xFFFF  # the uint16 length prefix of entry bundles
MAX_BUNDLE_BYTES = WIDTH * (2 + MAX_ENTRY_BYTES)


class TileError(ValueError):
    """A tile or bundle that is missing, malformed, or does not match the log."""


@dataclass(frozen=True, slots=True)
class Tile:
    level: int
    index: int
    width: int

    @property
    def path(self) -> str:
        return tile_path(self.level, self.index, self.width)

    @property
    def bundle_path(self) -> str:
        return tile_path("entries", self.index, self.width)


def tile_path(level: int | str, index: int, width: int = WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]`` (tlog-tiles, "Merkle Tree"); ``level`` "entries" for a bundle."""
    if not 1 <= width <= WIDTH:
        raise ValueError(f"a tile is 1 to {WIDTH} wide, not {width}")
    elements = []
    n = index
    while True:
        elements.append(n % 1000)
        n //= 1000
        if n == 0:
            break
    parts = [f"x{e:03d}" for e in reversed(elements[1:])] + [f"{elements[0]:03d}"]
    suffix = "" if width == WIDTH else f".p/{width}"
    return f"tile/{level}/{'/'.join(parts)}{suffix}"


def tiles_for(size: int) -> list[Tile]:
    """Every tile of a tree of ``size`` entries, level by level: full ones, then the partial one."""
    out = []
    level = 0
    while (count := size >> (HEIGHT * level)) > 0:
        out += [Tile(level, n, WIDTH) for n in range(count // WIDTH)]
        if count % WIDTH:
            out.append(Tile(level, count // WIDTH, count % WIDTH))
        level += 1
    return out


def subtree_root(hashes: Sequence[bytes]) -> bytes:
    """The Merkle Tree Hash of a full tile's 256 hashes (a complete subtree)."""
    level = list(hashes)
    while len(level) > 1:
        level = [merkle.node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def encode_bundle(entries: Sequence[bytes]) -> bytes:
    out = bytearray()
    for entry in entries:
        if len(entry) > MAX_ENTRY_BYTES:
            raise TileError(f"an entry of {len(entry)} bytes does not fit a bundle's uint16 length")
        out += len(entry).to_bytes(2, "big") + entry
    return bytes(out)


def decode_bundle(data: bytes, count: int) -> list[bytes]:
    """``count`` length-prefixed entries, exactly filling ``data``; TileError otherwise."""
    entries: list[bytes] = []
    at = 0
    for _ in range(count):
        if at + 2 > len(data):
            raise TileError(f"entry bundle ends after {len(entries)} of {count} entries")
        n = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + n > len(data):
            raise TileError(f"entry bundle ends inside entry {len(entries)}")
        entries.append(data[at + 2 : at + 2 + n])
        at += 2 + n
    if at != len(data):
        raise TileError(f"entry bundle has {len(data) - at} bytes after its {count} entries")
    return entries


# --- reading -----------------------------------------------------------------------------------


class TileLog:
    """A tiled log of ``size`` entries, read through ``fetch(relative path) -> bytes``."""

    def __init__(self, fetch: Callable[[str], bytes], size: int, *, prefetch: int = 0) -> None:
        self.fetch = fetch
        self.size = size
        self.prefetch = prefetch
        """With ``prefetch`` > 0, ``entries`` fetches that many bundles (and their level-0 tiles) ahead
        in threads, so the network's waits overlap the checks (an HTTP host)."""
        self._tiles: dict[tuple[int, int], list[bytes]] = {}

    def _width(self, level: int, index: int) -> int:
        count = self.size >> (HEIGHT * level)
        if index < count // WIDTH:
            return WIDTH
        if index == count // WIDTH and count % WIDTH:
            return count % WIDTH
        raise TileError(f"a tree of {self.size} entries has no tile {index} at level {level}")

    def tile(self, level: int, index: int) -> list[bytes]:
        """The hashes of a tile, fetched once; TileError if it is not ``width * 32`` bytes."""
        key = (level, index)
        if key not in self._tiles:
            width = self._width(level, index)
            data = self.fetch(tile_path(level, index, width))
            if len(data) != width * merkle.HASH_SIZE:
                raise TileError(f"{tile_path(level, index, width)} is {len(data)} bytes, want {width * 32}")
            self._tiles[key] = [data[i : i + 32] for i in range(0, len(data), 32)]
        return self._tiles[key]

    def subtree(self, level: int, n: int) -> bytes:
        """The hash of the complete subtree of ``2**level`` leaves starting at leaf ``n * 2**level``."""
        tile_level, within = divmod(level, HEIGHT)
        first = n << within  # its first hash in the tile level below, counted across the level
        hashes = self.tile(tile_level, first // WIDTH)
        start = first % WIDTH
        span = hashes[start : start + (1 << within)]
        if len(span) != 1 << within:
            raise TileError(f"tile {tile_path(tile_level, first // WIDTH)} is too narrow for subtree {n}")
        return subtree_root(span)

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        """A ``merkle.HashReader``: stored hashes by index, from the tiles."""
        return [self.subtree(*merkle.split_stored_hash_index(i)) for i in indexes]

    def root(self) -> bytes:
        return merkle.tree_hash(self.size, self.read_hashes)

    def entries(self) -> Iterator[bytes]:
        """Every entry, in order (see ``entries_with_leaves``)."""
        for entry, _ in self.entries_with_leaves():
            yield entry

    def entries_with_leaves(
        self, verified: Iterator[Verified] | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Every entry with its leaf hash, in order, from the bundles. Each bundle is checked against
        its level-0 tile, and each tile above against the tiles below it, so every file of the tree
        is checked once the last entry is read; TileError names the first that does not match.

        ``verified``: each level-0 tile's bundle already checked by ``verify_bundle``, in order
        (worker processes did it, fairdeck.cli.tile_source); only the tiles above are read here."""
        pending: list[list[bytes]] = [[]]  # per level >= 1: roots of the full tiles below, not yet checked
        done: list[int] = [0]

        def check(level: int, index: int, hashes: list[bytes]) -> None:
            got = self.tile(level, index)
            if len(got) != len(hashes) or not all(
                hmac.compare_digest(a, b) for a, b in zip(got, hashes, strict=True)
            ):
                raise TileError(f"{tile_path(level, index, len(got))} does not match the tiles below it")
            self._tiles.pop((level, index), None)

        def carry(level: int, root: bytes) -> None:
            while len(pending) < level:
                pending.append([])
                done.append(0)
            row = pending[level - 1]
            row.append(root)
            if len(row) == WIDTH:
                check(level, done[level - 1], row)
                done[level - 1] += 1
                pending[level - 1] = []
                carry(level + 1, subtree_root(row))

        level0 = [t for t in tiles_for(self.size) if t.level == 0]
        if verified is not None:
            for _, (bundle, leaves, root) in zip(level0, verified, strict=True):
                yield from zip(bundle, leaves, strict=True)
                if root is not None:
                    carry(1, root)
        else:
            ahead = _Ahead(self.fetch, [p for t in level0 for p in (t.bundle_path, t.path)], self.prefetch)
            fetch, self.fetch = self.fetch, ahead.get
            try:
                for tile in level0:
                    bundle, leaves, root = verify_bundle(
                        tile, self.fetch(tile.bundle_path), self.fetch(tile.path)
                    )
                    yield from zip(bundle, leaves, strict=True)
                    if root is not None:
                        carry(1, root)
            finally:
                self.fetch = fetch
                ahead.close()
        for level, row in enumerate(pending, start=1):  # the partial tiles above level 0
            if row:
                check(level, done[level - 1], row)


Verified = tuple[list[bytes], list[bytes], "bytes | None"]
"""A level-0 tile's bundle checked against it: its entries, their leaf hashes, and, for a full
tile, the root of its 256 hashes (the hash the tile above holds for it)."""


def verify_bundle(tile: Tile, bundle_data: bytes, tile_data: bytes) -> Verified:
    """Check a bundle against its level-0 tile: it decodes to ``tile.width`` entries, and each
    entry hashes to its leaf. TileError names the file (and entry) that does not match."""
    if len(bundle_data) > MAX_BUNDLE_BYTES:
        raise TileError(f"{tile.bundle_path} is larger than any bundle can be")
    try:
        bundle = decode_bundle(bundle_data, tile.width)
    except TileError as e:
        raise TileError(f"{tile.bundle_path}: {e}") from None
    if len(tile_data) != tile.width * merkle.HASH_SIZE:
        raise TileError(f"{tile.path} is {len(tile_data)} bytes, want {tile.width * merkle.HASH_SIZE}")
    leaves = [tile_data[i : i + merkle.HASH_SIZE] for i in range(0, len(tile_data), merkle.HASH_SIZE)]
    for i, entry in enumerate(bundle):
        if not hmac.compare_digest(merkle.leaf_hash(entry), leaves[i]):
            where = f"entry {tile.index * WIDTH + i} in {tile.bundle_path}"
            raise TileError(f"{where} does not hash to its leaf in {tile.path}")
    return bundle, leaves, subtree_root(leaves) if tile.width == WIDTH else None


class _Ahead:
    """Fetches a known sequence of paths ``window`` ahead of their use, in threads."""

    def __init__(self, fetch: Callable[[str], bytes], paths: list[str], window: int) -> None:
        self._fetch = fetch
        self._paths = paths
        self._window = window
        self._next = 0
        self._futures: dict[str, Future[bytes]] = {}
        self._pool = ThreadPoolExecutor(max_workers=window) if window > 0 else None

    def _fill(self) -> None:
        assert self._pool is not None
        while self._next < len(self._paths) and len(self._futures) < self._window * 2:
            path = self._paths[self._next]
            self._futures[path] = self._pool.submit(self._fetch, path)
            self._next += 1

    def get(self, path: str) -> bytes:
        if self._pool is None:
            return self._fetch(path)
        self._fill()
        future = self._futures.pop(path, None)
        data = future.result() if future is not None else self._fetch(path)
        self._fill()
        return data

    def close(self) -> None:
        if self._pool is not None:
            for future in self._futures.values():
                future.cancel()
            self._pool.shutdown(wait=False, cancel_futures=True)
