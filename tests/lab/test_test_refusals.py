"""``lab test`` refuses, in one line naming what is wrong, whatever it cannot test as the manifest
describes it: a manifest that is not one, a file it does not bind, record sizes that do not fit
its deck and hand count, and options no battery can run with."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fairdeck.cli import main
from fairdeck.lab import formats


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lab-kit") / "kit"
    # A standard hand gives about 68 bytes of raw output, a little more or less by the rejections:
    # 17,000 bytes sit halfway between what 200 and 300 hands give, so the collection always stops
    # after its third batch (20,000, the bound it had, is close to 300 hands' mean: one run in a
    # few took a fourth batch).
    argv = ["lab", "collect", "--out", str(out), "--raw-bytes", "17000", "--batch", "100", "--no-progress"]
    assert main(argv) == 0
    assert json.loads((out / "manifest.json").read_text())["hands"] == 300
    return out


def _copy(kit: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "kit"
    shutil.copytree(kit, copy)
    return copy


def _test(directory: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    status = main(["lab", "test", str(directory), "--dieharder", "none", "--no-progress", *extra])
    return status, capsys.readouterr().err.strip().splitlines()


def _files(m: dict[str, Any]) -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = m["files"]
    return files


EDITS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "a list": (lambda m: [m], "manifest.json"),
    "null": (lambda m: None, "manifest.json"),
    "another format": (lambda m: {**m, "format": "something/1"}, "manifest.json"),
    "no files": (lambda m: {**m, "files": []}, formats.RAW),
    "the raw stream unlisted": (
        lambda m: {**m, "files": [f for f in _files(m) if f["path"] != formats.RAW]},
        formats.RAW,
    ),
    "a file without its size": (
        lambda m: {**m, "files": [{k: v for k, v in f.items() if k != "bytes"} for f in _files(m)]},
        "manifest.json",
    ),
    "a path outside the collection": (
        lambda m: {**m, "files": [*_files(m), {**_files(m)[0], "path": "../elsewhere.bin"}]},
        "../elsewhere.bin",
    ),
    "no deck": (lambda m: {k: v for k, v in m.items() if k != "deck"}, "manifest.json"),
    "an unknown deck": (lambda m: {**m, "deck": "tarot"}, "tarot"),
    "another deck": (lambda m: {**m, "deck": "short"}, "300 short hands take"),
    "more hands": (lambda m: {**m, "hands": m["hands"] + 1}, "301 standard hands take"),
    "hands as text": (lambda m: {**m, "hands": "100"}, "manifest.json"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_manifest_that_does_not_describe_the_files_is_refused_in_one_line(
    edit: str, kit: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the manifest binds the files to what was collected: a manifest that lists none, or
    says a deck or hand count the records do not fit, is refused like a changed file (it used to
    be tested anyway, or to end in a traceback)."""
    copy = _copy(kit, tmp_path)
    path = copy / "manifest.json"
    change, named = EDITS[edit]
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    status, err = _test(copy, capsys)
    assert status == 1 and len(err) == 1, err
    assert named in err[0] and "Traceback" not in err[0]
    assert not (copy / "report").exists()


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [("--nist-bits", "1000", "--nist-bits"), ("--alpha", "2", "--alpha"), ("--alpha", "nan", "--alpha")],
)
def test_options_no_battery_can_run_with_are_refused_when_parsed(
    option: str, value: str, named: str, kit: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["lab", "test", str(kit), "--dieharder", "none", "--no-progress", option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert named in err.strip().splitlines()[-1] and "Traceback" not in err


def test_a_full_disk_while_writing_the_report_is_one_line(kit: Path, tmp_path: Path) -> None:
    """The bad generators' streams are written next to the report, each the size of ours: a disk
    that fills there is named, with the fix, not a traceback."""
    from tests.support.file_limits import FILE_SIZE_LIMIT

    report = tmp_path / "report"
    argv = ["lab", "test", str(kit), "--out", str(report), "--dieharder", "none", "--no-progress"]
    argv.append("--statistics-only")  # the kit is offline
    run = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMIT, "10000", *argv], capture_output=True, text=True, check=False
    )
    err = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(err) == 1, run.stderr
    assert str(report) in err[0] and "--out" in err[0]


def test_ctrl_c_during_the_batteries_is_one_line(
    kit: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator stopping a 46-minute run: one line and exit 130, not a KeyboardInterrupt
    traceback from wherever the batteries were (here, NIST)."""
    from fairdeck.lab import battery

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(battery, "run_nist", interrupted)
    status, err = _test(kit, capsys, "--out", str(tmp_path / "report"), "--statistics-only")
    assert status == 130 and len(err) == 1 and "interrupted" in err[0], err


def test_nist_sequences_past_the_memory_they_are_read_into_are_refused_before_any_battery(
    kit: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--nist-sequences K --nist-bits N`` read K x N / 8 bytes of each source into memory, after
    hours of dieharder: a huge K ended there in a MemoryError (or OverflowError) traceback. Now what
    the files hold, at most, and over the bound a refusal naming both options, before any battery."""
    from fairdeck.cli import numbers

    monkeypatch.setattr(numbers, "MAX_NIST_READ", 1000, raising=False)  # the kit: 17,000 bytes
    status, err = _test(kit, capsys, "--out", str(tmp_path / "report"), "--statistics-only")
    assert status == 2 and len(err) == 1 and "--nist-sequences" in err[0] and "--nist-bits" in err[0], err
    assert not (tmp_path / "report" / "report.json").exists()
