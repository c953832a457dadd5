"""The report of replica_bench.py: per concurrency and configuration the medians of the
rounds (and of the quiet rounds), the throughput of each configuration against its base
(pg-2 against pg-1, sqlite-N against sqlite-1); the storage alone, the serial section with
its fitted line, and the bytes on disk per hand and per log entry.
"""

from __future__ import annotations

import statistics
from typing import Any

from replica_measure import QUIET, median_known


def summarize(results: dict[int, dict[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    keys = (
        "calls_per_s", "p50_ms", "p99_ms", "dealer_cpu_us_per_call", "pg_cpu_us_per_call",
        "client_cpu_us_per_call", "dealer_cpu_util", "pg_cpu_util", "client_cpu_util", "other_cpu_util",
        "wal_bytes_per_call", "wal_fpi_per_call", "wal_syncs_per_s", "wal_sync_ms",
    )  # fmt: skip
    rows = []
    for c, by in results.items():
        row: dict[str, Any] = {"concurrency": c}
        for name, rs in by.items():
            row[name] = {k: median_known([x[k] for x in rs]) for k in keys}
            row[name]["calls_per_s_all"] = [round(x["calls_per_s"]) for x in rs]
            quiet = [x for x in rs if x["other_cpu_util"] < QUIET]
            row[name]["quiet_rounds"] = len(quiet)
            for k in ("calls_per_s", "p50_ms", "p99_ms", "dealer_cpu_us_per_call", "pg_cpu_us_per_call"):
                row[name][f"quiet_{k}"] = median_known([x[k] for x in quiet])
            row[name]["errors"] = sum(sum(x["errors"].values()) for x in rs)
        row["configs"] = list(by)
        for name in by:
            base = "pg-1" if name.startswith("pg-") else "sqlite-1"
            if name != base and base in by:
                ratios = [
                    x["calls_per_s"] / y["calls_per_s"] for x, y in zip(by[name], by[base], strict=True)
                ]
                row[f"{name}/{base}"] = {
                    "median": statistics.median(ratios),
                    "min": min(ratios),
                    "max": max(ratios),
                }
        rows.append(row)
    return rows


def print_report(report: dict[str, Any]) -> None:
    print(f"replica_bench {report['date']} git {report['git']}, {report['machine']['cpus']} CPUs")
    print("\nDealNewHand, same load (median of rounds):")
    print(f"{'c':>4} {'config':<7} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'dealer us':>9} {'pg us':>6} "
          f"{'client us':>9} {'WAL B':>6} {'syncs/s':>7} {'sync ms':>7} {'other cpu':>9}")  # fmt: skip
    for row in report["unary"]:
        for name in row["configs"]:
            r = row[name]
            print(
                f"{row['concurrency']:>4} {name:<7} {r['calls_per_s']:>8.0f} "
                f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} "
                f"{r['dealer_cpu_us_per_call']:>9.0f} {r['pg_cpu_us_per_call']:>6.0f} "
                f"{r['client_cpu_us_per_call']:>9.0f} {r['wal_bytes_per_call'] or 0:>6.0f} "
                f"{r['wal_syncs_per_s'] or 0:>7.0f} {r['wal_sync_ms'] or 0:>7.2f} {r['other_cpu_util']:>9.0%}"
            )
        for key, ratio in row.items():
            if "/" in key:
                print(
                    f"     {key} throughput: {ratio['median']:.2f}x [{ratio['min']:.2f}..{ratio['max']:.2f}]"
                )
        for name in row["configs"]:
            r = row[name]
            if r["quiet_rounds"]:
                print(
                    f"     quiet rounds only ({r['quiet_rounds']}), {name}: "
                    f"{r['quiet_calls_per_s']:.0f} calls/s, "
                    f"p50 {r['quiet_p50_ms']:.2f} ms, p99 {r['quiet_p99_ms']:.2f} ms, "
                    f"dealer {r['quiet_dealer_cpu_us_per_call']:.0f} us/call, "
                    f"pg {r['quiet_pg_cpu_us_per_call']:.0f} us/call"
                )
    print("\nPostgresStorage.create_hands alone (one DealNewHand-sized hand per call):")
    for s in report["storage"]:
        print(
            f"  x{s['processes']} c={s['concurrency_each']:<3} {s['calls_per_s']:7.0f} calls/s  "
            f"p50 {s['p50_ms']:6.2f} ms  p99 {s['p99_ms']:6.2f} ms  "
            f"{s['appends_per_batch']:6.1f} appends/batch, {s['batches_per_s']:.0f} batches/s; per batch: "
            f"lock wait {s['lock_wait_ms_per_batch']:.2f} ms, hashing {s['hashing_ms_per_batch']:.2f} ms, "
            f"transaction {s['transaction_ms_per_batch']:.2f} ms  "
            f"cpu: process {s['process_cpu_us_per_call']:.0f}, "
            f"pg {s['pg_cpu_us_per_call']:.0f} us/call  WAL {s['wal_bytes_per_call']:.0f} B/call, "
            f"{s['wal_syncs_per_s']:.0f} syncs/s of {s['wal_sync_ms'] or 0:.2f} ms  "
            f"other cpu {s['other_cpu_util']:.0%}"
        )
    if report["serial_section"]:
        print("\nThe serial section: the write statement's server-side execution (EXPLAIN ANALYZE):")
        for x in report["serial_section"]:
            print(
                f"  {x['appends']:>4} appends: {x['execution_ms']:.3f} ms "
                f"({x['execution_ms'] / x['appends'] * 1e3:.1f} us per append), "
                f"planning {x['planning_ms']:.3f} ms (outside the lock; prepared statements skip it)"
            )
    if report["lock_fit"]:
        f = report["lock_fit"]
        print(
            f"  execution ~ {f['fixed_ms']:.2f} ms + {f['per_append_ms'] * 1e3:.1f} us per append; "
            "the log lock is held for that plus the WAL flush at COMMIT"
        )
    disk = report["disk"]
    if not disk:
        return
    print(
        f"\nOn disk (pg-1 database, {disk['hands']:,} hands, {disk['entries']:,} entries): "
        f"{disk['hand_bytes_per_hand']:.0f} B per hand (table + indexes), "
        f"{disk['log_bytes_per_entry']:.0f} B per log entry (entries + stored hashes)"
    )
