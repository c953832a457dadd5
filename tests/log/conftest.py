"""Fixtures of the log tests: the built log and its copies (tests/support/logs.py), the tables'
layout (tests/support/tampering.py), and ``served``: a dealer that signs a checkpoint every 20 ms,
so an audit of what was just dealt does not wait for one."""

import pytest

from tests.support.dealers import RunningDealer
from tests.support.fixtures import DealerFactory
from tests.support.logs import built_log, log_copy
from tests.support.tampering import layout

__all__ = ["built_log", "layout", "log_copy", "served"]


@pytest.fixture
def served(dealer_factory: DealerFactory) -> RunningDealer:
    return dealer_factory(checkpoint_interval=0.02)
