"""What the dealer's start-up check of every tile costs (bench/README.md, section 14).

Writes the tiles of ``--entries`` random 150-byte entries (default 200,000) with the tile writer,
then times the check a dealer now runs at start on tiles it did not write (each bundle against
its tile, each tile against the ones below, the top against the root), as a ratio to writing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from fairdeck.log.tile_writer import TileDir, read_file, write_tree
from fairdeck_server.publishing.tile_publishing import _check_every_file


def run(root: Path, n: int) -> None:
    entries = [os.urandom(150) for _ in range(n)]
    began = time.perf_counter()
    edge = write_tree(TileDir(root, expect_new=True), iter(entries), n)
    write = time.perf_counter() - began
    began = time.perf_counter()
    _check_every_file(lambda rel: read_file(root, rel), n, edge.root())
    check = time.perf_counter() - began
    print(
        f"{n:,} entries: writing the tiles {write:.1f} s, checking every file {check:.2f} s "
        f"({n / check:,.0f} entries/s), {check / write:.2f}x the writing"
    )
    print("load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "tiles", args.entries)
