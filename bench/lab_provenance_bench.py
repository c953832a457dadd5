"""What ``lab test``'s provenance check costs against collecting (bench/README.md, section 14).

Collects an offline collection of ``--raw-bytes`` (default 2M, about 32,000 standard hands) into a
temporary directory, then times the manifest's hash check and the re-derivation of every hand
and of a sample of 1,000, each as a ratio to the collection's own time on the same machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from fairdeck.cli import main as fairdeck
from fairdeck.cli.lab_run import check_manifest
from fairdeck.lab import provenance
from fairdeck.log import safefiles


def run(out: Path, raw_bytes: str) -> None:
    began = time.perf_counter()
    argv = ["lab", "collect", "--out", str(out), "--raw-bytes", raw_bytes, "--batch", "2000", "--no-progress"]
    assert fairdeck(argv) == 0
    collect = time.perf_counter() - began
    for sample in (None, 1000):
        pinned: dict[str, int] = {}
        began = time.perf_counter()
        manifest = check_manifest(out, pinned)
        hashed = time.perf_counter() - began
        began = time.perf_counter()
        checked = provenance.check(
            pinned,
            manifest,
            sample=sample,
            sample_seed="bench",
            key=None,
            fetch_tile=lambda rel: safefiles.read_bytes(out, f"log/{rel}", max_bytes=1 << 20),
        )
        took = time.perf_counter() - began
        for fd in pinned.values():
            os.close(fd)
        print(
            f"{manifest['hands']:,} hands, re-derived {len(checked.checked):,}: collect {collect:.1f} s, "
            f"hash check {hashed:.2f} s, re-derivation {took:.1f} s ({len(checked.checked) / took:,.0f} "
            f"hands/s), {took / collect:.2f}x the collection; {checked.verdict}"
        )
    print("load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--raw-bytes", default="2M")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "kit", args.raw_bytes)
