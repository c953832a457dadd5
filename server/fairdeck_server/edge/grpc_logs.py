"""grpcio's own log lines, filtered by ``tame_grpc_logs``: its Cython layer never logs a metadata
value (an API token, secret and all) that is not valid UTF-8 (docs/security.md, "API tokens"), and
an answer core could not send because its call had just ended (the client's cancel or deadline, a
race inside grpc.aio), a unary answer or a stream's final status, is one DEBUG line, not an ERROR
with a traceback. The private texts and names matched are pinned against the installed grpcio by
tests/edge/test_grpc_logs.py. Imports only logging and re:
installed by ``edge.transport.aio_server``, which makes every server (dealer's and co-dealer's).
"""

from __future__ import annotations

import logging
import re
from types import TracebackType

GRPC_CYTHON_LOGGER = "grpc._cython.cygrpc"
"""The logger of grpcio's Cython layer, which decodes the metadata of every call."""
WITHHELD = "a call's metadata value is not valid UTF-8 (%d bytes, withheld: it may hold a credential)"


class RedactMetadata(logging.Filter):
    """grpcio decodes each metadata value as UTF-8, and when one is not, logs it whole
    at ERROR with a traceback (``_LOGGER.exception('Invalid encoding on %s', value)`` in
    grpc_string.pyx.pxi ``_decode``), twice per call, before any of our code runs. For
    ``authorization`` that value is an API token, secret and all. This filter keeps
    the fact and drops the value: any record of that logger with a bytes argument, or
    carrying a UnicodeDecodeError (whose ``object`` holds the bytes), becomes one
    WARNING line giving only the length."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        raw = [a for a in args if isinstance(a, bytes | bytearray | memoryview)]
        error = record.exc_info[1] if record.exc_info else None
        if raw or isinstance(error, UnicodeDecodeError):
            size = len(raw[0]) if raw else len(error.object) if isinstance(error, UnicodeDecodeError) else 0
            record.msg, record.args = WITHHELD, (size,)
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


ENDED = (
    "a %s call ended before its answer went out (its client's cancel or deadline, its connection "
    "closed, or a send limit)"
)
STREAM_ENDED = (
    "a %s stream ended before its final status went out (its client's cancel or deadline, its "
    "connection closed)"
)
UNARY_FINISH = ("SendInitialMetadataOperation", "SendMessageOperation", "SendStatusFromServerOperation")
STREAM_FINISH = (
    ["SendStatusFromServerOperation"],
    ["SendInitialMetadataOperation", "SendStatusFromServerOperation"],
)
"""A stream's final batch: its status, with its headers if it wrote no message."""
STREAM_FINISHER = "_finish_handler_with_stream_responses"
"""grpc.aio's function that sends a stream's final batch (an abort's goes by another)."""
BATCH_RAISER = "execute_batch"
_OP = re.compile(r"<grpc\._cython\.cygrpc\.(\w+Operation) object at 0x[0-9a-f]+>")


def batch_ops(text: str) -> list[str] | None:
    """The operation classes of a failed batch's text, in order; None if not that text."""
    if not text.startswith('Failed "execute_batch": (') or not text.endswith(")"):
        return None
    return _OP.findall(text)


def batch_sender(tb: TracebackType | None) -> str | None:
    """The function that awaited the failed batch: the frame before the last ``execute_batch``."""
    names = []
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    if BATCH_RAISER not in names:
        return None
    last = len(names) - 1 - names[::-1].index(BATCH_RAISER)
    return names[last - 1] if last > 0 else None


class EndedAsAnswered(logging.Filter):
    """grpc.aio sends a unary call's answer as one batch (headers, message, status). When the
    call ends in core first (its client cancelled, or its deadline passed, just as the handler
    returned), core fails that batch, and grpc.aio logs ``ExecuteBatchError raised in core by
    servicer method`` at ERROR with a traceback unless its own cancel notice came first: a race
    (server.pyx.pxi ``_handle_exceptions``). A failed batch reads ``Failed "execute_batch": (ops)``;
    a batch core refused to start (a misuse, our bug) reads ``Failed grpc_call_start_batch`` and is
    left as it is. Only the first kind becomes DEBUG, with exactly the unary answer's operations,
    or a stream's final batch (its status) sent by ``STREAM_FINISHER``: the same race as a stream's
    handler returns. An abort's batch and a stream's write stay ERROR."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        text = str(error) if error is not None else ""
        if (
            error is None
            or type(error).__name__ != "ExecuteBatchError"  # grpc's private class, matched by name
            or not str(record.msg).startswith("ExecuteBatchError raised in core by servicer method")
            or not text.startswith('Failed "execute_batch"')
        ):
            return True
        if [op for op in UNARY_FINISH if op in text] == list(UNARY_FINISH):
            said = ENDED
        elif batch_ops(text) in STREAM_FINISH and batch_sender(error.__traceback__) == STREAM_FINISHER:
            said = STREAM_ENDED
        else:
            return True
        method = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        record.msg, record.args = said, (method,)
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def tame_grpc_logs() -> None:
    """Install ``RedactMetadata`` and ``EndedAsAnswered`` on grpcio's logger (once each). A
    logger's filters see its records before any handler does, whatever the format or handler."""
    logger = logging.getLogger(GRPC_CYTHON_LOGGER)
    for kind in (RedactMetadata, EndedAsAnswered):
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())
