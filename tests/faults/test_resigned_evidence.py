"""Lab evidence that anyone could re-sign: a collection from a live dealer, then its bytes replaced
and its manifest recomputed, or every layer made again from fresh seeds for the same hand ids and
log indexes (a collection consistent in itself). ``lab test`` re-derives each layer from the one
below it and checks each hand's entries in the dealer's signed log (kept as tiles in ``log/``):
only the honest collection is BOUND; no forgery gets an OK.

Each ``fairdeck`` runs in a process of its own, forked from one that imported the CLI once
(tests/support/forked_cli.py): seven interpreters' start and imports were most of its CPU."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.core.decks import DeckSpec
from fairdeck.core.local import open_local, reveal_local
from fairdeck.core.shuffle import shuffler
from fairdeck.lab import collection, formats
from tests.support.faults import FaultRun
from tests.support.forked_cli import ForkedCli


@pytest.fixture
def fairdeck() -> Iterator[ForkedCli]:
    """``python -m fairdeck.cli ARGS``, a fresh process a call (``ForkedCli``)."""
    runner = ForkedCli()
    yield runner
    runner.close()


def lab_test(fairdeck: ForkedCli, kit: Path, key: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return fairdeck(
        "lab", "test", str(kit), "--dieharder", "none", "--no-progress", "--key", key, *extra, timeout=120
    )


def remanifest(kit: Path) -> None:
    manifest = json.loads((kit / "manifest.json").read_text())
    for f in manifest["files"]:
        data = (kit / f["path"]).read_bytes()
        f["bytes"], f["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (kit / "manifest.json").write_text(json.dumps(manifest))


def forge(kit: Path, out: Path) -> None:
    """Every layer of ``kit`` made again from fresh seeds, same hand ids, client seeds and log
    indexes, the signed checkpoint and the tiles copied: consistent in itself, but not dealt."""
    manifest = json.loads((kit / "manifest.json").read_text())
    spec = DeckSpec.parse(manifest["deck"])
    layout = formats.Layout(spec.size, shuffler(spec.size).width)
    out.mkdir()
    files = collection.CollectionFiles(out, None)
    hands = []
    for line in (kit / formats.TRANSCRIPTS).read_bytes().splitlines():
        value = json.loads(line)
        t = collection.transcript_from(value["transcript"])
        new = reveal_local(open_local(t.deck, t.hand_id), t.client_seeds)
        dealt = collection.Dealt(new, value["log"]["commit"], value["log"]["reveal"])
        hands.append((dealt, collection.verify_dealt(new)))
    files.append(hands, layout)
    sizes = files.sync()
    files.close()
    shutil.copytree(kit / "log", out / "log")
    state = {"deck": manifest["deck"], "hands": len(hands), "version": manifest["algorithm"], "started": "x",
             "seconds": 0.0, "sizes": sizes}  # fmt: skip

    class Source:
        description = manifest["source"]
        dealer_key = manifest["dealer_key"]

    collection.finish(out, state, argv=["forged"], source=Source(), log_check=manifest["log_check"])  # type: ignore[arg-type]


def test_only_the_collection_the_dealer_signed_is_bound(run: FaultRun, fairdeck: ForkedCli) -> None:
    dealer = run.start()
    key = run.key()
    kit = run.tmp / "kit"
    argv = ["lab", "collect", "--out", str(kit), "--target", dealer.target, "--key", key]
    done = fairdeck(*argv, "--raw-bytes", "3000", "--batch", "10", "--no-progress", timeout=120)
    assert done.returncode == 0, done
    run.ledger.deal(dealer.target, 1)

    honest = lab_test(fairdeck, kit, key)
    assert "provenance: BOUND: every layer re-derived from the one below it for all" in honest.stdout, honest
    # The batteries' own verdict on the live dealer's fresh decks, their exit status 0, 1 or 3
    # (docs/certification.md). On this kit's ~50 decks the deck tests' chi-squares expect far
    # under 5 a cell: 1.3% of 3,000 numpy-fair 50-deck runs scored pairs p ~ 1e-10, a chance
    # FAILED. This test is about the binding: the last line must name the verdict the status says.
    assert "Traceback" not in honest.stderr and honest.returncode in (0, 1, 3), honest
    verdict = {0: "OK", 1: "FAILED", 3: "INCONCLUSIVE"}[honest.returncode]
    assert honest.stdout.strip().splitlines()[-1] == verdict, honest.stdout

    replaced = run.tmp / "replaced"
    shutil.copytree(kit, replaced)
    for binary in (formats.RAW, formats.SEEDS):
        (replaced / binary).write_bytes(os.urandom((replaced / binary).stat().st_size))
    remanifest(replaced)
    done = lab_test(fairdeck, replaced, key)
    assert done.returncode == 1 and "provenance FAILED" in done.stderr and "Traceback" not in done.stderr, (
        done
    )

    forged = run.tmp / "forged"
    forge(kit, forged)
    done = lab_test(fairdeck, forged, key)
    assert done.returncode == 1 and "provenance FAILED" in done.stderr and "Traceback" not in done.stderr, (
        done
    )
    assert "binding" in done.stderr or "commit" in done.stderr, done.stderr

    unbound = run.tmp / "unbound"  # the forgery without the dealer's log: consistent, and NOT BOUND
    shutil.copytree(forged, unbound)
    shutil.rmtree(unbound / "log")
    manifest = json.loads((unbound / "manifest.json").read_text())
    (unbound / "manifest.json").write_text(json.dumps({**manifest, "log_check": None}))
    done = lab_test(fairdeck, unbound, key)  # no exit status that a pipeline could take for a certified one
    assert done.returncode == 2 and "provenance NOT BOUND" in done.stderr and not done.stdout, done
    done = lab_test(fairdeck, unbound, key, "--statistics-only")
    assert "provenance: NOT BOUND" in done.stdout and "Traceback" not in done.stderr, done
    assert done.stdout.strip().splitlines()[-1].endswith("(the statistics only: provenance NOT BOUND)")

    tile = next(p for p in sorted((kit / "log").rglob("*")) if p.is_file())
    flipped = bytearray(tile.read_bytes())
    flipped[-1] ^= 1
    tile.write_bytes(bytes(flipped))
    done = lab_test(fairdeck, kit, key)
    assert done.returncode == 1 and "provenance FAILED" in done.stderr, done
