"""A 9-seat co-dealt table end to end: a real co-dealer and a real dealer, the SDK, a warm pool.

Starts ``fairdeck codealer serve`` and ``fairdeck serve --codealer`` on loopback, warms the deck
pool (waits until it holds its decks), then plays ``--hands`` hands: open, 9 draws of 2 sealed to
9 seat keys, every seat opening and verifying its cards. It reports, per hand, the time from the
open's call until the last seat holds its cards (the seats open one after another here, so this
is an upper bound), and, side by side in the same run, the ordinary mode's open + shuffle + 9
draws of 2. Between hands it waits for the pool to be full again (the goal is "with a warm
pool"). CPU per hand of each process from /proc. Prints one JSON object.

    .venv/bin/python bench/codeal_table_bench.py --hands 100 --json bench/results/codeal/table.json
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from server_process import PYTHON, Server, serve_argv

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, hand_proof, open_cards, seat_releases

SEATS = 9
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def pooled(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM codeal_hands WHERE tenant = ''").fetchone()[0])


def wait_pool(db: Path, want: int, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while pooled(db) < want:
        if time.monotonic() > end:
            raise RuntimeError(f"the pool did not reach {want} decks in {timeout} s")
        time.sleep(0.05)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(ms), 2),
        "p99": round(pct(ms, 0.99), 2),
        "max": round(max(ms), 2),
        "mean": round(statistics.fmean(ms), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hands", type=int, default=100)
    parser.add_argument("--pool", type=int, default=16, help="the dealer's decks per tenant (its constant)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one-call", action="store_true", help="deal the 9 seats in one DrawCards call")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="codeal-table-"))
    key = subprocess.run(
        [PYTHON, "-m", "fairdeck.cli", "codealer", "init", "--dir", str(tmp / "cd")],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    codealer = Server(
        "codealer",
        [
            PYTHON,
            "-m",
            "fairdeck.cli",
            "codealer",
            "serve",
            "--dir",
            str(tmp / "cd"),
            "--listen",
            "127.0.0.1:0",
        ],
        tmp / "codealer.log",
    )
    dealer = Server(
        "dealer",
        serve_argv(
            tmp / "data",
            "--codealer",
            codealer.target,
            "--codealer-key",
            key,
            "--codealer-token",
            f"@{tmp / 'cd' / 'dealer.token'}",
        ),
        tmp / "dealer.log",
    )
    db = tmp / "data" / "codeal.db"
    result: dict[str, Any] = {"hands": args.hands, "seats": SEATS, "one_call": args.one_call}
    try:
        with DealerClient(dealer.target, timeout=60) as client:
            hands = CodealHands(client)
            first = hands.open_hand("standard")  # the tenant's first: made on demand, starts its pool
            hands.close_hand(first.hand_id)
            wait_pool(db, args.pool)
            seats = [SeatKey.generate() for _ in range(SEATS)]
            codeal_ms, draws_ms, seat_ms, ordinary_ms = [], [], [], []
            cpu0 = {p.name: cpu_seconds(p.pid) for p in (dealer, codealer)}
            proof_bytes = 0
            for _ in range(args.hands):
                wait_pool(db, args.pool)  # warm
                t0 = time.perf_counter()
                hand = hands.open_hand("standard")
                if args.one_call:
                    sealed = hands.deal_seats(hand.hand_id, 2, [s.public_key for s in seats])
                else:
                    sealed = [
                        hands.draw(hand.hand_id, 2, seat_public_key=s.public_key).sealed_cards for s in seats
                    ]
                t1 = time.perf_counter()
                per_seat = []
                for seat, cards in zip(seats, sealed, strict=True):
                    s0 = time.perf_counter()
                    open_cards(hand, cards, seat, [bytes.fromhex(key)])
                    per_seat.append(time.perf_counter() - s0)
                t2 = time.perf_counter()
                codeal_ms.append((t2 - t0) * 1000)
                draws_ms.append((t1 - t0) * 1000)
                seat_ms.append(max(per_seat) * 1000)
                board = hands.draw(hand.hand_id, 5)
                assert len(board.cards) == 5
                pairs = zip(seats, sealed, strict=True)
                releases = [t for seat, cards in pairs for t in seat_releases(hand, cards, seat)]
                closed = hands.close_hand(hand.hand_id, seat_releases=releases)
                proof_bytes = len(hand_proof(closed).to_json())
            cpu1 = {p.name: cpu_seconds(p.pid) for p in (dealer, codealer)}
            c0 = cpu_seconds(dealer.pid)
            for _ in range(args.hands):  # the ordinary mode, same dealer, same run
                t0 = time.perf_counter()
                opened = client.open_hand("standard")
                client.shuffle(opened.hand_id)
                for _seat in range(SEATS):
                    client.draw(opened.hand_id, 2)
                ordinary_ms.append((time.perf_counter() - t0) * 1000)
                client.draw(opened.hand_id, 5)
                client.close_hand(opened.hand_id)
            c1 = cpu_seconds(dealer.pid)
        result["codeal_open_to_last_seat_ms"] = summary(codeal_ms)
        result["codeal_open_and_9_draws_ms"] = summary(draws_ms)
        result["codeal_open_to_last_seat_parallel_devices_ms"] = summary(
            [d + s for d, s in zip(draws_ms, seat_ms, strict=True)]
        )
        result["codeal_slowest_seat_open_ms"] = summary(seat_ms)
        result["ordinary_open_shuffle_9_draws_ms"] = summary(ordinary_ms)
        result["cpu_ms_per_codeal_hand"] = {
            k: round((cpu1[k] - cpu0[k]) * 1000 / args.hands, 1) for k in cpu0
        }
        result["cpu_ms_per_ordinary_hand_dealer"] = round((c1 - c0) * 1000 / args.hands, 2)
        result["hand_proof_json_bytes"] = proof_bytes
        result["loadavg"] = os.getloadavg()
    finally:
        dealer.stop()
        codealer.stop()
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
