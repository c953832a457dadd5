"""Co-dealt decks in Python: a 52-card shuffle proof, each party's CPU for a 9-seat hold'em hand, sizes.

    .venv/bin/python bench/codeal_bench.py [--runs 30] [--json out.json]

Everything runs in this one process, on one core, through fairdeck.codeal (libsodium via
pysodium). Times are process CPU seconds (``time.process_time``), so other jobs on the machine
inflate them less than wall time; the run also reports how much CPU other processes used
(``/proc/stat``). The ordinary mode's cost per hand (``derive_deck`` + ``commit``) is measured in
the same run, as the baseline the co-dealt figures are compared with.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import initial_deck
from fairdeck.codeal.keys import new_holder
from fairdeck.codeal.local import codeal_local
from fairdeck.codeal.proof import prove_shuffle, verify_shuffle
from fairdeck.codeal.record import ShuffleRecord, sign_shuffle, verify_signature
from fairdeck.codeal.seal import open_sealed_share, seal_share, seat_public_key
from fairdeck.codeal.shares import Share, make_share, open_card, verify_share
from fairdeck.codeal.shuffle import check_fresh, permutation, randomness, shuffle_deck
from fairdeck.codeal.verify import verify_hand
from fairdeck.core.commitment import commit
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import derive_deck

SEATS, HOLE, BOARD = 9, 2, 5
DECK = "standard"


def other_cpu() -> tuple[float, float]:
    """(total jiffies, jiffies of every process) from /proc/stat, to tell how busy the machine was."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return time.monotonic(), float(sum(fields) - fields[3] - fields[4])


def cpu(fn: Callable[[], object], runs: int) -> list[float]:
    """Process CPU seconds of each of ``runs`` calls, after one warm-up call."""
    fn()
    out = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        out.append(time.process_time() - start)
    return out


def summary(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1e3 for s in samples)
    return {
        "median_ms": round(statistics.median(ms), 3),
        "min_ms": round(ms[0], 3),
        "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 3),
        "max_ms": round(ms[-1], 3),
        "runs": len(ms),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    runs = args.runs
    spec = DeckSpec.parse(DECK)
    random = os.urandom
    wall0, busy0 = other_cpu()
    cpu0 = time.process_time()
    results: dict[str, Any] = {"runs": runs, "deck": DECK, "holders": 2}

    # The ordinary mode's cost of one hand: the commitment and the derivation.
    seed = os.urandom(45)
    results["baseline_ordinary_hand"] = summary(
        cpu(lambda: (commit(DECK, "b-1", seed), derive_deck(DECK, "b-1", seed, [b"alice"])), runs * 20)
    )

    # One 52-card shuffle: the shuffle itself, its proof, its check.
    holders = [new_holder(spec, "bench-1", k, random) for k in range(2)]
    ctx = HandContext(
        spec, "bench-1", tuple(h.record.key for h in holders), tuple(h.record.commitment for h in holders)
    )
    d0 = initial_deck(spec)
    psi0, rs0 = (
        permutation(spec, "bench-1", 0, holders[0].seed),
        randomness(spec, "bench-1", 0, holders[0].seed),
    )
    d1 = shuffle_deck(d0, psi0, rs0, ctx.joint_key)
    proof0 = prove_shuffle(ctx, 0, d0, d1, psi0, rs0, random)
    record0 = sign_shuffle(ctx, 0, d0, d1, proof0, holders[0].x, random)
    psi1, rs1 = (
        permutation(spec, "bench-1", 1, holders[1].seed),
        randomness(spec, "bench-1", 1, holders[1].seed),
    )
    d2 = shuffle_deck(d1, psi1, rs1, ctx.joint_key)
    encoded = record0.encode()
    results["shuffle_52"] = {
        "derive_psi_and_r": summary(
            cpu(
                lambda: (
                    permutation(spec, "bench-1", 1, holders[1].seed),
                    randomness(spec, "bench-1", 1, holders[1].seed),
                ),
                runs,
            )
        ),
        "reencrypt": summary(cpu(lambda: shuffle_deck(d1, psi1, rs1, ctx.joint_key), runs)),
        "prove": summary(cpu(lambda: prove_shuffle(ctx, 1, d1, d2, psi1, rs1, random), runs)),
        "verify": summary(cpu(lambda: verify_shuffle(ctx, 0, d0, d1, proof0), runs)),
        "decode_fresh_verify_and_signature": summary(cpu(lambda: _check_record(ctx, d0, encoded), runs)),
    }

    # A 9-seat hold'em hand, per party. Shuffles are precomputed (a warm pool): the hand's path
    # is each holder's 18 sealed hole-card shares and 5 board shares, and each seat's opening.
    seats = [os.urandom(32) for _ in range(SEATS)]
    seat_keys = [seat_public_key(s) for s in seats]
    hole = [(seat, seat * HOLE + i) for seat in range(SEATS) for i in range(HOLE)]
    board = list(range(SEATS * HOLE, SEATS * HOLE + BOARD))
    final = d2

    def holder_hand_path(k: int) -> list[bytes]:
        x = holders[k].x
        sealed = []
        for seat, p in hole:
            share = make_share(ctx, p, k, x, final[p], random).encode()
            sealed.append(seal_share(spec, "bench-1", p, k, share, seat_keys[seat], random))
        for p in board:
            make_share(ctx, p, k, x, final[p], random)
        return sealed

    sealed = {k: holder_hand_path(k) for k in range(2)}

    def seat_opens(seat: int) -> list[int]:
        cards = []
        for i in range(HOLE):
            p = seat * HOLE + i
            shares = []
            for k in range(2):
                blob = open_sealed_share(spec, "bench-1", p, k, sealed[k][seat * HOLE + i], seats[seat])
                share = Share.decode(blob, "share")
                verify_share(ctx, p, k, final[p], share)
                shares.append(share)
            cards.append(open_card(ctx, p, final[p], shares))
        return cards

    def holder_offline(k: int) -> None:
        """A holder's work off the hand's path: key, PoP, verify earlier shuffles, its shuffle."""
        h = new_holder(spec, "bench-2", k, random)
        before = d0 if k == 0 else d1
        if k > 0:
            _check_record(ctx, d0, encoded)
        psi, rs = permutation(spec, "bench-2", k, h.seed), randomness(spec, "bench-2", k, h.seed)
        after = shuffle_deck(before, psi, rs, ctx.joint_key)
        proof = prove_shuffle(ctx, k, before, after, psi, rs, random)
        sign_shuffle(ctx, k, before, after, proof, h.x, random)

    hand = codeal_local(DECK, "bench-3", 2, range(SEATS * HOLE + BOARD), random)
    hand_proof = {
        "keys": [k.hex() for k in hand.keys],
        "shuffles": [s.hex() for s in hand.shuffles],
        "dealt": [
            {"position": d.position, "card": d.card, "shares": [s.hex() for s in d.shares]}
            for d in hand.dealt
        ],
        "seeds": [s.hex() for s in hand.seeds or ()],
    }
    results["holdem_9_seats"] = {
        "dealer_offline_pool": summary(cpu(lambda: holder_offline(0), max(5, runs // 3))),
        "codealer_offline_pool": summary(cpu(lambda: holder_offline(1), max(5, runs // 3))),
        "each_holder_hand_path_18_sealed_plus_5_board": summary(cpu(lambda: holder_hand_path(1), runs)),
        "one_seat_opens_its_2_cards": summary(cpu(lambda: seat_opens(4), runs)),
        "verify_whole_hand_after_reveal": summary(cpu(lambda: verify_hand(hand), max(5, runs // 3))),
    }
    results["sizes_bytes"] = {
        "key_record": len(hand.keys[0]),
        "shuffle_proof_52": len(proof0.encode()),
        "shuffle_record_52": len(encoded),
        "share": len(hand.dealt[0].shares[0]),
        "sealed_share": len(sealed[0][0]),
        "hand_binary_9_seats": sum(map(len, hand.keys))
        + sum(map(len, hand.shuffles))
        + sum(len(s) for d in hand.dealt for s in d.shares)
        + sum(map(len, hand.seeds or ())),
        "hand_proof_json_hex_9_seats": len(json.dumps(hand_proof)),
    }
    wall1, busy1 = other_cpu()
    own = time.process_time() - cpu0
    ticks = os.sysconf("SC_CLK_TCK")
    results["other_processes_cpu_share"] = round(max(0.0, (busy1 - busy0) / ticks - own) / (wall1 - wall0), 2)
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


def _check_record(ctx: HandContext, before: Any, data: bytes) -> None:
    record = ShuffleRecord.decode(data, 52, 0)
    check_fresh(before, record.deck, 0)
    verify_shuffle(ctx, 0, before, record.deck, record.proof)
    verify_signature(ctx, before, record)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
