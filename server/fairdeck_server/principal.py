"""Who a call runs as: its tenant and role, set by the auth layer for the
duration of one call and read by the servicers, the limits and the logs.

>>> current().tenant
'default'
"""

from __future__ import annotations

import enum
from contextvars import ContextVar
from dataclasses import dataclass

DEFAULT_TENANT = "default"


class Role(enum.StrEnum):
    DEALER = "dealer"
    """Opens, deals and closes hands of its own tenant; reads the log."""
    AUDITOR = "auditor"
    """Reads the log and closed hands; cannot open or draw."""


@dataclass(frozen=True)
class Principal:
    tenant: str
    role: Role
    token_id: str | None = None
    """The API token's id (never its secret), or None."""
    subject: str | None = None
    """The client certificate's subject, when the caller used mTLS."""


LOCAL = Principal(DEFAULT_TENANT, Role.DEALER)
"""The caller when authentication is off (the loopback quickstart)."""

_current: ContextVar[Principal] = ContextVar("fairdeck_principal", default=LOCAL)


def current() -> Principal:
    return _current.get()


def bind(principal: Principal) -> object:
    """Make ``principal`` current; returns a token for ``unbind``."""
    return _current.set(principal)


def unbind(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]
