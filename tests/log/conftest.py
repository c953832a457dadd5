"""Fixtures of the log tests; the helpers live in testkit.py."""

from tests.log.testkit import built_log, log_copy

__all__ = ["built_log", "log_copy"]
