"""Fairness-core benchmark: a whole secure hand against the common shuffles.

Everything is measured in one process, side by side: each round times every
method, in ~10 ms slices that are interleaved across all methods (in a
rotated order, so no method always runs first), and the ratios are taken
within a round, so slow phases of a noisy VM hit
numerator and denominator alike. We report the median and the min/max of the
per-round ratios, and the median decks per second.

OURS is the complete per-hand work the dealer does for a fresh hand:

    seed = secrets.token_bytes(plan.seed_bytes)            # fresh seed from the OS
    commit("standard", hand_id, seed)                      # the SHA-256 commitment
    derive_deck("standard", hand_id, seed)                 # SHAKE-256 stream, rejection, shuffle

with the fixed hand id ``HAND_ID`` ("h1") and no client seeds.

Run:  .venv/bin/python bench/core_bench.py            (about a minute)
      .venv/bin/python bench/core_bench.py --quick    (a few seconds)
      .venv/bin/python bench/core_bench.py --json     (machine-readable, on stdout)
"""

from __future__ import annotations

import argparse
import datetime
import gc
import hashlib
import json
import os
import platform
import random
import secrets
import statistics
import sys
import time
from collections.abc import Callable

from fairdeck.core.commitment import commit
from fairdeck.core.derivation import Stream, derive_deck, plan
from fairdeck.core.encoding import lp, u32

HAND_ID = "h1"
VERSION = "fairdeck-v1"
BAR_RANDOM = 0.8
"""OURS must take at most this fraction of the time of random.shuffle."""
BAR_SYSTEM = 0.12
"""OURS must take at most this fraction of the time of SystemRandom().shuffle."""
OTHER_DECKS = ("jokers", "short", "shoe-6", "shoe-8")


# -- the per-swap alternative (for comparison only; not the spec) ----------------------


def _per_swap_tables(n: int) -> list[tuple[int, int, int, int]]:
    """For i from n-1 down to 1: (i, bound i+1, bits of i, mask)."""
    return [(i, i + 1, i.bit_length(), (1 << i.bit_length()) - 1) for i in range(n - 1, 0, -1)]


def make_per_swap_bytes(deck: str) -> Callable[[str, bytes], tuple[int, ...]]:
    """Durstenfeld with one rejection-sampled j per swap, byte-granular reads.

    For each i from n-1 down to 1: read ceil(bitlen(i)/8) bytes of the same
    SHAKE-256 stream, keep the low bitlen(i) bits, accept when <= i.
    """
    p = plan(VERSION, deck)
    cards = list(p.spec.card_ids)
    steps = [(i, bound, (bits + 7) // 8, mask) for i, bound, bits, mask in _per_swap_tables(len(cards))]
    prefix, deck_field, no_clients = p.stream_prefix, p.deck_field, u32(0)
    frombytes = int.from_bytes

    def derive(hand_id: str, seed: bytes) -> tuple[int, ...]:
        read = Stream(prefix, deck_field + lp(hand_id.encode("ascii")) + lp(seed) + no_clients).read
        a = cards[:]
        for i, bound, nbytes, mask in steps:
            j = frombytes(read(nbytes), "big") & mask
            while j >= bound:
                j = frombytes(read(nbytes), "big") & mask
            a[i], a[j] = a[j], a[i]
        return tuple(a)

    return derive


def make_per_swap_bits(deck: str) -> Callable[[str, bytes], tuple[int, ...]]:
    """Durstenfeld with one rejection-sampled j per swap, bit-exact reads.

    Each attempt consumes exactly bitlen(i) bits of the stream, most
    significant first; the stream is pulled a 64-byte block at a time.
    """
    p = plan(VERSION, deck)
    cards = list(p.spec.card_ids)
    steps = _per_swap_tables(len(cards))
    prefix, deck_field, no_clients = p.stream_prefix, p.deck_field, u32(0)
    frombytes = int.from_bytes

    def derive(hand_id: str, seed: bytes) -> tuple[int, ...]:
        read = Stream(prefix, deck_field + lp(hand_id.encode("ascii")) + lp(seed) + no_clients).read
        acc = frombytes(read(64), "big")
        avail = 512
        a = cards[:]
        for i, bound, bits, mask in steps:
            while True:
                if avail < bits:
                    acc = ((acc & ((1 << avail) - 1)) << 512) | frombytes(read(64), "big")
                    avail += 512
                avail -= bits
                j = (acc >> avail) & mask
                if j < bound:
                    break
            a[i], a[j] = a[j], a[i]
        return tuple(a)

    return derive


# -- the measured work: each maker returns f(k) that does k decks ------------------------


def ours_full(deck: str) -> Callable[[int], None]:
    p = plan(VERSION, deck)
    nbytes, token = p.seed_bytes, secrets.token_bytes

    def run(k: int) -> None:
        for _ in range(k):
            seed = token(nbytes)
            commit(deck, HAND_ID, seed)
            derive_deck(deck, HAND_ID, seed)

    return run


def _seed_pool(deck: str) -> list[bytes]:
    """1024 random seeds, cycled by the derive-only loops: a realistic mix of
    accepted and rejected first attempts, without the OS call in the loop."""
    n = plan(VERSION, deck).seed_bytes
    return [secrets.token_bytes(n) for _ in range(1024)]


def ours_derive_only(deck: str) -> Callable[[int], None]:
    seeds = _seed_pool(deck)

    def run(k: int) -> None:
        for i in range(k):
            derive_deck(deck, HAND_ID, seeds[i & 1023])

    return run


def per_swap_full(
    deck: str, maker: Callable[[str], Callable[[str, bytes], tuple[int, ...]]]
) -> Callable[[int], None]:
    p = plan(VERSION, deck)
    nbytes, token = p.seed_bytes, secrets.token_bytes
    derive = maker(deck)

    def run(k: int) -> None:
        for _ in range(k):
            seed = token(nbytes)
            commit(deck, HAND_ID, seed)
            derive(HAND_ID, seed)

    return run


def per_swap_derive_only(
    deck: str, maker: Callable[[str], Callable[[str, bytes], tuple[int, ...]]]
) -> Callable[[int], None]:
    seeds = _seed_pool(deck)
    derive = maker(deck)

    def run(k: int) -> None:
        for i in range(k):
            derive(HAND_ID, seeds[i & 1023])

    return run


def parts(deck: str) -> dict[str, Callable[[int], None]]:
    """OURS split into its steps (same seed each time), to show where a hand's time goes."""
    p = plan(VERSION, deck)
    nbytes, token = p.seed_bytes, secrets.token_bytes
    seed = _accepted_seed(deck)
    message = p.deck_field + lp(HAND_ID.encode("ascii")) + lp(seed) + u32(0)
    stream_input = p.stream_prefix + bytes(8) + message
    shuffler = p.shuffler
    first = hashlib.shake_256(stream_input).digest(64)
    index = int.from_bytes(first[: shuffler.width], "big") & shuffler.mask
    cards, permute, shake = p.spec.card_ids, shuffler.permute, hashlib.shake_256

    def seed_only(k: int) -> None:
        for _ in range(k):
            token(nbytes)

    def commit_only(k: int) -> None:
        for _ in range(k):
            commit(deck, HAND_ID, seed)

    def plan_derive(k: int) -> None:
        for _ in range(k):
            p.derive(HAND_ID, seed, ())

    def shake_only(k: int) -> None:
        for _ in range(k):
            shake(stream_input).digest(64)

    def permute_only(k: int) -> None:
        for _ in range(k):
            permute(index, list(cards))

    return {
        "  part: token_bytes": seed_only,
        "  part: commit": commit_only,
        "  part: Plan.derive (no checks)": plan_derive,
        "  part: SHAKE-256 block": shake_only,
        "  part: permute (accepted idx)": permute_only,
    }


def _accepted_seed(deck: str) -> bytes:
    """A seed whose attempt 0 is accepted (the common case, about 3 hands in 4 for standard)."""
    p = plan(VERSION, deck)
    shuffler = p.shuffler
    while True:
        seed = secrets.token_bytes(p.seed_bytes)
        message = p.deck_field + lp(HAND_ID.encode("ascii")) + lp(seed) + u32(0)
        first = hashlib.shake_256(p.stream_prefix + bytes(8) + message).digest(64)
        if int.from_bytes(first[: shuffler.width], "big") & shuffler.mask < shuffler.limit:
            return seed


def mt_shuffle(n: int) -> Callable[[int], None]:
    items = list(range(n))
    shuffle = random.shuffle

    def run(k: int) -> None:
        for _ in range(k):
            shuffle(items)

    return run


def system_shuffle(n: int) -> Callable[[int], None]:
    items = list(range(n))
    shuffle = random.SystemRandom().shuffle

    def run(k: int) -> None:
        for _ in range(k):
            shuffle(items)

    return run


def numpy_permutation(n: int) -> Callable[[int], None] | None:
    try:
        import numpy as np
    except ImportError:
        return None
    permutation = np.random.default_rng().permutation

    def run(k: int) -> None:
        for _ in range(k):
            permutation(n)

    return run


# -- the harness --------------------------------------------------------------------------


def _time(run: Callable[[int], None], k: int) -> float:
    """Seconds per deck for k decks (GC off during the loop, as timeit does)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        run(k)
        return (time.perf_counter() - t0) / k
    finally:
        if gc_was:
            gc.enable()


def _calibrate(run: Callable[[int], None], target_s: float) -> int:
    run(50)  # warm caches (plans, compiled permute, tail table)
    per = min(_time(run, 200) for _ in range(3))
    return max(50, int(target_s / per))


def _sanity() -> None:
    """The comparison variants must produce real permutations (and ours the spec's)."""
    seed = bytes(range(45))
    for maker in (make_per_swap_bytes, make_per_swap_bits):
        deck = maker("standard")(HAND_ID, seed)
        assert sorted(deck) == list(range(52)), maker.__name__
    assert sorted(derive_deck("standard", HAND_ID, seed)) == list(range(52))


SLICE_S = 0.01
"""Each method's share of a round is cut into slices of about this long, and the
slices of all methods are interleaved, so a noisy moment of the VM lands on
every method of the round instead of on one of them."""


def measure(
    methods: dict[str, Callable[[int], None]], rounds: int, target_s: float
) -> dict[str, list[float]]:
    """Seconds per deck, per method, per round; methods finely interleaved and rotated."""
    slices = max(1, round(target_s / SLICE_S))
    counts = {name: max(1, _calibrate(run, target_s) // slices) for name, run in methods.items()}
    names = list(methods)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        order = names[shift:] + names[:shift]
        total = dict.fromkeys(names, 0.0)
        for _ in range(slices):
            for name in order:
                total[name] += _time(methods[name], counts[name])
        for name in names:
            samples[name].append(total[name] / slices)
    return samples


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine so far (Linux /proc/stat; 0 elsewhere)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except OSError:
        return 0.0
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def _ratio_stats(num: list[float], den: list[float]) -> dict[str, float]:
    ratios = [a / b for a, b in zip(num, den, strict=True)]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def _spread(xs: list[float]) -> float:
    """(max - min) / median of one method's per-round times: how noisy it was."""
    return (max(xs) - min(xs)) / statistics.median(xs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=21, help="interleaved rounds (default 21)")
    ap.add_argument("--target", type=float, default=0.15, help="seconds per method per round (default 0.15)")
    ap.add_argument("--quick", action="store_true", help="5 rounds of 0.03 s: a smoke run")
    ap.add_argument("--json", action="store_true", help="print JSON results instead of the table")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.target = 5, 0.03
    _sanity()

    std = "standard"
    methods: dict[str, Callable[[int], None]] = {
        "ours": ours_full(std),
        "random.shuffle": mt_shuffle(52),
        "SystemRandom.shuffle": system_shuffle(52),
    }
    np_run = numpy_permutation(52)
    if np_run is not None:
        methods["numpy.permutation"] = np_run
    methods |= {
        "per-swap bytes (full hand)": per_swap_full(std, make_per_swap_bytes),
        "per-swap bits (full hand)": per_swap_full(std, make_per_swap_bits),
        "ours derive only": ours_derive_only(std),
        "per-swap bytes derive only": per_swap_derive_only(std, make_per_swap_bytes),
        "per-swap bits derive only": per_swap_derive_only(std, make_per_swap_bits),
    }
    methods |= parts(std)
    for deck in OTHER_DECKS:
        size = plan(VERSION, deck).spec.size
        methods[f"ours {deck}"] = ours_full(deck)
        methods[f"random.shuffle n={size}"] = mt_shuffle(size)

    t0, m0, c0 = time.perf_counter(), _machine_busy(), time.process_time()
    samples = measure(methods, args.rounds, args.target)
    elapsed = time.perf_counter() - t0
    other = (_machine_busy() - m0 - (time.process_time() - c0)) / elapsed

    def rel(name: str, base: str) -> dict[str, float]:
        return _ratio_stats(samples[name], samples[base])

    rows = []
    for name, xs in samples.items():
        med = statistics.median(xs)
        row = {
            "method": name,
            "us_per_deck_median": med * 1e6,
            "us_per_deck_min": min(xs) * 1e6,
            "decks_per_s_median": 1 / med,
            "spread": _spread(xs),
        }
        if name in ("ours", "SystemRandom.shuffle", "numpy.permutation") or name.startswith("per-swap"):
            if "derive only" in name:
                row["vs"] = "ours derive only"
                row["ratio"] = rel(name, "ours derive only")
            elif name != "random.shuffle":
                row["vs"] = "random.shuffle"
                row["ratio"] = rel(name, "random.shuffle")
        elif name.startswith("ours ") and name != "ours derive only":
            deck = name[5:]
            base = f"random.shuffle n={plan(VERSION, deck).spec.size}"
            row["vs"] = base
            row["ratio"] = rel(name, base)
        rows.append(row)

    vs_random = rel("ours", "random.shuffle")
    vs_system = rel("ours", "SystemRandom.shuffle")
    per_swap_vs_ours = {
        name: rel(name, "ours" if "full hand" in name else "ours derive only")
        for name in samples
        if name.startswith("per-swap")
    }
    bars = [
        {
            "bar": f"ours <= {BAR_RANDOM}x random.shuffle (time)",
            "ratio": vs_random,
            "limit": BAR_RANDOM,
            "pass": vs_random["median"] <= BAR_RANDOM,
        },
        {
            "bar": f"ours <= {BAR_SYSTEM}x SystemRandom().shuffle (time)",
            "ratio": vs_system,
            "limit": BAR_SYSTEM,
            "pass": vs_system["median"] <= BAR_SYSTEM,
        },
    ]
    result = {
        "benchmark": "core_bench",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "hand_id": HAND_ID,
        "rounds": args.rounds,
        "target_s_per_method_round": args.target,
        "elapsed_s": elapsed,
        "other_cpu_util": other,
        "loadavg_end": os.getloadavg()[0],
        "rows": rows,
        "per_swap_time_vs_ours": per_swap_vs_ours,
        "bars": bars,
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        _print(result)
    return 0 if all(b["pass"] for b in bars) else 1


def _print(result: dict) -> None:  # type: ignore[type-arg]
    print(
        f"core_bench  {result['date']}  Python {result['python']} ({result['implementation']}, "
        f"{result['machine']}, {result['cpus']} CPUs)"
    )
    print(
        f"{result['rounds']} interleaved rounds, "
        f"~{result['target_s_per_method_round']} s per method per round, "
        f"hand id {result['hand_id']!r}, {result['elapsed_s']:.0f} s total"
    )
    print(
        f"other processes used {result['other_cpu_util']:.0%} of a CPU on average meanwhile "
        f"(load average at the end {result['loadavg_end']:.2f})"
    )
    print()
    head = (
        f"{'method':<32} {'us/deck med':>11} {'min':>7} {'decks/s':>9} {'spread':>7}"
        "   time ratio med [min..max] vs"
    )
    print(head)
    print("-" * len(head) + "-" * 20)
    for row in result["rows"]:
        line = (
            f"{row['method']:<32} {row['us_per_deck_median']:>11.2f} {row['us_per_deck_min']:>7.2f} "
            f"{row['decks_per_s_median']:>9.0f} {row['spread']:>6.0%}"
        )
        if "ratio" in row:
            r = row["ratio"]
            line += f"   {r['median']:.3f} [{r['min']:.3f}..{r['max']:.3f}] vs {row['vs']}"
        print(line)
    print()
    print("per-swap rejection vs ours (time ratio, >1 means per-swap is slower):")
    for name, r in result["per_swap_time_vs_ours"].items():
        print(f"  {name:<32} {r['median']:.2f}x  [{r['min']:.2f}..{r['max']:.2f}]")
    print()
    for bar in result["bars"]:
        r = bar["ratio"]
        verdict = "PASS" if bar["pass"] else "MISS"
        print(f"{verdict}  {bar['bar']}: median {r['median']:.3f} (min {r['min']:.3f}, max {r['max']:.3f})")
    print("spread = (max - min) / median of the per-round times of that method (noise indicator)")


if __name__ == "__main__":
    sys.exit(main())
