"""``lab collect`` under an operator's faults and a hostile source: a full disk, a path that is
not a directory, a directory that is not a collection, two collectors at once, and a source that
returns hands other than the ones asked for. Each ends in one line, no traceback, and leaves a
collection that resumes or was never started."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fairdeck.cli import main
from fairdeck.core.errors import VerificationError
from fairdeck.lab import collection, formats
from tests.support import waits
from tests.support.file_limits import FILE_SIZE_LIMIT


def test_a_full_disk_is_one_line_naming_the_directory_and_the_collection_resumes(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    argv = ["lab", "collect", "--out", str(out), "--raw-bytes", "300000", "--batch", "1000", "--no-progress"]
    run = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMIT, "150000", *argv], capture_output=True, text=True, check=False
    )
    err = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(err) == 1, run.stderr
    assert str(out) in err[0] and "dealer" not in err[0] and "run the same command again" in err[0]
    assert main(argv) == 0
    state = json.loads((out / "state.json").read_text())
    assert (out / formats.DECKS).stat().st_size == 52 * state["hands"]
    assert (out / formats.SEEDS).stat().st_size == 45 * state["hands"]


class Liar:
    """A source whose hands each verify on their own (seed, commitment, cards) but are not the
    hands asked for: ``lie`` says how."""

    description = "a lying dealer"
    dealer_key = None

    def __init__(self, lie: str) -> None:
        self.lie = lie

    def deal(self, deck: str, count: int, client_seed: str, first: int) -> list[collection.Dealt]:
        from fairdeck.core.local import open_local, reveal_local

        dealt = []
        for i in range(first, first + count):
            hand_id = "the-same-hand" if self.lie == "one hand twice" else f"liar-{i}"
            ours = (client_seed,) if self.lie != "its own client seed" else ("chosen by the dealer",)
            other = "short" if self.lie == "another deck" else deck
            hand = open_local(other, hand_id, entropy=_entropy(i))
            dealt.append(collection.Dealt(reveal_local(hand, ours)))
        return dealt


def _entropy(i: int):  # type: ignore[no-untyped-def]
    import hashlib

    return lambda n: hashlib.shake_256(b"%d" % i).digest(n)


@pytest.mark.parametrize("lie", ["another deck", "its own client seed", "one hand twice"])
def test_hands_other_than_the_ones_asked_for_are_refused_before_they_are_written(
    lie: str, tmp_path: Path
) -> None:
    """A deck of another spec would be written in the wrong record size (every later record
    shifted); a hand dealt with a client seed the dealer chose, or twice, is not a hand of this
    collection. Each verifies on its own, so each needs its own check."""
    out = tmp_path / "kit"
    plan = collection.CollectionPlan(deck="standard", raw_bytes=5000, source="liar", batch=20)
    with pytest.raises(VerificationError):
        collection.collect(out, Liar(lie), plan)
    state = json.loads((out / "state.json").read_text())
    assert state["hands"] == 0 and all(size == 0 for size in state["sizes"].values())


def test_two_collectors_on_one_directory_the_second_is_refused(tmp_path: Path) -> None:
    """Two processes appending to the same files would interleave their records and each cut the
    other's batch back on resume. The second collector (another process, started while the first
    is between batches) is refused, and the first finishes a collection whose records are whole."""
    out = tmp_path / "kit"
    refused: list[subprocess.CompletedProcess[str]] = []

    def second() -> bool:
        if not refused:
            argv = ["lab", "collect", "--out", str(out), "--raw-bytes", "20000", "--no-progress"]
            refused.append(
                subprocess.run(
                    [sys.executable, "-m", "fairdeck.cli", *argv], capture_output=True, text=True, check=False
                )
            )
        return False

    plan = collection.CollectionPlan(deck="standard", raw_bytes=20_000, source="in-process", batch=50)
    state = collection.collect(out, collection.InProcess(run=plan.run), plan, should_stop=second)
    err = refused[0].stderr.strip().splitlines()
    assert refused[0].returncode == 2 and len(err) == 1, refused[0].stderr
    assert "another" in err[0] and str(out) in err[0]
    assert (out / formats.DECKS).stat().st_size == 52 * state["hands"]
    assert json.loads((out / "state.json").read_text())["run"] == plan.run


def test_a_directory_that_is_not_a_collection_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out pointed at a directory of other things (a home directory, a report) would have the
    collection's folders scattered into it; a file is not a directory at all."""
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    for out in (busy, a_file):
        assert main(["lab", "collect", "--out", str(out), "--raw-bytes", "5000", "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(out) in err[0], err
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]
    assert a_file.read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["lab", "collect", "--out", str(empty), "--raw-bytes", "5000", "--no-progress"]) == 0


def test_a_second_ctrl_c_after_the_stopped_batch_exits_130_without_a_traceback(tmp_path: Path) -> None:
    """Seen in a parallel CI run: the first Ctrl-C's batch finished before the second arrived, the
    command restored Python's SIGINT handler on its way out, and the second raised
    KeyboardInterrupt in tqdm's exit hook: a traceback and exit 1. Once a stop was asked, a Ctrl-C
    or SIGTERM while the command winds down exits 130 at once. Checked in process: a batch callback
    sends the first SIGINT, and the handler left installed is the one that exits quietly."""
    import signal

    from fairdeck.cli import lab_command

    sent = []

    def first_ctrl_c(hands: int, raw: int) -> None:
        if not sent:
            sent.append(hands)
            signal.raise_signal(signal.SIGINT)

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    real = collection.collect

    def collect(*args: object, **kwargs: object) -> object:
        kwargs["progress"] = first_ctrl_c
        return real(*args, **kwargs)  # type: ignore[arg-type]

    try:
        collection.collect = collect  # type: ignore[assignment]
        argv = ["lab", "collect", "--out", str(tmp_path / "kit"), "--raw-bytes", "1G", "--batch", "50"]
        assert main([*argv, "--no-progress"]) == 1  # stopped after the batch, resumable
        assert sent
        assert signal.getsignal(signal.SIGINT) is lab_command._stop_now
        assert signal.getsignal(signal.SIGTERM) is lab_command._stop_now
    finally:
        collection.collect = real  # type: ignore[assignment]
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


# The real ``fairdeck lab collect`` in a process of its own, its second batch held half written
# until the second Ctrl-C: without the hold, a first Ctrl-C that lands between two batches (state.json
# is visible before its directory's fsync ends) stops the collection with no batch in flight, and the
# second then lands in the interpreter's exit (CI run of stop 46: exit -2, not 130).
HALF_WRITTEN = """
import signal, sys
from fairdeck.cli import main
from fairdeck.lab import collection
real = collection.CollectionFiles.append
def append(self, hands, layout):
    if self.batches_seen:
        real(self, hands[: len(hands) // 2], layout)
        print("half a batch written", file=sys.stderr, flush=True)
        while True:  # until the second Ctrl-C raises KeyboardInterrupt here
            signal.pause()
    self.batches_seen = 1
    real(self, hands, layout)
collection.CollectionFiles.batches_seen = 0
collection.CollectionFiles.append = append
sys.exit(main(sys.argv[1:]))
"""


def test_a_second_ctrl_c_stops_at_once_in_one_line_and_the_collection_resumes(tmp_path: Path) -> None:
    """The first Ctrl-C asks to stop after the batch in flight; the second stops now. That is an
    operator's ordinary impatience, not a crash: one line, no traceback, and the half of a batch
    it cut is dropped when the collection resumes. The second is sent once the first is
    acknowledged, as an operator sees it (two SIGINTs that arrive before the handler runs are
    one); the second batch is held half written until then (HALF_WRITTEN), so the second
    Ctrl-C lands in a batch, as this test means, whatever the machine's load."""
    import signal
    import threading

    out = tmp_path / "kit"
    argv = ["lab", "collect", "--out", str(out), "--raw-bytes", "1G", "--batch", "50", "--no-progress"]
    process = subprocess.Popen(
        [sys.executable, "-c", HALF_WRITTEN, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait_for(done: Callable[[], bool], what: str) -> None:
        def ok() -> bool:
            if done():
                return True
            assert process.poll() is None, (what, "".join(lines))
            return False

        waits.wait_for(what, ok, timeout=120, every=0.02)

    wait_for(lambda: any("half a batch written" in line for line in lines), "the second batch half written")
    process.send_signal(signal.SIGINT)
    wait_for(lambda: any("stopping after this batch" in line for line in lines), "the first Ctrl-C seen")
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    reader.join(timeout=60)
    err = "".join(lines)
    assert process.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == (
        "fairdeck lab collect: stopped at once (the batch in flight is dropped); "
        "run the same command again to resume"
    )
    state = json.loads((out / "state.json").read_text())
    assert state["hands"] == 50
    assert (out / formats.DECKS).stat().st_size == 52 * 75  # the half batch reached the file
    smaller = ["lab", "collect", "--out", str(out), "--raw-bytes", "1", "--no-progress"]
    assert main(smaller) == 0  # resumes (nothing more to deal), cutting the stopped batch off
    hands = json.loads((out / "manifest.json").read_text())["hands"]
    assert hands == 50
    assert (out / formats.DECKS).stat().st_size == 52 * hands


def test_a_collection_being_extended_has_no_manifest_until_it_is_whole_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resuming a finished collection with a larger --raw-bytes appends to files its manifest
    describes: until the new manifest, lab test must say the collection is unfinished, not that
    its files 'changed after collect'."""
    out = tmp_path / "kit"
    argv = ["lab", "collect", "--out", str(out), "--batch", "50", "--no-progress", "--raw-bytes"]
    assert main([*argv, "5000"]) == 0
    plan = collection.CollectionPlan(deck="standard", raw_bytes=50_000, source="in-process", batch=50)
    batches = iter(range(100))
    collection.collect(out, collection.InProcess(run=""), plan, should_stop=lambda: next(batches) >= 1)
    capsys.readouterr()
    assert main(["lab", "test", str(out), "--dieharder", "none", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not found" in err[0] and "fairdeck lab collect" in err[0], err


@pytest.mark.parametrize("timeout", ["0", "-5", "nan", "inf"])
def test_a_timeout_no_call_can_meet_is_refused_when_parsed(
    timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A deadline of 0, below 0 or nan made every call fail with 'Deadline Exceeded' and the advice
    to run the same command again; inf did too (the deadline overflowed)."""
    argv = ["lab", "collect", "--out", "kit", "--target", "127.0.0.1:1", "--key", "k", "--timeout", timeout]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "--timeout" in capsys.readouterr().err.strip().splitlines()[-1]
