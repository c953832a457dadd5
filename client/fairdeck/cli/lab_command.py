"""``fairdeck lab collect`` and ``fairdeck lab test``: the certification kit's command line.

``collect`` imports only the core (and the SDK with ``--target``); ``test`` needs the ``lab``
extra (numpy, scipy; the same as ``stats``) and says how to install it when missing.
Exit status of ``collect``: 0 collected and verified, 1 a hand, the key or the log did not verify
(or it stopped, resumable), 2 bad usage, a token that cannot deal, or a directory that cannot be
collected into (full, unwritable, another collector's), 130 stopped at once by a second Ctrl-C.
``test`` exits like ``stats``: 0 OK, 1 FAILED (or a collection refused), 3 INCONCLUSIVE, 2 bad
usage, a missing tool or no room for the report, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
from pathlib import Path
from types import FrameType

from fairdeck.cli import cli_credentials, numbers, progress
from fairdeck.cli.stats_command import _alpha, _positive, _seed_bits  # the same parsers as stats
from fairdeck.client.exceptions import FairdeckError, PermissionDenied, Unauthenticated
from fairdeck.core.decks import SPEC_NAMES
from fairdeck.core.errors import VerificationError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)i?[bB]?\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def size(text: str) -> int:
    """A byte count: ``1G``, ``64M``, ``1000000``, ``1.5GiB`` (binary units)."""
    m = _SIZE.match(text.replace("_", "").replace(",", ""))
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (say 64M, 1G, ...)")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]  # 400 digits: inf, refused below
    if not 1 <= value <= numbers.MAX_RAW_BYTES:
        raise argparse.ArgumentTypeError(f"must be from 1 byte to 1024T, not {text!r}")
    return int(value)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 86_400:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be more than 0 and less than a day, got {text}")
    return value


def _nist_bits(text: str) -> int:
    from fairdeck.lab.nist import MIN_BITS

    value = _positive(text)
    if not MIN_BITS <= value <= numbers.MAX_NIST_BITS:
        raise argparse.ArgumentTypeError(
            f"from {MIN_BITS:,} (what Maurer's universal test needs; SP 800-22 uses 1,000,000) to "
            f"{numbers.MAX_NIST_BITS:,} (the spectral test's memory), not {text!r}"
        )
    return value


class _Interrupt:
    """Ctrl-C or SIGTERM ends the collection after the batch in flight, leaving it resumable."""

    def __init__(self) -> None:
        self.asked = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True
        print("\nfairdeck lab collect: stopping after this batch (again to stop now)", file=sys.stderr)


def _stop_now(signum: int, frame: FrameType | None) -> None:
    """A second Ctrl-C (or SIGTERM) that lands after the stopped batch, while the command winds
    down (its return, tqdm's exit hooks): the stop was asked and everything kept is on disk, so
    exit 130 at once. Python's own handler would raise KeyboardInterrupt wherever the interpreter
    is, an exit hook included, and print a traceback there."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(130)


REDACTED = "<redacted>"


def recorded_command(argv: list[str], secrets: list[str | None]) -> list[str]:
    """``argv`` as the manifest records it: every secret's text replaced, however the option that
    carried it was spelled (``--token X``, ``--token=X``, an abbreviation)."""
    shown = []
    for arg in argv:
        for secret in secrets:
            if secret:
                arg = arg.replace(secret, REDACTED)
        shown.append(arg)
    return shown


def cmd_collect(args: argparse.Namespace) -> int:
    from fairdeck.lab import collection, formats
    from fairdeck.log import safefiles
    from fairdeck.log.note import NoteError, Verifier

    out = Path(args.out)
    source: collection.Source
    dealer = None
    if args.target:
        if not args.key:
            print(
                "fairdeck lab collect: --target needs --key (the log's verifier key, from the operator: "
                "`fairdeck key`), to check every hand against the signed log",
                file=sys.stderr,
            )
            return 2
        try:
            text = Path(args.key[1:]).read_text().strip() if args.key.startswith("@") else args.key
            key = Verifier.parse(text.splitlines()[0] if text else "")
            c = cli_credentials.from_args(args)
        except (OSError, ValueError, NoteError) as e:
            print(f"fairdeck lab collect: bad --key or credentials: {e}", file=sys.stderr)
            return 2
        from fairdeck.lab.live import LiveDealer

        dealer = LiveDealer(
            args.target,
            key,
            credentials=c.channel,
            api_token=c.api_token,
            insecure=c.insecure,
            timeout=args.timeout,
        )
        source = dealer
        name = f"dealer {key.to_string()}"
    else:
        source = collection.InProcess(run="")
        name = "in-process"
    plan = collection.CollectionPlan(deck=args.deck, raw_bytes=args.raw_bytes, source=name, batch=args.batch)
    if isinstance(source, collection.InProcess):
        source.run = plan.run
    show = progress.wanted(args.progress, stream=sys.stderr, json=False)
    interrupt = _Interrupt()
    previous = signal.signal(signal.SIGINT, interrupt), signal.signal(signal.SIGTERM, interrupt)
    bar = progress.bar(total=args.raw_bytes, desc="lab collect", unit="B", stream=sys.stderr, enabled=show)
    bar.unit_scale = True
    hold = contextlib.ExitStack()
    try:
        if dealer is not None:
            dealer.check_key()
        collection.check_directory(out)
        out.mkdir(parents=True, exist_ok=True)
        hold.enter_context(collection.locked(out))  # from the first batch to the manifest
        state = collection.read_state(out)
        if state is not None and not plan.same_as(state):
            plan.run = state["run"]
            bar.update(state["sizes"][formats.RAW] if state["sizes"] else 0)
            if isinstance(source, collection.InProcess):
                source.run = plan.run

        def moved(hands: int, raw: int) -> None:
            bar.update(raw - bar.n)
            bar.set_postfix_str(f"{hands:,} hands", refresh=False)

        state = collection.collect(out, source, plan, progress=moved, should_stop=lambda: interrupt.asked)
        bar.close()
        if state["sizes"][formats.RAW] < plan.raw_bytes:
            print(
                f"fairdeck lab collect: stopped at {state['hands']:,} hands; "
                "run the same command again to resume",
                file=sys.stderr,
            )
            return 1
        log_check = None
        if dealer is not None:
            from fairdeck.lab.live import check_log

            with progress.bar(
                total=None, desc="lab collect: log", unit=" entries", stream=sys.stderr, enabled=show
            ) as shown:
                log_check = check_log(dealer, out, progress=lambda k: shown.update(k))
        argv = recorded_command(list(args.argv), [args.token])
        manifest = collection.finish(out, state, argv=argv, source=source, log_check=log_check)
    except KeyboardInterrupt:
        print(
            "fairdeck lab collect: stopped at once (the batch in flight is dropped); "
            "run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    except collection.KeyMismatch as e:
        dealt = f"{e.dealt:,} hands were dealt, and not collected" if e.dealt else "nothing was dealt"
        print(
            f"fairdeck lab collect: the dealer's signed checkpoint does not verify under --key ({e.detail}); "
            f"give the key of this dealer's log (`fairdeck key` on its host). {dealt}",
            file=sys.stderr,
        )
        return 1
    except collection.CollectionError as e:
        print(f"fairdeck lab collect: {e}", file=sys.stderr)
        return 2
    except safefiles.UnsafeFile as e:
        print(
            f"fairdeck lab collect: {e}: the collection is damaged; collect into a new directory",
            file=sys.stderr,
        )
        return 2
    except VerificationError as e:
        print(f"fairdeck lab collect: FAILED at step {e.step}: {e.detail}", file=sys.stderr)
        return 1
    except (PermissionDenied, Unauthenticated) as e:
        print(
            f"fairdeck lab collect: the dealer refused the call ({e}): collecting deals hands, which needs "
            f"a dealer token (--token or ${cli_credentials.TOKEN_ENV}); an auditor token only reads the log",
            file=sys.stderr,
        )
        return 2
    except FairdeckError as e:
        print(
            f"fairdeck lab collect: the dealer could not be used ({e}); the collection stays resumable: "
            "run the same command again",
            file=sys.stderr,
        )
        return 1
    except OSError as e:
        print(
            f"fairdeck lab collect: cannot write in {out} ({e.strerror or e}); free space or make it "
            "writable, then run the same command again: the collection resumes after its last whole batch",
            file=sys.stderr,
        )
        return 2
    finally:
        hold.close()
        bar.close()
        after = (_stop_now, _stop_now) if interrupt.asked else previous
        signal.signal(signal.SIGINT, after[0])
        signal.signal(signal.SIGTERM, after[1])
        if dealer is not None:
            dealer.close()
    raw = next(f for f in manifest["files"] if f["path"] == formats.RAW)
    print(
        f"fairdeck lab collect: {manifest['hands']:,} {manifest['deck']} hands, "
        f"{raw['bytes']:,} bytes of raw output, {manifest['seconds collecting']:.1f} s"
    )
    if log_check is not None:
        if not log_check["ok"]:
            for problem in log_check["problems"]:
                print(f"FAILED: {problem}")
            return 1
        print(
            f"log: {log_check['entries_checked']:,} entries checked under the signed checkpoint "
            f"of tree size {log_check['tree_size']:,}"
        )
    print(f"manifest: {out / collection.MANIFEST}")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    from fairdeck.cli.stats_command import missing_dependencies

    missing = missing_dependencies()
    if missing:
        print(
            f"fairdeck lab test needs numpy, scipy and matplotlib; missing: {', '.join(missing)}. "
            "Install them with: pip install 'fairdeck[lab]'",
            file=sys.stderr,
        )
        return 2
    from fairdeck.cli.lab_run import run

    status: int = run(args)
    return status


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lab = sub.add_parser(
        "lab",
        help="the certification kit: collect raw, scaled and final outputs; run the standard batteries",
        description="What an accredited lab asks for (docs/certification.md): `collect` writes the raw RNG "
        "output, the seed source, the scaled output and the dealt decks with a manifest; `test` runs "
        "dieharder, NIST SP 800-22 and fairdeck's own deck tests on them and on known-bad generators.",
    )
    lab_sub = lab.add_subparsers(dest="lab_command", required=True, metavar="STEP")
    collect = lab_sub.add_parser(
        "collect",
        help="deal hands and write their outputs for a lab (resumable)",
        description="Deal hands (in this process, or through a live dealer with --target), verify each, "
        "and write its raw SHAKE-256 blocks, its server seed, its index below n! and swap choices, and "
        "the dealt deck, with a manifest. Run the same command again to resume an interrupted collection.",
    )
    collect.add_argument("--out", required=True, metavar="DIR", help="collection directory")
    collect.add_argument(
        "--raw-bytes",
        type=size,
        default=size("64M"),
        metavar="SIZE",
        help="collect until the raw output holds SIZE (default 64M; 1G for dieharder's whole battery with "
        "psamples cut to fit, 68G for all of them). The collection takes about 13 times SIZE on disk",
    )
    collect.add_argument(
        "--deck", default="standard", choices=SPEC_NAMES, help="deck spec (default standard)"
    )
    collect.add_argument(
        "--batch",
        type=numbers.whole(1, numbers.MAX_BATCH_HANDS),
        default=2_000,
        metavar="N",
        help="hands per batch (default 2,000; at most 100,000, the most one DealHands call deals)",
    )
    progress.add_argument(collect)
    live = collect.add_argument_group("a live dealer instead of this process")
    live.add_argument(
        "--target",
        metavar="HOST:PORT",
        help="deal through this dealer. Every hand is really dealt and closed: each adds two entries to its "
        "transparency log for good, so use a test dealer",
    )
    live.add_argument("--key", metavar="VKEY|@FILE", help="the log's verifier key (needed with --target)")
    live.add_argument("--timeout", type=_seconds, default=60.0, help="per-call deadline in seconds")
    cli_credentials.add_arguments(live)
    collect.set_defaults(handler=cmd_collect)

    test = lab_sub.add_parser(
        "test",
        help="run dieharder, NIST SP 800-22 and the deck tests on a collection and on bad generators",
        description="Run every battery on what `collect` wrote and, at the same volume, on known-bad "
        "generators (a 32-bit LCG, Mersenne Twister low bits scaled by modulo, a stream with one "
        "biased bit), "
        "and write report.html and report.json. Exit status: 0 OK (ours passes, every bad generator "
        "rejected); 1 FAILED (ours rejected, or provenance FAILED); 3 INCONCLUSIVE (a bad generator "
        "escaped, or a test too small to trust would have rejected ours); "
        "2 bad usage, a missing tool, or provenance NOT BOUND to a dealer's signed log "
        "without --statistics-only.",
    )
    test.add_argument("dir", metavar="DIR", help="a collection written by `fairdeck lab collect`")
    test.add_argument("--out", metavar="DIR", default=None, help="report directory (default DIR/report)")
    test.add_argument(
        "--dieharder",
        choices=("full", "quick", "none"),
        default="full",
        help="full: dieharder's whole default battery (-a); quick: a few of its tests; none: skip",
    )
    test.add_argument(
        "--nist-bits",
        type=_nist_bits,
        default=1_000_000,
        metavar="N",
        help="bits per NIST SP 800-22 sequence (default 1,000,000)",
    )
    test.add_argument(
        "--nist-sequences",
        type=numbers.whole(1, numbers.MAX_NIST_SEQUENCES),
        default=100,
        metavar="K",
        help="NIST sequences per source, as many as the raw output holds (default 100)",
    )
    test.add_argument(
        "--alpha", type=_alpha, default=0.01, help="family-wise error rate per battery (default 0.01)"
    )
    test.add_argument("--seed", default="1", help="seed of the bad generators and the deck tests' controls")
    test.add_argument(
        "--seed-bits",
        type=_seed_bits,
        default=32,
        metavar="B",
        help="random bits of the deck tests' seeded_32bit control (as fairdeck stats --seed-bits)",
    )
    test.add_argument(
        "--workers",
        type=numbers.whole(1, numbers.MAX_PROCESSES),
        default=2,
        metavar="K",
        help="dieharder processes at once",
    )
    test.add_argument(
        "--sample",
        type=numbers.whole(1, numbers.MAX_SAMPLE),
        default=None,
        metavar="N",
        help="re-derive every layer of N hands drawn now (default: of every hand); the others are only "
        "hashed",
    )
    test.add_argument(
        "--sample-seed",
        default=None,
        metavar="TEXT",
        help="the draw's seed (default: fresh random, printed in the report): to repeat a draw",
    )
    test.add_argument(
        "--key",
        metavar="VKEY|@FILE",
        help="the dealer's log verifier key, from the operator: the signed checkpoint a live collection "
        "binds to must verify under it (default: the key the manifest names, which proves less)",
    )
    test.add_argument(
        "--statistics-only",
        action="store_true",
        help="test a collection NOT BOUND to a dealer's signed log (offline, or without log/) anyway: "
        "its verdict is on the statistics only, never on a dealer (default: refused, exit 2)",
    )
    test.add_argument("--json", action="store_true", help="print the report as JSON")
    progress.add_argument(test)
    test.set_defaults(handler=cmd_test)
