"""What a PostgreSQL failure means, in words that carry no secret: the only module that reads the
driver's errors. PostgreSQL's messages may quote a value (a seed, a token's digest, a password),
so a failure is named by its class and SQLSTATE alone (``what``); a URL is named by its host, port
and database, never its password (``describe``); a write that failed is refused in one line that
says it may not have been recorded (``not_recorded``).
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict

from fairdeck_server import refusals


def what(e: BaseException) -> str:
    """An exception named without its message (PostgreSQL's may quote values)."""
    state = getattr(e, "sqlstate", None)
    return f"{type(e).__name__}" + (f" (SQLSTATE {state})" if state else "")


def describe(url: str) -> str:
    """host:port/dbname of a URL, never its password."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return "the configured URL"
    return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def not_recorded() -> refusals.DealerError:
    """The refusal of a write whose transaction failed."""
    return refusals.storage_unavailable("storage failed; the request may not have been recorded")
