"""Log lines, as plain text or one JSON object per line, each with the request id of its call.

A call's request id (the client's ``x-request-id`` if sane, else a new one) is bound in a
contextvar for the call, so every line logged inside it carries it. Nothing here logs a request
body, a token or a seed; grpcio's own logger is kept from logging a token by
``edge.grpc_logs`` (docs/operations.md, "Logs").

>>> request_id_from((("x-request-id", "req-1"),))
'req-1'
>>> len(request_id_from((("x-request-id", "bad id\\n"),)))
27
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
import secrets
import sys
import time
from collections.abc import Coroutine, Iterable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, TypeVar

T = TypeVar("T")

REQUEST_ID_KEY = "x-request-id"
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(call_suffix)s"
access_log = logging.getLogger("fairdeck.access")


@dataclass
class CallContext:
    """What the log lines of one call share. ``tenant`` is filled in once the
    caller is known (after authentication), ``code`` when the call ends."""

    request_id: str
    method: str
    tenant: str | None = None


_call: ContextVar[CallContext | None] = ContextVar("fairdeck_call", default=None)


def new_request_id() -> str:
    """Time-ordered (milliseconds, then 64 random bits), like the SDK's ids."""
    return f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(8)}"


def request_id_from(metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The client's request id if it is sane, else a new one."""
    for key, value in metadata or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and REQUEST_ID.fullmatch(value):
            return value
    return new_request_id()


def begin_call(method: str, metadata: Iterable[tuple[str, Any]] | None) -> tuple[CallContext, Token[Any]]:
    """Bind a new call context; ``end_call`` with the token unbinds it."""
    call = CallContext(request_id_from(metadata), method)
    return call, _call.set(call)


def end_call(token: Token[Any]) -> None:
    _call.reset(token)


def current_call() -> CallContext | None:
    return _call.get()


def own_task(coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
    """A task for the dealer's own work that a call set off (a storage probe, a health change):
    it runs outside that call, so its log lines carry no request id that is not theirs."""
    context = contextvars.copy_context()
    context.run(_call.set, None)
    return asyncio.get_running_loop().create_task(coro, name=name, context=context)


def set_tenant(tenant: str) -> None:
    """Record the caller's tenant for the rest of the call's lines (and its access line)."""
    call = _call.get()
    if call is not None:
        call.tenant = tenant


def log_access(call: CallContext, code: str, duration_s: float) -> None:
    """The one access line of a call."""
    if access_log.isEnabledFor(logging.INFO):
        duration_ms = round(duration_s * 1000, 3)
        access_log.info(
            "%s %s %.1f ms", call.method, code, duration_ms, extra={"code": code, "duration_ms": duration_ms}
        )


class CallFilter(logging.Filter):
    """Adds the current call's request_id, method and tenant to every record (None outside a call)."""

    def filter(self, record: logging.LogRecord) -> bool:
        call = _call.get()
        record.request_id = call.request_id if call else None
        record.method = call.method if call else None
        record.tenant = call.tenant if call else None
        record.call_suffix = f" [request_id={call.request_id} tenant={call.tenant or '-'}]" if call else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id,
    method, tenant, and for access lines code and duration_ms."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
            "method": getattr(record, "method", None),
            "tenant": getattr(record, "tenant", None),
        }
        for extra in ("code", "duration_ms"):
            if hasattr(record, extra):
                line[extra] = getattr(record, extra)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(log_format: str = "text", level: str = "INFO", stream: IO[str] | None = None) -> None:
    """Send every log line (ours, gRPC's, asyncio's) to ``stream`` (stderr) in ``log_format``."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(CallFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
