"""Every numeric option of every fairdeck command (client and server, found by walking the real
parser), at 0, negative, huge, NaN and infinite: its argparse type refuses the value (argparse then
exits 2 naming the option) or returns a finite number, never raising anything else and never
passing NaN or infinity on. ``serve``'s own options go through config.py and are tried in
tests/run/test_option_ranges.py."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.cli import build_parser, numbers
from tests.support.env import clean_env

PROBES = ("0", "-1", "1", "1e400", "-1e400", "nan", "inf", "-inf", "9" * 30, "9" * 400, "1e20", "", "x")
HUGE = ("9" * 30, "9" * 400, "1e20", "9999999T")
"""Past what any numeric option feeds (a count of decks, of bytes, of seconds)."""


def typed_options(
    parser: argparse.ArgumentParser, path: str = "fairdeck"
) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from typed_options(sub, f"{path} {name}")
        elif action.type is not None and action.option_strings:
            yield f"{path} {action.option_strings[-1]}", action


OPTIONS = dict(typed_options(build_parser()))
CHECKED_BY_THE_COMMAND = {"fairdeck health --timeout"}
"""Bare floats that the command itself holds to a range, in one line with exit 2
(tests/deploy/test_health_command.py)."""
CHECKED_IN_RANGE = {"fairdeck deal --players"}
"""Whole numbers the command itself holds to a range (``deal --players`` 2..10)."""


def test_the_walk_finds_the_numeric_options() -> None:
    for name in ("fairdeck deal --timeout", "fairdeck audit --max-hand-lifetime", "fairdeck stats --workers"):
        assert name in OPTIONS


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_typed_option_refuses_or_returns_a_finite_value(name: str) -> None:
    kind = OPTIONS[name].type
    assert kind is not float or name in CHECKED_BY_THE_COMMAND, (
        f"{name}: a bare float takes nan and inf; use fairdeck.cli.numbers"
    )
    assert callable(kind)
    for text in PROBES:
        try:
            value = kind(text)
        except (argparse.ArgumentTypeError, ValueError, TypeError):  # what argparse turns into exit 2
            continue
        if isinstance(value, float) and name not in CHECKED_BY_THE_COMMAND:
            assert math.isfinite(value), f"{name} took {text!r} as {value}"


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_numeric_option_has_an_upper_bound(name: str) -> None:
    """``stats -n`` took any N: a run that holds 8 bytes a deck for ever, or a million-digit count.
    Every number an option takes is held to what it feeds, at both ends."""
    action = OPTIONS[name]
    if action.choices is not None or name in CHECKED_BY_THE_COMMAND | CHECKED_IN_RANGE:
        return
    kind = action.type
    assert callable(kind)
    for text in HUGE:
        try:
            value = kind(text)
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
        assert not isinstance(value, int | float), f"{name} took {text!r} as {value}: no upper bound"


def test_numbers_name_the_range() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="over 0 and at most 86400, not 'nan'"):
        numbers.seconds(numbers.DAY)("nan")
    with pytest.raises(argparse.ArgumentTypeError, match=r"from 0\.001 to 31536000, not '0'"):
        numbers.lifetime("0")
    assert numbers.whole(0, 256)("1_0") == 10


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (
            ["deal", "--target", "127.0.0.1:1", "--timeout", "0"],
            "argument --timeout: must be a number of seconds",
        ),
        (["hand", "get", "x", "--key", "k", "--timeout", "nan"], "argument --timeout"),
        (
            ["audit", "--data", "DIR", "--key", "k", "--max-hand-lifetime", "nan"],
            "argument --max-hand-lifetime",
        ),
        (
            ["audit", "--data", "DIR", "--key", "k", "--max-hand-lifetime", "inf"],
            "argument --max-hand-lifetime",
        ),
        (
            ["audit", "--data", "DIR", "--key", "k", "--witness-threshold", "-1"],
            "argument --witness-threshold",
        ),
        (["lab", "collect", "--out", "DIR", "--batch", str(10**12)], "argument --batch"),  # never ended
        (["stats", "-n", str(10**30)], "argument -n/--decks"),  # 8 bytes a deck, held to the end
        (["lab", "collect", "--out", "DIR", "--raw-bytes", "9" * 400], "argument --raw-bytes"),  # traceback
        (["lab", "test", "DIR", "--nist-sequences", str(10**20)], "argument --nist-sequences"),
    ],
)
def test_a_bad_number_is_exit_2_naming_the_option_not_the_dealers_fault(
    argv: list[str], names: str, tmp_path: Path
) -> None:
    """``deal --timeout 0`` came back as the dealer's DEADLINE_EXCEEDED (exit 1),
    ``audit --max-hand-lifetime nan`` as a ValueError traceback, and ``lab collect --batch``
    past the dealer's DealHands limit dealt one batch for ever, deaf to SIGTERM."""
    argv = [str(tmp_path) if a == "DIR" else a for a in argv]
    result = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert names in result.stderr.strip().splitlines()[-1], result.stderr
