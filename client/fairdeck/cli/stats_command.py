"""``fairdeck stats``: the argument parser, and the check for the ``stats`` extra.

This module imports nothing outside the standard library and fairdeck's base
dependencies, so ``fairdeck`` works without numpy; only running ``fairdeck stats`` needs numpy, scipy and
matplotlib (``pip install 'fairdeck[stats]'``), and says so when they are
missing. The work is in ``fairdeck.cli.stats_run``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from fairdeck.cli import cli_credentials, numbers, progress
from fairdeck.core.decks import SPEC_NAMES

EXTRA = "pip install 'fairdeck[stats]'"
NEEDS = ("numpy", "scipy", "matplotlib")


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError("must be between 0 and 1")
    return value


def _seed_bits(text: str) -> int:
    value = _positive(text)
    if value > 32:
        raise argparse.ArgumentTypeError("must be 1..32")
    return value


def missing_dependencies() -> list[str]:
    """The ``stats`` extra's packages that cannot be imported."""
    missing = []
    for name in NEEDS:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def cmd_stats(args: argparse.Namespace) -> int:
    missing = missing_dependencies()
    if missing:
        print(
            f"fairdeck stats needs {', '.join(NEEDS)}; missing: {', '.join(missing)}. "
            f"Install them with: {EXTRA}",
            file=sys.stderr,
        )
        return 2
    from fairdeck.cli.stats_run import run

    return run(args)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stats = sub.add_parser(
        "stats",
        help="deal many decks, test them and the known-broken shuffles, write an HTML report",
        description="Deal N decks through fairdeck's derivation (or a live dealer), run the statistical "
        "tests on them and, at the same N, on every known-broken shuffle, and write an HTML report with "
        "charts. Exit status: 0 OK (ours passes every test and every broken shuffle is caught); 1 FAILED "
        "(ours is rejected by a test, or with --target a dealt hand did not verify); "
        "3 INCONCLUSIVE at this N (ours passes, but a broken shuffle went uncaught, so a larger -n "
        "is needed to show the tests can see its defect, or a test with under 5 decks expected per "
        "cell, too few to trust, would have rejected ours); 2 bad arguments or the stats extra missing.",
    )
    stats.add_argument(
        "-n",
        "--decks",
        type=numbers.whole(1, numbers.MAX_DECKS),
        default=1_000_000,
        metavar="N",
        help="decks per source (default 1,000,000)",
    )
    stats.add_argument("--deck", default="standard", choices=SPEC_NAMES, help="deck spec (default standard)")
    stats.add_argument(
        "--small-decks",
        type=numbers.whole(1, numbers.MAX_DECKS),
        default=None,
        metavar="N",
        help="decks per 3/4/5-card permutation test (default: N)",
    )
    stats.add_argument(
        "--seed", default="1", help="run seed: the decks are a function of it (default %(default)s)"
    )
    stats.add_argument(
        "--out", default="fairdeck-stats", metavar="DIR", help="report directory (default %(default)s)"
    )
    stats.add_argument(
        "--workers",
        type=numbers.whole(1, numbers.MAX_PROCESSES),
        default=min(os.cpu_count() or 1, numbers.MAX_PROCESSES),
        metavar="K",
        help="worker processes (default: CPUs)",
    )
    stats.add_argument(
        "--alpha", type=_alpha, default=0.01, help="family-wise error rate (default %(default)s)"
    )
    stats.add_argument(
        "--controls",
        default="all",
        metavar="NAMES",
        help="'all' (default), 'none', or comma-separated control names",
    )
    stats.add_argument(
        "--seed-bits",
        type=_seed_bits,
        default=32,
        metavar="B",
        help="random bits given to the seeded_32bit control "
        "(default 32; fewer show its duplicates at a smaller N)",
    )
    stats.add_argument("--json", action="store_true", help="print the results as JSON")
    progress.add_argument(stats)
    dealer = stats.add_argument_group("a live dealer instead of the in-process derivation")
    dealer.add_argument(
        "--target",
        action="append",
        metavar="HOST:PORT",
        help="deal through this dealer; repeat for replicas. Every sampled hand is really dealt and closed: "
        "each adds a commit and a reveal to the dealer's live transparency log, for good (2 x N entries), "
        "so point it at a test dealer, not a production one",
    )
    dealer.add_argument(
        "--timeout", type=numbers.seconds(numbers.DAY), default=30.0, help="per-call deadline in seconds"
    )
    cli_credentials.add_arguments(dealer)
    stats.set_defaults(handler=cmd_stats)
