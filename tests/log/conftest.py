"""Fixtures of the log tests; the helpers live in testkit.py and tampering.py."""

from tests.log.tampering import layout
from tests.log.testkit import built_log, log_copy

__all__ = ["built_log", "layout", "log_copy"]
