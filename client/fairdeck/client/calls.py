"""Everything the two dealer clients share that does no I/O.

Each public operation is described once here as a ``Call``: the RPC name,
the request message, and how to turn the response into SDK types. The sync
and async clients (client.py) only differ in how they send it.
"""

from __future__ import annotations

import json
import random
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf.message import Message

from fairdeck.client.models import DealtHand, Draw, Hand, LogReceipt, cards, client_seed_to_proto
from fairdeck.client.seeds import sdk_seed
from fairdeck.core.cards import Card
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.wire import AUTHORIZATION, is_loopback

R = TypeVar("R")
SERVICE = "fairdeck.v1.DealerService"
MAX_MESSAGE_BYTES = 4 * 1024 * 1024

# Retried on UNAVAILABLE by gRPC itself: only calls that are safe to repeat.
# Opens are safe because the SDK always sends a request_id (see below).
RETRYABLE_METHODS = ("GetHand", "CloseHand", "OpenHand", "DealNewHand")
SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{"service": SERVICE, "method": m} for m in RETRYABLE_METHODS],
                "retryPolicy": {
                    "maxAttempts": 4,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
)


IDEMPOTENT_METHODS = frozenset(
    {
        *RETRYABLE_METHODS,
        "GetCheckpoint",
        "ListEntries",
        "GetInclusionProof",
        "GetConsistencyProof",
        "GetPublicKey",
    }
)
"""Calls the SDK may repeat after a RESOURCE_EXHAUSTED with RetryInfo: reads, opens with a
request id, closes; DrawCards too when it carries an expected_position (``retry_delay_for``)."""


def retry_delay_for(
    method: str, request: Any, error: Exception, attempt: int, config: ClientConfig
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1`` of ``method``, or None: do not retry.

    Only a call safe to repeat, only a refusal that says when to come back (the dealer's
    RetryInfo), only within ``config.retries`` and ``config.max_retry_delay``; a little jitter so
    that refused callers do not come back all at once."""
    delay = getattr(error, "retry_delay", None)
    if attempt >= config.retries or delay is None or delay > config.max_retry_delay:
        return None
    if getattr(error, "code", None) is not grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    draw_with_position = method == "DrawCards" and request.HasField("expected_position")
    if method not in IDEMPOTENT_METHODS and not draw_with_position:
        return None
    return float(delay) * (1 + random.random() / 4)


def tls_credentials(
    ca: str | Path | None = None, cert: str | Path | None = None, key: str | Path | None = None
) -> grpc.ChannelCredentials:
    """TLS channel credentials from PEM files.

    ``ca``: the CA bundle that signed the dealer's certificate (None: the
    system's roots). ``cert`` and ``key``: this client's certificate chain and
    private key, for a dealer that requires mTLS; give both or neither.
    """
    if (cert is None) != (key is None):
        raise ValueError("give both cert and key (mTLS), or neither")
    return grpc.ssl_channel_credentials(
        root_certificates=Path(ca).read_bytes() if ca is not None else None,
        private_key=Path(key).read_bytes() if key is not None else None,
        certificate_chain=Path(cert).read_bytes() if cert is not None else None,
    )


@dataclass(frozen=True)
class ClientConfig:
    """How a client reaches the dealer. Shared by DealerClient and AsyncDealerClient.

    An API token is never sent in plain text to a target off this machine:
    that raises ValueError unless ``insecure`` says the network is trusted
    (e.g. a TLS-terminating sidecar on the pod).
    """

    target: str = "127.0.0.1:50051"
    """host:port of the dealer."""
    _: KW_ONLY  # the rest by name: several are optional and of like types, so order is a trap
    credentials: grpc.ChannelCredentials | None = None
    """TLS (or mTLS) credentials; None for a plain-text channel on a trusted network."""
    api_token: str | None = field(default=None, repr=False)
    """Sent as ``authorization: Bearer <token>``."""
    metadata: tuple[tuple[str, str], ...] = ()
    """Extra metadata sent with every call."""
    timeout: float | None = 10.0
    """Default deadline of each call, in seconds (None: no deadline)."""
    options: tuple[tuple[str, Any], ...] = ()
    """Extra gRPC channel options."""
    insecure: bool = False
    """Allow sending the API token in plain text to a non-loopback target."""
    retries: int = 2
    """How often a call that is safe to repeat is retried after the dealer refused it with
    RESOURCE_EXHAUSTED and a RetryInfo delay (rate and open-hand limits), after that delay.
    UNAVAILABLE is retried by gRPC itself (``SERVICE_CONFIG``). 0: never."""
    max_retry_delay: float = 5.0
    """The longest RetryInfo delay the SDK waits out; a longer one is raised at once."""

    def __post_init__(self) -> None:
        if self.api_token and self.credentials is None and not self.insecure and not is_loopback(self.target):
            raise ValueError(
                f"refusing to send an API token in plain text to {self.target}: "
                "pass TLS credentials (tls_credentials(ca=...)) or insecure=True"
            )

    tls_credentials = staticmethod(tls_credentials)

    def channel_options(self) -> list[tuple[str, Any]]:
        return [
            ("grpc.service_config", SERVICE_CONFIG),
            ("grpc.enable_retries", 1),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            *self.options,
        ]

    def channel(self) -> grpc.Channel:
        """A blocking channel to the target, TLS when credentials are set."""
        if self.credentials is not None:
            return grpc.secure_channel(self.target, self.credentials, self.channel_options())
        return grpc.insecure_channel(self.target, self.channel_options())

    def aio_channel(self) -> grpc.aio.Channel:
        """An asyncio channel to the target, TLS when credentials are set."""
        if self.credentials is not None:
            return grpc.aio.secure_channel(self.target, self.credentials, self.channel_options())
        return grpc.aio.insecure_channel(self.target, self.channel_options())

    def call_metadata(self) -> tuple[tuple[str, str], ...]:
        token = ((AUTHORIZATION, f"Bearer {self.api_token}"),) if self.api_token else ()
        return token + self.metadata


@dataclass(frozen=True)
class Call(Generic[R]):
    """One unary RPC: what to send and how to read the answer."""

    method: str
    request: Message
    parse: Callable[[Any], R]


@dataclass(frozen=True)
class Deal:
    """A hand opened, shuffled and dealt in one call."""

    hand: Hand
    cards: tuple[Card, ...]


def _seeds(client_seeds: Iterable[str | bytes]) -> list[pb.ClientSeed]:
    return [client_seed_to_proto(s) for s in client_seeds]


def _request_id(request_id: str | None) -> str:
    # Every open carries an id, so a retry after a lost answer finds the same
    # hand instead of committing a second deck. Time-ordered (milliseconds, then
    # 64 random bits) so the dealer's index on it grows at one end.
    if request_id is not None:
        return request_id
    return f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(8)}"


def open_hand(deck: str, request_id: str | None) -> Call[Hand]:
    return Call(
        "OpenHand",
        pb.OpenHandRequest(deck=deck, request_id=_request_id(request_id)),
        lambda r: Hand.from_proto(r.hand),
    )


def add_client_seeds(hand_id: str, client_seeds: Sequence[str | bytes]) -> Call[Hand]:
    return Call(
        "AddClientSeeds",
        pb.AddClientSeedsRequest(hand_id=hand_id, client_seeds=_seeds(client_seeds)),
        lambda r: Hand.from_proto(r.hand),
    )


def shuffle(hand_id: str, client_seeds: Sequence[str | bytes], *, add_sdk_seed: bool = False) -> Call[Hand]:
    # No seeds from the game server: the SDK adds one fresh random seed of its own, made now,
    # after the dealer's commitment, and marked as the SDK's in the transcript (seeds.sdk_seed).
    if add_sdk_seed and not client_seeds:
        client_seeds = (sdk_seed(),)
    return Call(
        "ShuffleHand",
        pb.ShuffleHandRequest(hand_id=hand_id, client_seeds=_seeds(client_seeds)),
        lambda r: Hand.from_proto(r.hand),
    )


def draw(hand_id: str, count: int, expected_position: int | None = None) -> Call[Draw]:
    request = pb.DrawCardsRequest(hand_id=hand_id, count=count)
    if expected_position is not None:
        request.expected_position = expected_position
    return Call(
        "DrawCards",
        request,
        lambda r: Draw(cards(r.deck, r.cards), r.position, r.remaining_count),
    )


def deal(hand_id: str) -> Call[Draw]:
    return Call(
        "DealHand",
        pb.DealHandRequest(hand_id=hand_id),
        lambda r: Draw(cards(r.deck, r.cards), r.position, 0),
    )


def deal_new_hand(deck: str, client_seeds: Sequence[str | bytes], request_id: str | None) -> Call[Deal]:
    return Call(
        "DealNewHand",
        pb.DealNewHandRequest(
            deck=deck, client_seeds=_seeds(client_seeds), request_id=_request_id(request_id)
        ),
        lambda r: Deal(Hand.from_proto(r.hand), cards(r.hand.deck, r.cards)),
    )


def close(hand_id: str) -> Call[Hand]:
    return Call("CloseHand", pb.CloseHandRequest(hand_id=hand_id), lambda r: Hand.from_proto(r.hand))


def get(hand_id: str) -> Call[Hand]:
    return Call("GetHand", pb.GetHandRequest(hand_id=hand_id), lambda r: Hand.from_proto(r.hand))


def deal_hands_request(
    deck: str, hand_count: int, client_seeds: Sequence[str | bytes], close: bool
) -> pb.DealHandsRequest:
    return pb.DealHandsRequest(
        deck=deck, hand_count=hand_count, client_seeds=_seeds(client_seeds), close=close
    )


def dealt_hands(response: pb.DealHandsResponse) -> list[DealtHand]:
    return [
        DealtHand(
            hand_id=h.hand_id,
            deck=response.deck,
            version=response.version,
            commitment=h.commitment,
            cards=cards(response.deck, h.cards),
            commit_receipt=LogReceipt(h.commit_receipt.index),
            server_seed=h.server_seed or None,
            reveal_receipt=LogReceipt(h.reveal_receipt.index) if h.HasField("reveal_receipt") else None,
        )
        for h in response.hands
    ]
