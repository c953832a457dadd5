"""Progress bars of the long commands (``audit``, ``stats``), drawn by tqdm on stderr.

One rule for every command: a bar only when stderr is a terminal and the
command is not printing ``--json`` (a machine reads that output, and a bar
redrawn with carriage returns is noise in a log file or a pipe), unless the
user says ``--progress`` or ``--no-progress``. tqdm shows the rate and the
time left. The pure layers (``fairdeck.log``, the sampling of ``fairdeck.stats``)
never draw anything: they call back, and the command line draws.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Never, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm


def wanted(choice: bool | None, *, stream: TextIO, json: bool) -> bool:
    """Whether to draw: the user's ``--progress``/``--no-progress``, else a terminal and no ``--json``."""
    if choice is not None:
        return choice
    return not json and stream.isatty()


def add_argument(parser: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` (default: when stderr is a terminal and not ``--json``)."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar with rate and time left on stderr (default: when stderr is a terminal "
        "and not --json)",
    )


def bar(
    *,
    total: float | None,
    desc: str,
    unit: str,
    stream: TextIO,
    enabled: bool,
    bar_format: str | None = None,
) -> tqdm[Never]:
    """A tqdm bar on ``stream``; a disabled one writes nothing at all.

    ``mininterval`` keeps redraws to five a second, so a fast loop is not slowed by its own bar.
    tqdm is imported here, not at the top: every command registers ``--progress``, and only
    those that draw a bar should pay for loading it.
    """
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=stream,
        disable=not enabled,
        mininterval=0.2,
        dynamic_ncols=True,
        bar_format=bar_format,
    )
