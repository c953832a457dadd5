"""Who a call runs as: its tenant and role, set by the auth layer for the
duration of one call and read by the servicers, the limits and the logs.

>>> current().tenant
'default'
>>> check_tenant("acme-eu.1")
'acme-eu.1'
"""

from __future__ import annotations

import enum
import re
from contextvars import ContextVar
from dataclasses import dataclass

DEFAULT_TENANT = "default"
TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A tenant name: 1..64 of A-Z a-z 0-9 . _ -, not starting with a symbol. Narrow on
purpose: it appears in certificate URIs, metric labels and log lines unescaped."""


class Role(enum.StrEnum):
    DEALER = "dealer"
    """Opens, deals and closes hands of its own tenant; reads the log."""
    AUDITOR = "auditor"
    """Reads the log and closed hands of its own tenant; cannot open or draw."""


@dataclass(frozen=True)
class Principal:
    tenant: str
    role: Role
    token_id: str | None = None
    """The API token's id (never its secret), or None."""
    subject: str | None = None
    """The client certificate's subject, when the caller used mTLS."""

    def __str__(self) -> str:  # for log lines: nothing secret in it
        via = f" token={self.token_id}" if self.token_id else ""
        return f"{self.tenant}/{self.role.value}{via}"


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


def check_tenant(name: str) -> str:
    """``name`` if it is a valid tenant name; else ValueError."""
    if not isinstance(name, str) or not TENANT_PATTERN.fullmatch(name):
        raise ValueError("a tenant is 1..64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit")
    return name
