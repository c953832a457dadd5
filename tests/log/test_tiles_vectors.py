"""docs/vectors/fairdeck-tiles-v1.json through the package: paths, the tiles of trees of many sizes,
and a 600-entry log written by TileWriter, file by file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from fairdeck.log.tile_writer import TileWriter
from fairdeck.log.tiles import TileLog, tile_path, tiles_for
from tests.support.c2sp_log import MemLog

ROOT = Path(__file__).resolve().parents[2]
VECTORS: dict[str, Any] = json.loads((ROOT / "docs" / "vectors" / "fairdeck-tiles-v1.json").read_text())


def test_paths() -> None:
    for case in VECTORS["paths"]:
        assert tile_path(case["level"], case["index"], case["width"]) == case["path"]


def test_trees() -> None:
    for size, want in VECTORS["trees"].items():
        got = [
            {"path": t.path, "width": t.width} for t in tiles_for(int(size)) if t.width < 256 or t.level > 0
        ]
        assert got == want, size


def test_a_600_entry_log_writes_exactly_these_files(tmp_path: Path) -> None:
    case = VECTORS["log"]
    entries = [b"tile vector entry %d" % i for i in range(case["size"])]
    log = MemLog().append(*entries)
    assert log.root().hex() == case["root"]
    TileWriter(tmp_path).write(iter(entries), log.size, log.origin, log.root(), log.checkpoint())
    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()} - {"checkpoint"}
    assert files == {f["path"] for f in case["files"]}
    for f in case["files"]:
        assert hashlib.sha256((tmp_path / f["path"]).read_bytes()).hexdigest() == f["sha256"], f["path"]
    assert TileLog(lambda rel: (tmp_path / rel).read_bytes(), case["size"]).root().hex() == case["root"]
