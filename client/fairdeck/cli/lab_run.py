"""``fairdeck lab test DIR`` once its arguments are parsed: check, run every battery, report (over
``fairdeck.lab``).

Before any test, every file the manifest lists is opened (a regular file, no link followed: the
collection is not ours) and checked against its size, then its SHA-256: a collection that changed
since it was written is refused (exit 1, naming the file). The descriptors stay open, and every
later read goes through them, so a report describes the bytes hashed. Then each layer is
re-derived from the one below it and the binding to the dealer's log checked (``provenance``): a
collection NOT BOUND to it is refused (exit 2) unless the lab asked for ``--statistics-only``.
The report and the bad generators' streams are written under temporary names and renamed.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import platform
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fairdeck.cli import numbers, progress
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import BLOCK_BYTES
from fairdeck.core.errors import InvalidInput
from fairdeck.core.seeds import server_seed_length
from fairdeck.core.shuffle import shuffler
from fairdeck.core.strictjson import StrictJSONError, bounded_loads
from fairdeck.lab import battery, dieharder, formats, generators, provenance, report
from fairdeck.lab.collection import FORMAT, MANIFEST, version
from fairdeck.log import safefiles
from fairdeck.log.note import NoteError, Verifier
from fairdeck.stats.analysis import EXIT_STATUS
from fairdeck.stats.sampling import OURS

RAW_OURS, SEEDS_OURS = "ours: raw stream", "ours: seed source"
MAX_MANIFEST_BYTES = 1 << 20


class Refused(Exception):
    """The collection cannot be tested as it is; the message names the file and why."""


def check_manifest(directory: Path, pinned: dict[str, int] | None = None) -> dict[str, Any]:
    """The manifest, once it is one and every file it binds is as it says: the files of a
    collection, each of its size and SHA-256, the fixed-record ones the size its deck and hand
    count give. Refused (naming the file) otherwise. ``pinned`` gets each file's open
    descriptor (the caller closes them); without it they are closed here."""
    path = directory / MANIFEST
    try:
        raw = safefiles.read_bytes(directory, MANIFEST, max_bytes=MAX_MANIFEST_BYTES)
        manifest = bounded_loads(raw, what=str(path))
    except FileNotFoundError:
        raise Refused(f"{path} not found: run `fairdeck lab collect --out {directory}` first") from None
    except safefiles.UnsafeFile as e:
        raise Refused(f"{e}: a collection holds regular files only; collect again") from None
    except (OSError, StrictJSONError) as e:
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
    held: dict[str, int] = {} if pinned is None else pinned
    try:
        for name in formats.BOUND:
            held[name] = _pin(directory, name, listed[name])
    finally:
        if pinned is None:
            for fd in held.values():
                os.close(fd)
    return manifest


def _pin(directory: Path, name: str, entry: dict[str, Any]) -> int:
    """The file's descriptor, once it is a regular file of the manifest's size and SHA-256 (the
    size first: a file of another size is never read)."""
    file = directory / name
    changed = f"{file} is not what the manifest says (size or SHA-256 differ): it changed after collect"
    try:
        fd = safefiles.open_file(directory, name)
    except FileNotFoundError:
        raise Refused(f"{file} is missing (the manifest lists it)") from None
    except safefiles.UnsafeFile as e:
        raise Refused(f"{e}: a collection holds regular files only; collect again") from None
    except OSError as e:
        raise Refused(f"{file} cannot be read ({e.strerror or e})") from None
    try:
        if os.fstat(fd).st_size != entry["bytes"]:
            raise Refused(changed)
        h = hashlib.sha256()
        offset = 0
        while chunk := os.pread(fd, 1 << 20, offset):
            h.update(chunk)
            offset += len(chunk)
        if offset != entry["bytes"] or not hmac.compare_digest(h.hexdigest(), entry["sha256"]):
            raise Refused(changed)
    except OSError as e:
        os.close(fd)
        raise Refused(f"{file} cannot be read ({e.strerror or e})") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def pinned_path(fd: int) -> Path:
    """A path that opens the very file behind ``fd`` (for dieharder's stdin), whatever its name
    now points to."""
    return Path(f"/proc/self/fd/{fd}")


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else Path(args.dir) / "report"
    pinned: dict[str, int] = {}
    try:
        return _run(args, out, pinned)
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
    finally:
        for fd in pinned.values():
            os.close(fd)


def _report_root(args: argparse.Namespace) -> tuple[Path, str]:
    """Where the report goes: (a directory trusted as typed, the path under it). The default,
    DIR/report, is inside the collection, which is not trusted: nothing in it is followed."""
    return (Path(args.out), "") if args.out else (Path(args.dir), "report/")


def _key(args: argparse.Namespace) -> Verifier | None:
    if not args.key:
        return None
    text = Path(args.key[1:]).read_text().strip() if args.key.startswith("@") else args.key
    return Verifier.parse(text.splitlines()[0] if text else "")


def _run(args: argparse.Namespace, out: Path, pinned: dict[str, int]) -> int:
    began = time.perf_counter()
    started = datetime.now(UTC)
    load_before = _load()
    directory = Path(args.dir)
    root, under = _report_root(args)
    try:
        key = _key(args)
    except (OSError, ValueError, NoteError) as e:
        print(f"fairdeck lab test: bad --key: {e}", file=sys.stderr)
        return 2
    try:
        manifest = check_manifest(directory, pinned)
        if args.dieharder != "none":
            dieharder.executable()
    except Refused as e:
        print(f"fairdeck lab test: {e}", file=sys.stderr)
        return 1
    except dieharder.DieharderMissing as e:
        print(f"fairdeck lab test: {e}", file=sys.stderr)
        return 2
    if args.out:
        root.mkdir(parents=True, exist_ok=True)  # --out is the lab's own, trusted as typed
    os.close(safefiles.open_dir(root, under, create=True))  # a report we cannot write: before any test
    origin = provenance.check(
        pinned,
        manifest,
        sample=args.sample,
        sample_seed=args.sample_seed or secrets.token_hex(16),
        key=key,
        fetch_tile=lambda rel: safefiles.read_bytes(
            directory, f"{provenance.LOG_DIR}/{rel}", max_bytes=provenance.MAX_TILE_BYTES
        ),
    )
    if origin.problems:
        print(f"fairdeck lab test: provenance {origin.summary()}", file=sys.stderr)
        return 1
    if not origin.bound and not args.statistics_only:  # no exit status may read as a certified one
        print(
            f"fairdeck lab test: provenance {origin.summary()}; no verdict on a dealer without its "
            "signed log: collect with `fairdeck lab collect --target`, or pass --statistics-only to "
            "test the statistics alone",
            file=sys.stderr,
        )
        return 2
    deck = manifest["deck"]
    spec = DeckSpec.parse(deck)
    layout = formats.Layout(spec.size, 0)
    raw, seeds = pinned_path(pinned[formats.RAW]), pinned_path(pinned[formats.SEEDS])
    size = os.fstat(pinned[formats.RAW]).st_size
    # NIST reads its sequences of each source into memory: what the files hold, at most.
    need = min(args.nist_sequences * args.nist_bits // 8 + 1, max(size, _size(pinned[formats.SEEDS])))
    if need > numbers.MAX_NIST_READ:
        print(
            f"fairdeck lab test: --nist-sequences {args.nist_sequences:,} of --nist-bits {args.nist_bits:,} "
            f"read {need:,} bytes of each source into memory, over {numbers.MAX_NIST_READ:,}: take fewer "
            "sequences",
            file=sys.stderr,
        )
        return 2
    control_files = {}
    for name in generators.GENERATORS if args.dieharder != "none" else ():  # dieharder reads files
        rel = f"{under}controls/{name}.bin"
        with safefiles.replacing(root, rel) as f:
            generators.write(name, f, size, args.seed)
        control_files[name] = root / rel
    show = progress.wanted(args.progress, stream=sys.stderr, json=args.json)
    bar = progress.bar(total=None, desc="lab test", unit=" steps", stream=sys.stderr, enabled=show)

    def step(what: str) -> None:
        bar.set_postfix_str(what, refresh=False)
        bar.update(1)

    sources = {
        RAW_OURS: f"raw/stream.bin, {size:,} bytes: the SHAKE-256 blocks the derivation computed",
        SEEDS_OURS: f"seeds/server-seeds.bin, {os.fstat(pinned[formats.SEEDS]).st_size:,} bytes: "
        "the server seeds as drawn",
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
        ours = {
            RAW_OURS: os.pread(pinned[formats.RAW], need, 0),
            SEEDS_OURS: os.pread(pinned[formats.SEEDS], need, 0),
        }
        bad = {name: generators.generate(name, min(size, need), args.seed) for name in generators.GENERATORS}
        batteries.append(
            battery.run_nist(
                ours, bad, n=args.nist_bits, sequences=args.nist_sequences, alpha=args.alpha, progress=step
            )
        )
        batteries.append(
            battery.run_decks(
                _read_all(pinned[formats.DECKS]),
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
        "provenance": origin.as_dict(),
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
    page = report.write(root, under, batteries, info, sources)
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
        print(f"provenance: {origin.summary()}")
        print(f"report: {page}")
        print(
            verdict.upper()
            if origin.bound
            else f"{verdict.upper()} (the statistics only: provenance NOT BOUND)"
        )
    return EXIT_STATUS[verdict]


def _size(fd: int) -> int:
    return os.fstat(fd).st_size


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    while len(data) < size and (chunk := os.pread(fd, size - len(data), len(data))):
        data += chunk
    return data
