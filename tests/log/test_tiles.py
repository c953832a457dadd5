"""C2SP tlog-tiles (fairdeck.log.tiles): the spec's paths and widths, proofs re-derived from tiles
alone, incremental writes that never touch a written tile, fork refusal, and atomic publication."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest

from fairdeck.log import merkle
from fairdeck.log.tile_writer import TileWriter
from fairdeck.log.tiles import (
    TileError,
    TileLog,
    decode_bundle,
    encode_bundle,
    tile_path,
    tiles_for,
)
from tests.support.c2sp_log import MemLog


def entries(n: int, tag: bytes = b"e") -> list[bytes]:
    return [tag + b"%d" % i for i in range(n)]


def publish(root: Path, log: MemLog, items: list[bytes]) -> None:
    TileWriter(root).write(iter(items), log.size, log.origin, log.root(), log.checkpoint())


def reader(root: Path, size: int) -> TileLog:
    return TileLog(lambda rel: (root / rel).read_bytes(), size)


# -- the spec's examples (tlog-tiles, "Merkle Tree" and "Partial Tiles") -----------------------


def test_path_encoding_is_the_specs() -> None:
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert tile_path(0, 0) == "tile/0/000"
    assert tile_path(3, 1000) == "tile/3/x001/000"
    assert tile_path("entries", 5, 17) == "tile/entries/005.p/17"
    for bad in (0, 257):
        with pytest.raises(ValueError):
            tile_path(0, 1, bad)


def test_a_70000_entry_log_has_the_specs_tiles() -> None:
    """273 full level-0 tiles, one partial of width 112, one full level-1 tile, one partial level-1
    tile of width 17, and one partial level-2 tile of width 1."""
    tiles = tiles_for(70_000)
    by_level = {level: [t for t in tiles if t.level == level] for level in {t.level for t in tiles}}
    assert [t.width for t in by_level[0]] == [256] * 273 + [112]
    assert [t.width for t in by_level[1]] == [256, 17]
    assert [t.width for t in by_level[2]] == [1]
    assert sorted(by_level) == [0, 1, 2]
    assert by_level[0][-1].path == "tile/0/273.p/112"
    assert by_level[1][-1].path == "tile/1/001.p/17"
    assert by_level[2][-1].path == "tile/2/000.p/1"
    assert by_level[0][-1].bundle_path == "tile/entries/273.p/112"


def test_a_256_entry_log_is_a_full_tile_and_a_partial_level_1_tile_of_width_1() -> None:
    assert [(t.level, t.width) for t in tiles_for(256)] == [(0, 256), (1, 1)]
    assert tiles_for(0) == []


def test_bundles_are_uint16_length_prefixed() -> None:
    items = [b"", b"a", b"\x00" * 300]
    data = encode_bundle(items)
    assert data == b"\x00\x00" + b"\x00\x01a" + b"\x01\x2c" + b"\x00" * 300
    assert decode_bundle(data, 3) == items
    for broken, count in [(data[:-1], 3), (data + b"x", 3), (data, 4)]:
        with pytest.raises(TileError):
            decode_bundle(broken, count)
    with pytest.raises(TileError):
        encode_bundle([b"x" * 65536])


# -- written and read back ----------------------------------------------------------------------


def test_tiles_match_the_spec_formula_and_give_every_inclusion_proof(tmp_path: Path) -> None:
    items = entries(600)
    log = MemLog().append(*items)
    publish(tmp_path, log, items)
    leaves = [merkle.leaf_hash(e) for e in items]
    # Level 0 is the leaf hashes; level 1 hash i is the MTH of the i-th full level-0 tile.
    assert (tmp_path / "tile/0/000").read_bytes() == b"".join(leaves[:256])
    assert (tmp_path / "tile/0/002.p/88").read_bytes() == b"".join(leaves[512:])
    assert (tmp_path / "tile/1/000.p/2").read_bytes() == merkle.root(leaves[:256]) + merkle.root(
        leaves[256:512]
    )
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == sorted(
        ["checkpoint"]
        + [t.path for t in tiles_for(600)]
        + [t.bundle_path for t in tiles_for(600) if t.level == 0]
    )
    tiles = reader(tmp_path, 600)
    assert tiles.root() == log.root()
    for index in range(600):  # every inclusion proof, from the tiles alone
        proof = merkle.prove_inclusion(index, 600, tiles.read_hashes)
        merkle.verify_inclusion(index, 600, leaves[index], proof, log.root())
    for old in (1, 255, 256, 257, 511, 599):
        proof = merkle.prove_consistency(old, 600, tiles.read_hashes)
        merkle.verify_consistency(old, 600, proof, log.root(old), log.root())
    assert list(tiles.entries()) == items


def test_a_sample_of_proofs_of_a_70000_entry_log(tmp_path: Path) -> None:
    items = entries(70_000)
    log = MemLog().append(*items)
    publish(tmp_path, log, items)
    tiles = reader(tmp_path, 70_000)
    for index in random.Random(7).sample(range(70_000), 300):
        proof = merkle.prove_inclusion(index, 70_000, tiles.read_hashes)
        merkle.verify_inclusion(index, 70_000, merkle.leaf_hash(items[index]), proof, log.root())


def test_a_second_run_only_adds_and_never_rewrites_a_tile(tmp_path: Path) -> None:
    items = entries(1000)
    log = MemLog().append(*items[:700])
    publish(tmp_path, log, items[:700])
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()}
    again = TileWriter(tmp_path).write(iter(items[:700]), 700, log.origin, log.root(), log.checkpoint())
    assert again.written == 0
    log.append(*items[700:])
    grown = TileWriter(tmp_path).write(iter(items), 1000, log.origin, log.root(), log.checkpoint())
    assert grown.written > 0
    for path, stamp in before.items():
        if path.name != "checkpoint":
            assert (path.stat().st_ino, path.stat().st_mtime_ns) == stamp, path
    # The partial tiles of size 700 stay, for readers that still hold the old checkpoint.
    assert (tmp_path / "tile/0/002.p/188").exists() and (tmp_path / "tile/0/003.p/232").exists()
    assert reader(tmp_path, 700).root() == log.root(700)
    assert reader(tmp_path, 1000).root() == log.root()


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_another_log_or_a_fork_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    items = entries(300)
    log = MemLog().append(*items)
    publish(tmp_path, log, items)
    before = _snapshot(tmp_path)
    # A fork: the same origin and key, another entry 100, and more entries than were published.
    forked = [*items[:100], b"another entry 100", *items[101:], *entries(200, b"f")]
    fork = MemLog().append(*forked)
    with pytest.raises(TileError, match="another log"):
        TileWriter(tmp_path).write(iter(forked), fork.size, fork.origin, fork.root(), fork.checkpoint())
    assert _snapshot(tmp_path) == before
    # A fork past the last full tile: only the old partial tile can tell.
    late = [*items[:290], b"late fork", *items[291:], *entries(300, b"g")]
    fork = MemLog().append(*late)
    with pytest.raises(TileError, match=r"not this log.s"):
        TileWriter(tmp_path).write(iter(late), fork.size, fork.origin, fork.root(), fork.checkpoint())
    assert _snapshot(tmp_path) == before
    other = MemLog(origin="other.example/log").append(*items)
    with pytest.raises(TileError, match="another log"):
        publish(tmp_path, other, items)
    shorter = MemLog().append(*items[:200])
    with pytest.raises(TileError, match="behind"):
        publish(tmp_path, shorter, items[:200])
    assert _snapshot(tmp_path) == before


def test_a_reader_never_sees_a_checkpoint_whose_tiles_are_missing(tmp_path: Path) -> None:
    """While the log grows and is republished, a reader polls the checkpoint and reads its whole tree."""
    items = entries(3000)
    log = MemLog()
    stop = threading.Event()
    seen: list[int] = []
    errors: list[Exception] = []

    def poll() -> None:
        while not stop.is_set():
            try:
                note = (tmp_path / "checkpoint").read_bytes()
            except FileNotFoundError:
                continue
            size = int(note.split(b"\n")[1])
            try:
                tiles = reader(tmp_path, size)
                assert list(tiles.entries()) == items[:size]  # each bundle checked against its tile
                tiles.root()  # every frontier tile is there
                seen.append(size)
            except Exception as e:
                errors.append(e)
                return

    thread = threading.Thread(target=poll)
    thread.start()
    for step in (1, 37, 256, 300, 511, 512, 999, 1500, 2048, 3000):
        log.append(*items[log.size : step])
        publish(tmp_path, log, items[:step])
    stop.set()
    thread.join()
    assert not errors, errors[0]
    assert seen, "the reader never read a checkpoint"


def test_tampered_tiles_and_bundles_are_caught(tmp_path: Path) -> None:
    items = entries(600)
    log = MemLog().append(*items)
    publish(tmp_path, log, items)
    bundle = tmp_path / "tile/entries/001"
    data = bytearray(bundle.read_bytes())
    data[5] ^= 1
    bundle.write_bytes(bytes(data))
    with pytest.raises(TileError, match=r"entry 2\d\d in tile/entries/001 does not hash"):
        list(reader(tmp_path, 600).entries())
    bundle.write_bytes(bytes(data[:-1]))
    with pytest.raises(TileError, match="tile/entries/001: entry bundle ends"):
        list(reader(tmp_path, 600).entries())
    tile = tmp_path / "tile/0/000"
    tile.write_bytes(tile.read_bytes()[:-1])
    with pytest.raises(TileError, match="tile/0/000 is 8191 bytes, want 8192"):
        list(reader(tmp_path, 600).entries())
    with pytest.raises(TileError, match="holds other bytes"):  # the writer will not paper over damage
        publish(tmp_path, log, items)
    os.remove(tile)
    os.remove(bundle)
    publish(tmp_path, log, items)  # missing files are written again
    assert list(reader(tmp_path, 600).entries()) == items
    level1 = tmp_path / "tile/1/000.p/2"
    level1.write_bytes(bytes(64))  # a wrong hash of a full level-0 tile: the root no longer matches
    assert reader(tmp_path, 600).root() != log.root()
    with pytest.raises(TileError, match=r"tile/1/000\.p/2 does not match the tiles below it"):
        list(reader(tmp_path, 600).entries())
    os.remove(level1)
    with pytest.raises(FileNotFoundError):
        reader(tmp_path, 600).root()


def test_prefetching_reads_the_same_entries_and_catches_the_same_damage(tmp_path: Path) -> None:
    items = entries(3000)
    log = MemLog().append(*items)
    publish(tmp_path, log, items)
    fetched: list[str] = []

    def fetch(rel: str) -> bytes:
        fetched.append(rel)
        return (tmp_path / rel).read_bytes()

    assert list(TileLog(fetch, 3000, prefetch=4).entries()) == items
    assert len(fetched) == len(set(fetched))  # each file once, prefetched or not
    tile = tmp_path / "tile/0/005"
    data = bytearray(tile.read_bytes())
    data[3] ^= 1
    tile.write_bytes(bytes(data))
    with pytest.raises(TileError, match="entry 1280 in tile/entries/005 does not hash"):
        list(TileLog(fetch, 3000, prefetch=4).entries())
