"""The report deal_bench.py prints: per concurrency and per server the medians, the
dealer/trivial ratios, and for each bar PASS or MISS with the figures it was judged on;
then the open loop, DealHands with its durability check, and the profiles if taken.
"""

from __future__ import annotations

from typing import Any

from deal_runs import (
    BAR_BATCH,
    BAR_BATCH_CPU_US,
    BAR_CONCURRENCY,
    BAR_CPU,
    BAR_OPEN_P99,
    INFO_P99,
    INFO_THROUGHPUT,
    OPEN_LOAD,
)


def print_report(result: dict[str, Any]) -> None:
    print(
        f"\ndeal_bench  {result['date']}  Python {result['python']}  grpcio {result['grpcio']}  "
        f"{result['cpus']} CPUs (server, load generator and trivial service share them)  git {result['git']}"
    )
    o = result["options"]
    if "unary" in result:
        print(
            f"\nDealNewHand (deck standard, response {result['response_bytes']} bytes), "
            f"{o['rounds']} rounds x ({o['warmup']} s warm-up + {o['duration']} s), "
            f"{o['channels']} channel(s); medians over rounds"
        )
        head = (
            f"{'conc':>4} {'server':<8} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'srv cpu':>7} {'us/call':>8} {'gen cpu':>7} {'other':>6}"
        )
        print(head)
        print("-" * len(head))
        for row in result["unary"]:
            for name in ("dealer", "trivial"):
                s = row[name]
                print(
                    f"{row['concurrency']:>4} {name:<8} {s['calls_per_s']:>8.0f} {s['p50_ms']:>8.2f} "
                    f"{s['p99_ms']:>8.2f} {s['server_cpu_util']:>7.0%} {s['server_cpu_us_per_call']:>8.0f} "
                    f"{s['client_cpu_util']:>7.0%} {s['other_cpu_util']:>6.0%}"
                    + (f"  errors {s['errors']}" if s["errors"] else "")
                )
            t, p, u = row["throughput_ratio"], row["p99_ratio"], row["cpu_ratio"]
            print(
                f"     dealer/trivial: CPU per call {u['median']:.2f} [{u['min']:.2f}..{u['max']:.2f}]  "
                f"throughput {t['median']:.3f} [{t['min']:.3f}..{t['max']:.3f}]  "
                f"p99 {p['median']:.2f} [{p['min']:.2f}..{p['max']:.2f}]"
            )
        print()
        for row in result["unary"]:
            if "pass_cpu" in row:
                u = row["cpu_ratio"]
                verdict = "PASS" if row["pass_cpu"] else "MISS"
                print(
                    f"{verdict}  bar 1, c={row['concurrency']}: dealer server CPU per call "
                    f"<= {BAR_CPU}x trivial: {u['median']:.2f}x (min {u['min']:.2f}, max {u['max']:.2f}; "
                    f"{row['dealer']['server_cpu_us_per_call']:.0f} vs "
                    f"{row['trivial']['server_cpu_us_per_call']:.0f} us)"
                )
        for row in result["unary"]:
            if row["concurrency"] in BAR_CONCURRENCY:
                t, p = row["throughput_ratio"], row["p99_ratio"]
                print(
                    f"info  c={row['concurrency']} closed loop: throughput {t['median']:.3f}x "
                    f"(earlier bar >= {INFO_THROUGHPUT}), p99 {p['median']:.2f}x (earlier bar <= {INFO_P99})"
                )
    if "open" in result:
        op = result["open"]
        print(
            f"\nOpen loop: {op['rate']:.0f} calls/s offered to each (= {OPEN_LOAD} x the trivial service's "
            f"capacity {op['capacity']:.0f}/s), {o['rounds']} rounds alternating; medians"
        )
        for name in ("dealer", "trivial"):
            s = op[name]
            print(
                f"  {name:<8} {s['calls_per_s']:7.0f} calls/s  "
                f"p50 {s['p50_ms']:7.2f}  p99 {s['p99_ms']:7.2f}  "
                f"p99.9 {s['p999_ms']:7.2f} ms  server cpu {s['server_cpu_us_per_call']:.0f} us/call  "
                f"other cpu {s['other_cpu_util']:.0%}" + (f"  errors {s['errors']}" if s["errors"] else "")
            )
        r, r50, r999 = op["p99_ratio"], op["p50_ratio"], op["p999_ratio"]
        verdict = "PASS" if op["pass"] else "MISS"
        print(
            f"{verdict}  bar 2: open-loop dealer p99 <= {BAR_OPEN_P99}x trivial: {r['median']:.2f}x "
            f"[{r['min']:.2f}..{r['max']:.2f}] (p50 {r50['median']:.2f}x, p99.9 {r999['median']:.2f}x)"
        )
    if "batch" in result:
        b = result["batch"]
        print(
            f"\nDealHands (deck standard, {o['batch_count']} hands per call, generated stub; "
            "every hand committed durably before it is streamed)"
        )
        for r in b["runs"]:
            print(
                f"  close={r['close']!s:<5} calls={r['parallel_calls']} {r['hands']:>7} hands "
                f"{r['seconds']:7.2f} s {r['decks_per_s']:>8.0f} decks/s  "
                f"server cpu {r['server_cpu_us_per_deck']:.0f} us/deck  "
                f"first message {r['first_message_ms']:.0f} ms  "
                f"other cpu {r['other_cpu_util']:.0%}"
            )
        d = b["durability_check"]
        print(
            f"  after SIGTERM: {d['hands_in_db']}/{d['hands_expected']} hands and "
            f"{d['log_entries_in_db']}/{d['log_entries_expected']} log entries in the database "
            f"({d['journal_mode']}), samples replay: {'OK' if d['ok'] else 'MISMATCH'}"
        )
        for key in ("close=False", "close=True"):
            s = b[key]
            verdict = ("PASS" if s["pass"] else "MISS") if key == "close=False" else "info"
            print(
                f"{verdict}  bar 3, DealHands {key}: >= {BAR_BATCH} decks/s at <= {BAR_BATCH_CPU_US:.0f} us "
                f"server CPU per deck: median {s['decks_per_s_median']:.0f} decks/s "
                f"(min {s['decks_per_s_min']:.0f}, max {s['decks_per_s_max']:.0f}; "
                f"{BAR_BATCH / s['decks_per_s_median']:.2f}x short), "
                f"{s['server_cpu_us_per_deck']:.0f} us/deck"
            )
    if "profile" in result:
        for name, rep in result["profile"].items():
            print(f"\nprofile {name} ({rep.get('samples', 0)} samples, svg {rep.get('svg')}):")
            if "error" in rep:
                print("  " + rep["error"])
                continue
            print("  threads: " + ", ".join(f"{k} {v}%" for k, v in rep["threads_pct"].items()))
            print("  self time:")
            for fn, pct in rep["self_pct"]:
                print(f"    {pct:5.1f}%  {fn}")
            print("  self time by line:")
            for fn, pct in rep["self_lines_pct"]:
                print(f"    {pct:5.1f}%  {fn}")
            print("  inclusive:")
            for fn, pct in rep["inclusive_pct"]:
                print(f"    {pct:5.1f}%  {fn}")
