"""Tiles in the database? The log's tree as one row per stored hash (fairdeck's layout, Go sumdb's)
against one row per tile (Tessera's layout on MySQL and Spanner), on the append path and the
proof path, in SQLite and PostgreSQL (bench/README.md, "Tiles in the database").

Each layout appends ``--entries`` entries in group-commit batches of ``--batch`` (the engines'
batches), entries and tree in one transaction, as the engines do:

- ``rows``: INSERT each stored hash (about 2 per entry) into ``log_hashes(idx, hash)``;
- ``tiles``: UPSERT the tiles the batch touches into ``log_tiles(level, n, hashes)``: the full
  tiles it completes and the partial tile of each level, whose row grows until it is full.

Then it times ``--proofs`` inclusion proofs at random indexes of the final tree, reading the
hashes a proof needs (rows: by index; tiles: the tiles holding them). Reported: microseconds
of CPU and wall per entry appended, rows written per entry, the database's size, and
microseconds per proof. SQLite runs WAL with synchronous=FULL (the engine's settings);
PostgreSQL is a throwaway cluster (tests/support/pgcluster.py) with fsync on.

    .venv/bin/python bench/tiles_db_probe.py --entries 200000 [--no-postgres] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairdeck.log import merkle
from fairdeck.log.tile_writer import TileEdge
from fairdeck.log.tiles import TileLog

Rows = list[tuple[Any, ...]]


def rows_batch(entries: Sequence[bytes], state: dict[str, Any]) -> Rows:
    """(idx, hash) rows of the stored hashes the batch adds (as the SQLite writer computes them)."""
    out: Rows = []
    hashes: dict[int, bytes] = state.setdefault("frontier", {})
    for entry in entries:
        n = state.get("size", 0)
        new = merkle.stored_hashes_for_append(n, merkle.leaf_hash(entry), lambda ix: [hashes[i] for i in ix])
        start = merkle.stored_hash_index(0, n)
        for i, h in enumerate(new):
            hashes[start + i] = h
            out.append((start + i, h))
        state["size"] = n + 1
        if len(hashes) > 4096:  # keep only what later appends can read: the frontier
            keep = {i for _, i in merkle.frontier_subtrees(n + 1)}
            for i in [i for i in hashes if i not in keep]:
                del hashes[i]
    return out


def tiles_batch(entries: Sequence[bytes], edge: TileEdge) -> Rows:
    """(level, n, hashes) rows the batch writes: full tiles completed, then each partial tile."""
    files = edge.extend(entries) + edge.partials()
    return [(*tile_index(path), data) for path, data in files if not path.startswith("tile/entries")]


def tile_index(path: str) -> tuple[int, int]:
    """(level, n) of ``tile/<L>/<N>[.p/<W>]``."""
    parts = path.split("/")[1:]
    level = int(parts[0])
    elements = []
    for p in parts[1:]:
        if p.startswith("x"):
            elements.append(p[1:])
        else:
            elements.append(p.split(".")[0])
            break
    return level, int("".join(elements))


def run_sqlite(layout: str, where: Path, entries: list[bytes], batch: int, proofs: int) -> dict[str, Any]:
    path = where / f"{layout}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE log_entries (idx INTEGER PRIMARY KEY, entry BLOB NOT NULL)")
    if layout == "rows":
        conn.execute("CREATE TABLE log_hashes (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL)")
        state: dict[str, Any] = {}
        make: Callable[[Sequence[bytes]], Rows] = lambda b: rows_batch(b, state)  # noqa: E731
        sql = "INSERT INTO log_hashes (idx, hash) VALUES (?, ?)"
    else:
        conn.execute("CREATE TABLE log_tiles (level INTEGER, n INTEGER, hashes BLOB, PRIMARY KEY (level, n))")
        edge = TileEdge()
        make = lambda b: tiles_batch(b, edge)  # noqa: E731
        sql = (
            "INSERT INTO log_tiles (level, n, hashes) VALUES (?, ?, ?) "
            "ON CONFLICT (level, n) DO UPDATE SET hashes = excluded.hashes"
        )
    written = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for at in range(0, len(entries), batch):
        chunk = entries[at : at + batch]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO log_entries (idx, entry) VALUES (?, ?)", [(at + i, e) for i, e in enumerate(chunk)]
        )
        rows = make(chunk)
        conn.executemany(sql, rows)
        written += len(rows)
        conn.execute("COMMIT")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    size = len(entries)
    rng = random.Random(1)
    if layout == "rows":

        def read(indexes: Sequence[int]) -> list[bytes]:
            marks = ",".join("?" * len(indexes))
            got = dict(
                conn.execute(f"SELECT idx, hash FROM log_hashes WHERE idx IN ({marks})", list(indexes))
            )
            return [got[i] for i in indexes]
    else:

        def fetch(rel: str) -> bytes:
            level, n = tile_index(rel)
            return bytes(
                conn.execute("SELECT hashes FROM log_tiles WHERE level = ? AND n = ?", (level, n)).fetchone()[
                    0
                ]
            )

    t0 = time.perf_counter()
    for _ in range(proofs):
        index = rng.randrange(size)
        reader = read if layout == "rows" else TileLog(fetch, size).read_hashes
        merkle.prove_inclusion(index, size, reader)
    proof_us = (time.perf_counter() - t0) / proofs * 1e6
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {
        "engine": "sqlite", "layout": layout, "entries": size, "rows_per_entry": written / size,
        "cpu_us_per_entry": cpu / size * 1e6, "wall_us_per_entry": wall / size * 1e6,
        "db_bytes": path.stat().st_size, "proof_us": proof_us,
    }  # fmt: skip


def run_postgres(cluster: Any, layout: str, entries: list[bytes], batch: int, proofs: int) -> dict[str, Any]:
    import psycopg

    url = cluster.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE log_entries (idx bigint PRIMARY KEY, entry bytea NOT NULL)")
        if layout == "rows":
            conn.execute("CREATE TABLE log_hashes (idx bigint PRIMARY KEY, hash bytea NOT NULL)")
            state: dict[str, Any] = {}
            make: Callable[[Sequence[bytes]], Rows] = lambda b: rows_batch(b, state)  # noqa: E731
            sql = "INSERT INTO log_hashes (idx, hash) VALUES (%s, %s)"
        else:
            conn.execute("CREATE TABLE log_tiles (level int, n bigint, hashes bytea, PRIMARY KEY (level, n))")
            edge = TileEdge()
            make = lambda b: tiles_batch(b, edge)  # noqa: E731
            sql = (
                "INSERT INTO log_tiles (level, n, hashes) VALUES (%s, %s, %s) "
                "ON CONFLICT (level, n) DO UPDATE SET hashes = excluded.hashes"
            )
        written = 0
        cpu, wall = time.process_time(), time.perf_counter()
        for at in range(0, len(entries), batch):
            chunk = entries[at : at + batch]
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO log_entries (idx, entry) VALUES (%s, %s)",
                    [(at + i, e) for i, e in enumerate(chunk)],
                )
                rows = make(chunk)
                cur.executemany(sql, rows)
                written += len(rows)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        size = len(entries)
        rng = random.Random(1)

        def read(indexes: Sequence[int]) -> list[bytes]:
            got = dict(conn.execute("SELECT idx, hash FROM log_hashes WHERE idx = ANY(%s)", (list(indexes),)))
            return [bytes(got[i]) for i in indexes]

        def fetch(rel: str) -> bytes:
            level, n = tile_index(rel)
            row = conn.execute(
                "SELECT hashes FROM log_tiles WHERE level = %s AND n = %s", (level, n)
            ).fetchone()
            return bytes(row[0])

        t0 = time.perf_counter()
        for _ in range(proofs):
            index = rng.randrange(size)
            merkle.prove_inclusion(
                index, size, read if layout == "rows" else TileLog(fetch, size).read_hashes
            )
        proof_us = (time.perf_counter() - t0) / proofs * 1e6
        table = "log_hashes" if layout == "rows" else "log_tiles"
        db_bytes = conn.execute(
            f"SELECT pg_total_relation_size('log_entries') + pg_total_relation_size('{table}')"
        ).fetchone()[0]
    return {
        "engine": "postgres", "layout": layout, "entries": size, "rows_per_entry": written / size,
        "cpu_us_per_entry": cpu / size * 1e6, "wall_us_per_entry": wall / size * 1e6,
        "db_bytes": int(db_bytes), "proof_us": proof_us,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--proofs", type=int, default=2000)
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--json", type=Path)
    opts = ap.parse_args()
    rng = random.Random(0)
    entries = [rng.randbytes(120 + rng.randrange(60)) for _ in range(opts.entries)]
    results = []
    with tempfile.TemporaryDirectory(prefix="tiles-db-") as tmp:
        for layout in ("rows", "tiles", "rows", "tiles"):
            result = run_sqlite(layout, Path(tmp), entries, opts.batch, opts.proofs)
            (Path(tmp) / f"{layout}.db").unlink()
            for suffix in ("-wal", "-shm"):
                (Path(tmp) / f"{layout}.db{suffix}").unlink(missing_ok=True)
            results.append(result)
            print(json.dumps(result), flush=True)
    if not opts.no_postgres:
        from tests.support.pgcluster import PgCluster

        cluster = PgCluster(fsync=True)
        cluster.start()
        try:
            for layout in ("rows", "tiles", "rows", "tiles"):
                result = run_postgres(cluster, layout, entries, opts.batch, opts.proofs)
                results.append(result)
                print(json.dumps(result), flush=True)
        finally:
            cluster.stop()
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
