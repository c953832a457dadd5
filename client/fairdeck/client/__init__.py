"""fairdeck.client: the SDK for a running dealer, over gRPC.

It owns the blocking and asyncio dealer clients (``dealer_client``), what they share without I/O
(``calls``: the calls, ``ClientConfig``, ``tls_credentials``), their channel and error translation
(``channel``), the SDK's types (``models``), its exception per status and reason (``exceptions``),
the players' commit-then-reveal seed protocol (``player_seeds``) and the log auditing clients
(``audit_client``). It may import ``fairdeck.core``, ``fairdeck.log``, the generated
``fairdeck.v1`` and grpc, never the server.

Its names load on first use (PEP 562), so a module of the package that needs no channel (the
hand-proof files of ``local_files``, the seat's ``codeal_seat``) imports without grpc: ``fairdeck
verify FILE`` never loads it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fairdeck.client.audit_client import AsyncAuditClient, AuditClient
    from fairdeck.client.calls import ClientConfig, Deal, tls_credentials
    from fairdeck.client.dealer_client import AsyncDealerClient, DealerClient
    from fairdeck.client.exceptions import FairdeckError
    from fairdeck.client.models import DealtHand, Draw, Hand, HandState, LogReceipt
    from fairdeck.client.player_seeds import PlayerSeed, SeedOrderError, SeedRound

_HOMES = {
    "AsyncAuditClient": "audit_client",
    "AuditClient": "audit_client",
    "ClientConfig": "calls",
    "Deal": "calls",
    "tls_credentials": "calls",
    "AsyncDealerClient": "dealer_client",
    "DealerClient": "dealer_client",
    "FairdeckError": "exceptions",
    "DealtHand": "models",
    "Draw": "models",
    "Hand": "models",
    "HandState": "models",
    "LogReceipt": "models",
    "PlayerSeed": "player_seeds",
    "SeedOrderError": "player_seeds",
    "SeedRound": "player_seeds",
}
"""Each exported name -> the module of this package that defines it."""

__all__ = [
    "AsyncAuditClient",
    "AsyncDealerClient",
    "AuditClient",
    "ClientConfig",
    "Deal",
    "DealerClient",
    "DealtHand",
    "Draw",
    "FairdeckError",
    "Hand",
    "HandState",
    "LogReceipt",
    "PlayerSeed",
    "SeedOrderError",
    "SeedRound",
    "tls_credentials",
]


_SUBMODULES = frozenset(
    {
        "audit_client",
        "calls",
        "channel",
        "codeal_seat",
        "dealer_client",
        "exceptions",
        "local_files",
        "models",
        "player_seeds",
    }
)
"""The package's modules, attributes of it as after an eager import (``fairdeck.client.exceptions``)."""


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # the import sets it as an attribute
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES, *_SUBMODULES})
