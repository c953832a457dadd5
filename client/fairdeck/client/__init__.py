"""fairdeck.client: the SDK for a running dealer, over gRPC.

It owns the blocking and asyncio dealer clients (``dealer_client``), what they share without I/O
(``calls``: the calls, ``ClientConfig``, ``tls_credentials``), their channel and error translation
(``channel``), the SDK's types (``models``), its exception per status and reason (``exceptions``),
the players' commit-then-reveal seed protocol (``player_seeds``) and the log auditing clients
(``audit_client``). It may import ``fairdeck.core``, ``fairdeck.log``, the generated
``fairdeck.v1`` and grpc, never the server.
"""

from fairdeck.client.audit_client import AsyncAuditClient, AuditClient
from fairdeck.client.calls import ClientConfig, Deal, tls_credentials
from fairdeck.client.dealer_client import AsyncDealerClient, DealerClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.client.models import DealtHand, Draw, Hand, HandState, LogReceipt
from fairdeck.client.player_seeds import PlayerSeed, SeedOrderError, SeedRound

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
