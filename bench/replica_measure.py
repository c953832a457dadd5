"""What replica_bench.py reads from outside the processes it measures: CPU seconds per
process (from /proc), the PostgreSQL postmaster and its children, pg_stat_wal and the bytes
on disk per hand; and how it reduces them: medians of the known values, rounds judged quiet
(``QUIET``), progress lines on stderr.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from loadgen import proc_cpu

QUIET = 0.3
"""A round is quiet when everything else on the machine used under 30% of a CPU meanwhile."""


def pg_pids(datadir: Path) -> list[int]:
    """The postmaster and its children (backends, WAL writer, checkpointer...)."""
    postmaster = int((datadir / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == postmaster:
                pids.append(int(entry))
    return pids


WAL_FIELDS = (
    "wal_records",
    "wal_fpi",
    "wal_bytes",
    "wal_write",
    "wal_sync",
    "wal_write_time",
    "wal_sync_time",
)


def wal_snapshot(conn: Any) -> dict[str, float]:
    """pg_stat_wal, cluster-wide (times in ms; track_wal_io_timing is on in this cluster)."""
    row = conn.execute(f"SELECT {', '.join(WAL_FIELDS)} FROM pg_stat_wal").fetchone()
    return {k: float(v) for k, v in zip(WAL_FIELDS, row, strict=True)}


def wal_per_call(w0: dict[str, float], w1: dict[str, float], calls: int, window: float) -> dict[str, Any]:
    d = {k: w1[k] - w0[k] for k in WAL_FIELDS}
    return {
        "wal_bytes_per_call": d["wal_bytes"] / calls if calls else None,
        "wal_fpi_per_call": d["wal_fpi"] / calls if calls else None,
        "wal_syncs_per_s": d["wal_sync"] / window,
        "wal_sync_ms": d["wal_sync_time"] / d["wal_sync"] if d["wal_sync"] else None,
        "wal_write_ms": d["wal_write_time"] / d["wal_write"] if d["wal_write"] else None,
    }


def cpu_of(pids: list[int]) -> dict[int, float]:
    """CPU seconds so far of each process still alive."""
    out = {}
    for pid in pids:
        with contextlib.suppress(OSError):  # exited meanwhile
            out[pid] = proc_cpu(pid) or 0.0
    return out


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings: of processes alive at both, plus all of new ones
    (a process that exited in between is left out rather than counted negative)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def table_sizes(url: str) -> dict[str, Any]:
    """Bytes on disk (tables, indexes, TOAST) per hand and per log entry, from the pg-1 database."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        sizes = dict(
            conn.execute(
                "SELECT relname::text, pg_total_relation_size(oid) FROM pg_class "
                "WHERE relname IN ('hands', 'log_entries', 'log_hashes', 'checkpoints')"
            ).fetchall()
        )
        (hands,) = conn.execute("SELECT count(*) FROM hands").fetchone() or (0,)
        (entries,) = conn.execute("SELECT count(*) FROM log_entries").fetchone() or (0,)
    return {
        "hands": hands,
        "entries": entries,
        "bytes": sizes,
        "hand_bytes_per_hand": sizes.get("hands", 0) / max(hands, 1),
        "log_bytes_per_entry": (sizes.get("log_entries", 0) + sizes.get("log_hashes", 0)) / max(entries, 1),
    }


def median_known(xs: list[Any]) -> float | None:
    known = [x for x in xs if x is not None]
    return statistics.median(known) if known else None
