"""A failure whose traceback has a frame with no line number (``tb_lineno`` None: an instruction
the compiler gave no location, where a timeout's signal can land) is reported, not fatal.

pytest formats every traceback entry with ``tb_lineno - 1``, so such a failure raised TypeError
while its report was made; under xdist the worker then died holding the test, and the controller
stopped the whole run with an INTERNALERROR (a dry run ended at 155 of 5,082 tests). Here the
report is made again from the frames alone (file, line or ?, function) and the exception, reading
no line table. Registered from the root conftest; tests/test_lineless.py runs the case.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest
from _pytest.reports import TestReport
from _pytest.runner import CallInfo


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: CallInfo[None]
) -> Generator[None, TestReport, TestReport]:
    try:
        return (yield)
    except TypeError:
        if call.excinfo is None or not _lineless(call.excinfo.value):
            raise
        text = _plain(call.excinfo.value)
        return TestReport(
            item.nodeid,
            item.location,
            dict.fromkeys(item.keywords, 1),
            "failed",
            f"{text}\n(pytest could not format this traceback: a frame in it has no line number)",
            call.when,  # type: ignore[arg-type]
            [(f"Captured {key} {when}", content) for when, key, content in item._report_sections],
            call.duration,
            call.start,
            call.stop,
            user_properties=item.user_properties,
        )


def _lineless(error: BaseException) -> bool:
    """Whether a frame of ``error``'s traceback has no line number (what pytest cannot format)."""
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_lineno is None:
            return True
        tb = tb.tb_next
    return False


def _plain(error: BaseException) -> str:
    """Each frame as ``file:line in function`` (``?`` for no line), then the exception: nothing in
    it reads a line table, which is what failed."""
    lines = ["Traceback (most recent call last):"]
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        lines.append(
            f"  {code.co_filename}:{tb.tb_lineno if tb.tb_lineno is not None else '?'} in {code.co_name}"
        )
        tb = tb.tb_next
    lines.append(f"{type(error).__qualname__}: {error}")
    return "\n".join(lines)
