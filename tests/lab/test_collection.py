"""fairdeck.lab's collection: the trace is the derivation, files are whole records, a collection
resumes after any stop, and a changed collection is refused before any test."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from fairdeck.cli import main
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.encoding import lp, u32
from fairdeck.core.seeds import server_seed_length
from fairdeck.lab import collection, formats, generators
from fairdeck.lab.trace import trace


@pytest.mark.parametrize("deck", SPEC_NAMES)
def test_trace_is_the_derivation_layer_by_layer(deck: str) -> None:
    spec = DeckSpec.parse(deck)
    for k in range(12):
        seed = hashlib.shake_256(f"{deck}-{k}".encode()).digest(server_seed_length(spec))
        t = trace(deck, f"h{k}", seed, [b"alice"])
        assert t.cards == derive_deck(deck, f"h{k}", seed, [b"alice"])
        message = lp(deck.encode()) + lp(f"h{k}".encode()) + lp(seed) + u32(1) + lp(b"alice")
        blocks = [
            hashlib.shake_256(lp(b"fairdeck-v1 stream") + b.to_bytes(8, "big") + message).digest(64)
            for b in range(len(t.blocks) // 64)
        ]
        assert t.blocks == b"".join(blocks)  # whole SHAKE-256 blocks, in counter order
        assert len(t.blocks) - 64 < t.attempts * t.width <= len(t.blocks)  # no block more than needed
        r = 0
        for i, j in zip(range(1, spec.size), reversed(t.choices), strict=True):  # mixed radix, back
            assert 0 <= j <= i
            r = r * (i + 1) + j
        assert r == t.index < spec.permutations


def test_raw_stream_is_whole_blocks_because_the_bytes_read_are_biased() -> None:
    """The accepted attempt is below 52! = 0.748 * 2^226: its top two bits are never 11. Bytes
    read, hand after hand, would carry that bias into a battery; whole blocks carry none."""
    read_top, block_top = set(), set()
    for k in range(400):
        t = trace("standard", f"b{k}", hashlib.sha512(b"%d" % k).digest()[:45])
        read_top.add(t.read[(t.attempts - 1) * t.width] & 3)
        block_top.add(t.blocks[0] & 3)  # block 0 is computed for every hand, whatever it holds
    assert read_top == {0, 1, 2}
    assert block_top == {0, 1, 2, 3}
    t = trace("standard", "b0", hashlib.sha512(b"0").digest()[:45])
    assert t.read == t.blocks[: t.attempts * t.width]


def _collect(out: Path, raw: int, *, stop_after: int | None = None, deck: str = "standard") -> dict[str, Any]:
    source = collection.InProcess(run="t")
    plan = collection.CollectionPlan(deck=deck, raw_bytes=raw, source="in-process", run="t", batch=300)
    batches = iter(range(10**9))
    stop = (lambda: next(batches) >= stop_after) if stop_after is not None else (lambda: False)
    return collection.collect(out, source, plan, should_stop=stop)


def test_a_stopped_collection_resumes_and_a_half_written_batch_is_dropped(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    state = _collect(out, 100_000, stop_after=2)
    assert state["hands"] == 600
    for name in formats.APPENDED:  # a batch being written when the process died
        with (out / name).open("ab") as f:
            f.write(b"\x00half a batch")
    state = _collect(out, 100_000)
    hands = state["hands"]
    assert hands > 600 and state["sizes"][formats.RAW] >= 100_000
    assert (out / formats.SEEDS).stat().st_size == 45 * hands
    assert (out / formats.DECKS).stat().st_size == 52 * hands
    assert (out / formats.CHOICES).stat().st_size == 51 * hands
    lines = (out / formats.TRANSCRIPTS).read_bytes().splitlines()
    assert len(lines) == hands and len({json.loads(line)["transcript"]["hand_id"] for line in lines}) == hands
    seeds = (out / formats.SEEDS).read_bytes()
    raw = (out / formats.RAW).read_bytes()
    position = 0
    for k, line in enumerate(lines):  # record k of every file is hand k, and re-derives
        t = collection.transcript_from(json.loads(line)["transcript"])
        assert seeds[45 * k : 45 * (k + 1)] == t.server_seed
        traced = trace(t.deck, t.hand_id, t.server_seed, t.client_seeds)
        assert raw[position : position + len(traced.blocks)] == traced.blocks
        position += len(traced.blocks)
    assert position == len(raw)


def test_a_directory_of_another_collection_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    _collect(out, 10_000)
    with pytest.raises(collection.CollectionError, match="another deck"):
        _collect(out, 20_000, deck="short")
    stray = tmp_path / "stray"
    (stray / "raw").mkdir(parents=True)
    (stray / formats.RAW).write_bytes(b"x")
    with pytest.raises(collection.CollectionError, match=r"no state\.json"):
        _collect(stray, 10_000)


def test_lab_test_refuses_a_collection_that_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "kit"
    assert main(["lab", "collect", "--out", str(out), "--raw-bytes", "20000", "--no-progress"]) == 0
    capsys.readouterr()
    raw = out / formats.RAW
    data = bytearray(raw.read_bytes())
    data[100] ^= 1
    raw.write_bytes(bytes(data))
    assert main(["lab", "test", str(out), "--dieharder", "none", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(raw) in err[0] and "SHA-256" in err[0]


def test_collect_target_needs_the_log_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["lab", "collect", "--out", str(tmp_path / "k"), "--target", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--key" in err[0]
    assert not (tmp_path / "k").exists()


def test_bad_generators_are_the_generators_named() -> None:
    words = struct.unpack("<1000I", generators.lcg32(4000, "s"))
    assert all(words[i + 1] == (1664525 * words[i] + 1013904223) % 2**32 for i in range(999))
    modulo = generators.mt_low_bits_modulo(1 << 16, "s")
    assert max(modulo) == 254 and modulo.count(0) > modulo.count(254)
    biased = generators.one_biased_bit(1 << 16, "s")
    ones = sum(b & 1 for b in biased) / len(biased)
    assert 0.54 < ones < 0.56
    assert (
        generators.generate("lcg32", 5_000_000, "s")[4_000_000:4_000_100]
        == generators.lcg32(5_000_000, "s")[4_000_000:4_000_100]
    )
    assert generators.one_biased_bit(100, "a") == generators.one_biased_bit(100, "a")


def test_lab_test_without_dieharder_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "kit"
    assert main(["lab", "collect", "--out", str(out), "--raw-bytes", "20000", "--no-progress"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["lab", "test", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "apt-get install dieharder" in err[0] and "--dieharder none" in err[0]


def test_a_dealer_that_cannot_be_reached_is_one_line_and_the_collection_resumable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairdeck.log.note import Signer

    key = Signer.generate("lab.test/log").verifier.to_string()
    out = tmp_path / "kit"
    argv = ["lab", "collect", "--out", str(out), "--target", "127.0.0.1:1", "--key", key, "--timeout", "2"]
    assert main([*argv, "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not be used" in err[0] and "run the same command again" in err[0]
    assert not out.exists()  # the dealer is asked for its checkpoint before anything is written


def test_the_manifest_names_the_code_that_collected_it_as_a_lab_recomputes_it(tmp_path: Path) -> None:
    """The package version (0.1.0 for every build) does not say which code made a collection; the
    SHA-256 of the package's files does, and a lab recomputes it from the source with the shell
    line docs/certification.md gives."""
    import subprocess

    import fairdeck

    out = tmp_path / "kit"
    assert main(["lab", "collect", "--out", str(out), "--raw-bytes", "2000", "--no-progress"]) == 0
    package = Path(fairdeck.__file__).parent
    line = (
        "find -L fairdeck -type f ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z "
        "| xargs -0 sha256sum | sha256sum"
    )
    shell = subprocess.run(["sh", "-c", line], cwd=package.parent, capture_output=True, text=True, check=True)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["fairdeck code (SHA-256)"] == shell.stdout.split()[0]
