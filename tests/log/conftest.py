"""Fixtures of the log tests; the helpers live in testkit.py and tampering.py."""

from tests.support.logs import built_log, log_copy
from tests.support.tampering import layout

__all__ = ["built_log", "layout", "log_copy"]
