"""The ``run`` fixture of every fault scenario (tests/support/faults.py): a run, then both
invariants checked."""

from tests.support.faults import run

__all__ = ["run"]
