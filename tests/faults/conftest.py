"""The ``run`` fixture of every fault scenario (kit.py): a run, then both invariants checked."""

from tests.faults.kit import run

__all__ = ["run"]
