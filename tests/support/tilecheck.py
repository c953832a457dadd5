"""Checks of a live tiles directory that the tiles tests share: every file a checkpoint of a given
size needs is there, and the tiles alone give its root, its entries and its proofs."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.tiles import TileLog, decode_bundle, tile_path, tiles_for


def missing(root: Path, size: int) -> list[str]:
    """The files a checkpoint of ``size`` needs that ``root`` lacks (tlog-tiles: its full and partial
    tiles at every level, and its entry bundles)."""
    want = [t.path for t in tiles_for(size)] + [t.bundle_path for t in tiles_for(size) if t.level == 0]
    return [rel for rel in want if not (root / rel).is_file()]


def checkpoint_of(note: bytes) -> Checkpoint:
    text = note.decode("utf-8")
    return Checkpoint.parse(text[: text.index("\n\n") + 1])


def prove_from_tiles(
    fetch: Callable[[str], bytes],
    note: bytes,
    previous: Checkpoint | None = None,
    samples: int = 5,
    rng: random.Random | None = None,
) -> Checkpoint:
    """Prove a checkpoint from the tiles alone: its root is the tiles' tree hash, random entries
    are included (each bundle entry hashes to its leaf, the leaf proves into the root), and it is
    consistent with ``previous``. AssertionError or the reader's error otherwise."""
    cp = checkpoint_of(note)
    rng = rng or random.Random(cp.size)
    tiles = TileLog(fetch, cp.size)
    assert tiles.root() == cp.root, f"the tiles of tree size {cp.size} do not give its root"
    for index in rng.sample(range(cp.size), min(samples, cp.size)):
        tile = index // 256
        width = min(256, cp.size - tile * 256)
        bundle = decode_bundle(fetch(tile_path("entries", tile, width)), width)
        leaf = merkle.leaf_hash(bundle[index % 256])
        proof = merkle.prove_inclusion(index, cp.size, tiles.read_hashes)
        merkle.verify_inclusion(index, cp.size, leaf, proof, cp.root)
    if previous is not None and 0 < previous.size < cp.size:
        proof = merkle.prove_consistency(previous.size, cp.size, tiles.read_hashes)
        merkle.verify_consistency(previous.size, cp.size, proof, previous.root, cp.root)
    elif previous is not None and previous.size == cp.size:
        assert previous.root == cp.root, f"two roots for tree size {cp.size}"
    return cp
