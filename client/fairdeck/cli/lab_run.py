"""``fairdeck lab test DIR`` once its arguments are parsed: check, run every battery, report (over
``fairdeck.lab``).

Before any test, every file the manifest lists is checked against its size and SHA-256: a
collection that changed since it was written is refused (exit 1, naming the file), so a report
always describes the bytes the manifest names. The bad generators' streams are written next to
the report, the size of ours, and described in it.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fairdeck.cli import progress
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import BLOCK_BYTES
from fairdeck.core.errors import InvalidInput
from fairdeck.core.seeds import server_seed_length
from fairdeck.core.shuffle import shuffler
from fairdeck.lab import battery, dieharder, formats, generators, report
from fairdeck.lab.collection import FORMAT, MANIFEST, sha256_file, version
from fairdeck.stats.analysis import EXIT_STATUS
from fairdeck.stats.sampling import OURS

RAW_OURS, SEEDS_OURS = "ours: raw stream", "ours: seed source"


class Refused(Exception):
    """The collection cannot be tested as it is; the message names the file and why."""


def check_manifest(directory: Path) -> dict[str, Any]:
    """The manifest, once it is one and every file it binds is as it says: the files of a
    collection, each of its size and SHA-256, the fixed-record ones the size its deck and hand
    count give. Refused (naming the file) otherwise."""
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Refused(f"{path} not found: run `fairdeck lab collect --out {directory}` first") from None
    except (OSError, ValueError) as e:
        raise Refused(f"{path} cannot be read: {e}") from None
    damaged = f"{path} is not a whole manifest of a fairdeck lab collection ({FORMAT}); collect again"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise Refused(damaged)
    deck, hands, files = manifest.get("deck"), manifest.get("hands"), manifest.get("files")
    if not isinstance(deck, str) or type(hands) is not int or hands < 0 or not isinstance(files, list):
        raise Refused(damaged)
    try:
        spec = DeckSpec.parse(deck)
    except InvalidInput:
        raise Refused(f"{path} names the deck {deck!r}, which this fairdeck does not know") from None
    listed: dict[str, dict[str, Any]] = {}
    for entry in files:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and type(entry.get("bytes")) is int
            and isinstance(entry.get("sha256"), str)
        ):
            raise Refused(damaged)
        if entry["path"] not in formats.BOUND:
            raise Refused(f"{path} lists {entry['path']}, which is not a file of a collection")
        listed[entry["path"]] = entry
    for name in formats.BOUND:
        if name not in listed:
            raise Refused(f"{directory / name} is not bound by {path} (no size or SHA-256): collect again")
    layout = formats.Layout(spec.size, shuffler(spec.size).width)
    expected = formats.record_sizes(layout, server_seed_length(spec), hands)
    raw = listed[formats.RAW]["bytes"]
    if raw % BLOCK_BYTES or raw < BLOCK_BYTES * hands:
        expected[formats.RAW] = -1
    for name, size in expected.items():
        if listed[name]["bytes"] != size:
            raise Refused(
                f"{directory / name}: the manifest gives {listed[name]['bytes']:,} bytes, which is not "
                f"what {hands:,} {deck} hands take; the manifest does not describe this collection"
            )
    for name in formats.BOUND:
        entry, file = listed[name], directory / name
        if not file.exists():
            raise Refused(f"{file} is missing (the manifest lists it)")
        try:
            digest = sha256_file(file)
        except OSError as e:
            raise Refused(f"{file} cannot be read ({e.strerror or e})") from None
        if file.stat().st_size != entry["bytes"] or not hmac.compare_digest(digest, entry["sha256"]):
            raise Refused(
                f"{file} is not what the manifest says (size or SHA-256 differ): it changed after collect"
            )
    return manifest


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else Path(args.dir) / "report"
    try:
        return _run(args, out)
    except KeyboardInterrupt:
        print("fairdeck lab test: interrupted; no report was written (run it again)", file=sys.stderr)
        return 130
    except OSError as e:
        print(
            f"fairdeck lab test: cannot write the report in {out} ({e.strerror or e}): free space there "
            "or give --out DIR on a disk with room (dieharder's bad generators take 3 times the raw stream)",
            file=sys.stderr,
        )
        return 2


def _run(args: argparse.Namespace, out: Path) -> int:
    began = time.perf_counter()
    started = datetime.now(UTC)
    load_before = _load()
    directory = Path(args.dir)
    try:
        manifest = check_manifest(directory)
        if args.dieharder != "none":
            dieharder.executable()
    except Refused as e:
        print(f"fairdeck lab test: {e}", file=sys.stderr)
        return 1
    except dieharder.DieharderMissing as e:
        print(f"fairdeck lab test: {e}", file=sys.stderr)
        return 2
    deck = manifest["deck"]
    spec = DeckSpec.parse(deck)
    layout = formats.Layout(spec.size, 0)
    raw, seeds = directory / formats.RAW, directory / formats.SEEDS
    size = raw.stat().st_size
    controls_dir = out / "controls"
    out.mkdir(parents=True, exist_ok=True)
    control_files = {}
    for name in generators.GENERATORS if args.dieharder != "none" else ():  # dieharder reads files
        controls_dir.mkdir(exist_ok=True)
        path = controls_dir / f"{name}.bin"
        generators.write(name, path, size, args.seed)
        control_files[name] = path
    show = progress.wanted(args.progress, stream=sys.stderr, json=args.json)
    bar = progress.bar(total=None, desc="lab test", unit=" steps", stream=sys.stderr, enabled=show)

    def step(what: str) -> None:
        bar.set_postfix_str(what, refresh=False)
        bar.update(1)

    sources = {
        RAW_OURS: f"raw/stream.bin, {size:,} bytes: the SHAKE-256 blocks the derivation computed",
        SEEDS_OURS: f"seeds/server-seeds.bin, {seeds.stat().st_size:,} bytes: the server seeds as drawn",
        **{name: f"{generators.DESCRIPTIONS[name]}; {size:,} bytes" for name in generators.GENERATORS},
    }
    batteries = []
    try:
        if args.dieharder != "none":
            batteries.append(
                battery.run_dieharder(
                    {RAW_OURS: raw, SEEDS_OURS: seeds},
                    control_files,
                    which=args.dieharder,
                    alpha=args.alpha,
                    workers=args.workers,
                    progress=step,
                )
            )
        need = args.nist_sequences * args.nist_bits // 8 + 1
        with raw.open("rb") as r, seeds.open("rb") as s:
            ours = {RAW_OURS: r.read(need), SEEDS_OURS: s.read(need)}
        bad = {name: generators.generate(name, min(size, need), args.seed) for name in generators.GENERATORS}
        batteries.append(
            battery.run_nist(
                ours, bad, n=args.nist_bits, sequences=args.nist_sequences, alpha=args.alpha, progress=step
            )
        )
        batteries.append(
            battery.run_decks(
                (directory / formats.DECKS).read_bytes(),
                deck,
                spec.size,
                layout.card_bytes,
                seed=args.seed,
                seed_bits=args.seed_bits,
                alpha=args.alpha,
                workers=args.workers,
                progress=step,
            )
        )
    finally:
        bar.close()
    for b in batteries:
        if b.name.startswith("final outcomes"):
            for control in b.controls:
                sources.setdefault(
                    control, "a known-broken shuffle of fairdeck.stats (fairdeck stats' control)"
                )
    sources[OURS] = "final/decks.bin: the dealt decks, each verified against its commitment"
    total = time.perf_counter() - began
    info = {
        "command": " ".join(["fairdeck", *args.argv]),
        "collection": str(directory),
        "collection manifest": {
            k: manifest.get(k) for k in ("command", "fairdeck", "deck", "hands", "source")
        },
        "dealer key": manifest.get("dealer_key"),
        "fairdeck": version(),
        "dieharder": args.dieharder,
        "NIST": f"up to {args.nist_sequences} sequences of {args.nist_bits:,} bits per source",
        "alpha (per battery)": args.alpha,
        "seed": args.seed,
        "started (UTC)": started.isoformat(timespec="seconds"),
        "seconds": round(total, 1),
        "seconds per battery": {b.name: round(b.seconds, 1) for b in batteries},
        "machine": f"{platform.platform()}; {os.cpu_count()} CPUs",
        "load average before / after": f"{load_before} / {_load()}",
    }
    page = report.write(out, batteries, info, sources)
    verdict = report.overall(batteries)
    if args.json:
        print(json.dumps(report.as_json(batteries, info, sources), indent=2))
    else:
        for b in batteries:
            rejected = "; ".join(
                [f"{s} REJECTED by {', '.join(b.rejected_by(s)[:3])}" for s in b.ours if b.rejected_by(s)]
                + [f"{s} UNTESTED (too short for every test)" for s in b.untested()]
            )
            caught = sum(1 for c in b.controls if b.rejected_by(c))
            escaped = [c for c in b.controls if not b.rejected_by(c)]
            print(
                f"{b.name}: {b.verdict.upper()} ({rejected or 'ours passes'}; {caught} of {len(b.controls)} "
                f"bad generators rejected{'; escaped: ' + ', '.join(escaped) if escaped else ''}; "
                f"{b.seconds:.1f} s)"
            )
        print(f"report: {page}")
        print(verdict.upper())
    return EXIT_STATUS[verdict]
