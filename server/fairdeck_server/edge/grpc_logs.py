"""grpcio's own log lines: ``redact_grpc_metadata`` keeps its Cython layer from logging a
metadata value (an API token, secret and all) that is not valid UTF-8 (docs/security.md,
"API tokens"). Imports only logging: installed by ``run.app`` before any call.
"""

from __future__ import annotations

import logging

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


def redact_grpc_metadata() -> None:
    """Install ``RedactMetadata`` on grpcio's logger (once). A logger's filters see its
    records before any handler does, whatever the format or the handler."""
    logger = logging.getLogger(GRPC_CYTHON_LOGGER)
    if not any(isinstance(f, RedactMetadata) for f in logger.filters):
        logger.addFilter(RedactMetadata())
