"""Everything the two dealer clients share that does no I/O.

Each public operation is described once here as a ``Call``: the RPC name,
the request message, and how to turn the response into SDK types. The sync
and async clients (dealer_client.py) only differ in how they send it.
"""

from __future__ import annotations

import enum
import random
import re
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf.message import Message

from fairdeck.client.local_files import LocalFileError, read_local
from fairdeck.client.models import DealtHand, Draw, Hand, LogReceipt, cards, client_seed_to_proto
from fairdeck.client.player_seeds import sdk_seed
from fairdeck.core.cards import Card
from fairdeck.core.decks import DeckSpec
from fairdeck.core.seeds import normalize_client_seed
from fairdeck.core.transcript import Transcript
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.wire import AUTHORIZATION, is_loopback

R = TypeVar("R")
MAX_MESSAGE_BYTES = 4 * 1024 * 1024

IDEMPOTENT_METHODS = frozenset(
    {
        "GetHand",
        "CloseHand",
        "OpenHand",
        "DealNewHand",
        "GetCheckpoint",
        "ListEntries",
        "GetInclusionProof",
        "GetConsistencyProof",
        "GetPublicKey",
    }
)
"""Calls the SDK may repeat: reads, opens (they always carry a request id, so a repeat finds the
same hand), closes (closing a closed hand returns it as is); DrawCards too when it carries an
expected_position (``retry_delay_for``). AddClientSeeds, ShuffleHand, DealHand, DealHands and a
DrawCards without a position are never repeated: a repeat would add the seeds twice or deal the
next cards."""

RETRIED_CODES = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE})
"""The refusals worth waiting out: a limit (RESOURCE_EXHAUSTED, only with a RetryInfo: without
one it is a message too large, and it stays too large), and a dealer that could not answer or
could not store (UNAVAILABLE: its RetryInfo when it sends one, else a backoff)."""

REQUEST_ID_KEY = "x-request-id"
"""The metadata key of a call's request id, which the dealer puts on every log line of the call
(fairdeck_server.observe.logging_setup: 1 to 128 characters of ``A-Z a-z 0-9 . _ : -``)."""
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class UseClientDefault(enum.Enum):
    """The type of ``USE_CLIENT_DEFAULT``."""

    USE_CLIENT_DEFAULT = "USE_CLIENT_DEFAULT"


USE_CLIENT_DEFAULT = UseClientDefault.USE_CLIENT_DEFAULT
"""A method's ``timeout`` when none is given: the client's (``ClientConfig.timeout``). ``None``
is no deadline at all, as in grpc and httpx."""

Timeout = float | None | UseClientDefault
"""A call's ``timeout=``: seconds, None (no deadline) or USE_CLIENT_DEFAULT."""


def retry_delay_for(
    method: str, request: Any, error: Exception, attempt: int, config: ClientConfig
) -> float | None:
    """Seconds to wait before attempt ``attempt + 2`` of ``method``, or None: do not retry.

    Only a call safe to repeat, only RESOURCE_EXHAUSTED with a RetryInfo (the dealer says when
    to come back) and UNAVAILABLE (after its RetryInfo delay if it sent one, else after
    ``config.retry_backoff`` doubled at each retry), only within ``config.retries`` and
    ``config.max_retry_delay``; a little jitter so that refused callers do not come back all
    at once."""
    code = getattr(error, "code", None)
    if attempt >= config.retries or code not in config.retry_codes:
        return None
    draw_with_position = method == "DrawCards" and request.HasField("expected_position")
    if method not in IDEMPOTENT_METHODS and not draw_with_position:
        return None
    delay = getattr(error, "retry_delay", None)
    if delay is None:
        if code is not grpc.StatusCode.UNAVAILABLE:
            return None
        delay = min(config.retry_backoff * 2**attempt, config.max_retry_delay)
    if delay > config.max_retry_delay:
        return None
    return float(delay) * (1 + random.random() / 4)


class Deadline:
    """When a call (every attempt and every wait between them) must be done: ``timeout``
    seconds from now, the client's default timeout for USE_CLIENT_DEFAULT, never for None."""

    def __init__(self, timeout: Timeout | Deadline, default: float | None) -> None:
        if isinstance(timeout, Deadline):  # a method of several calls: one deadline for all
            self._end: float | None = timeout._end
            return
        seconds = default if timeout is USE_CLIENT_DEFAULT else timeout
        if isinstance(seconds, bool) or (seconds is not None and not isinstance(seconds, int | float)):
            raise TypeError(f"timeout must be seconds, None or USE_CLIENT_DEFAULT, got {seconds!r}")
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        """The timeout of the next attempt (0 when the deadline has passed: gRPC then answers
        DEADLINE_EXCEEDED at once)."""
        return None if self._end is None else max(0.0, self._end - time.monotonic())

    def allows(self, wait: float) -> bool:
        """Whether a retry after ``wait`` seconds would still start before the deadline."""
        return self._end is None or time.monotonic() + wait < self._end


def is_request_id(request_id: str | None) -> bool:
    """Whether the dealer logs this request id (it makes up its own for any other)."""
    return isinstance(request_id, str) and _REQUEST_ID.fullmatch(request_id) is not None


def request_id_metadata(request_id: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata that carries a call's request id (none when None); ValueError for an id the
    dealer would not log (it would make up its own instead)."""
    if request_id is None:
        return ()
    if not is_request_id(request_id):
        raise ValueError("request_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -")
    return ((REQUEST_ID_KEY, request_id),)


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
        root_certificates=_pem(ca, "the CA file"),
        private_key=_pem(key, "the client key"),
        certificate_chain=_pem(cert, "the client certificate"),
    )


def _pem(path: str | Path | None, what: str) -> bytes | None:
    """A PEM file's bytes (a regular file, bounded: local_files); OSError naming it."""
    if path is None:
        return None
    try:
        return read_local(path)
    except OSError as e:
        raise LocalFileError(f"cannot read {what} {path}: {e.strerror or e}") from None


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
    """How often a call that is safe to repeat (``IDEMPOTENT_METHODS``) is retried after one
    of ``retry_codes``: RESOURCE_EXHAUSTED with a RetryInfo delay (rate and open-hand limits)
    after that delay; UNAVAILABLE after its RetryInfo delay, or ``retry_backoff``. 0: never."""
    max_retry_delay: float = 5.0
    """The longest delay the SDK waits out; a longer RetryInfo delay is raised at once."""
    retry_backoff: float = 0.1
    """The wait before the first retry of an UNAVAILABLE without RetryInfo, doubled at each
    retry after it (up to ``max_retry_delay``)."""
    retry_codes: frozenset[grpc.StatusCode] = RETRIED_CODES
    """The status codes retried; a subset of ``RETRIED_CODES`` (no other code says that a
    repeat may succeed)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "retry_codes", frozenset(self.retry_codes))  # a set given: frozen
        if not self.retry_codes <= RETRIED_CODES:
            raise ValueError(f"retry_codes: only {sorted(c.name for c in RETRIED_CODES)} may be retried")
        if self.retries < 0 or self.max_retry_delay < 0 or self.retry_backoff < 0:
            raise ValueError("retries, max_retry_delay and retry_backoff must not be negative")
        if self.api_token and self.credentials is None and not self.insecure and not is_loopback(self.target):
            raise ValueError(
                f"refusing to send an API token in plain text to {self.target}: "
                "pass TLS credentials (tls_credentials(ca=...)) or insecure=True"
            )

    tls_credentials = staticmethod(tls_credentials)

    def channel_options(self) -> list[tuple[str, Any]]:
        return [
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

    def call_metadata(self, request_id: str | None = None) -> tuple[tuple[str, str], ...]:
        """The metadata of a call: the token, ``metadata``, and the call's request id if any,
        which then replaces an ``x-request-id`` in ``metadata``."""
        token = ((AUTHORIZATION, f"Bearer {self.api_token}"),) if self.api_token else ()
        if request_id is None:
            return token + self.metadata
        rest = tuple((k, v) for k, v in self.metadata if k.lower() != REQUEST_ID_KEY)
        return token + rest + request_id_metadata(request_id)

    def request_id(self) -> str | None:
        """The request id that ``metadata`` sends with every call, if it sends one."""
        return next((v for k, v in self.metadata if k.lower() == REQUEST_ID_KEY), None)


@dataclass(frozen=True)
class Call(Generic[R]):
    """One unary RPC: what to send and how to read the answer."""

    method: str
    request: Message
    parse: Callable[[Any], R]
    request_id: str | None = None
    """The request id sent as metadata when the caller gives none: an open's idempotency key,
    so the dealer's log lines of an open carry the key that finds its hand."""


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
    rid = _request_id(request_id)
    return Call(
        "OpenHand", pb.OpenHandRequest(deck=deck, request_id=rid), lambda r: Hand.from_proto(r.hand), rid
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
    rid = _request_id(request_id)
    return Call(
        "DealNewHand",
        pb.DealNewHandRequest(deck=deck, client_seeds=_seeds(client_seeds), request_id=rid),
        lambda r: Deal(Hand.from_proto(r.hand), cards(r.hand.deck, r.cards)),
        rid,
    )


def close_hand(hand_id: str) -> Call[Hand]:
    return Call("CloseHand", pb.CloseHandRequest(hand_id=hand_id), lambda r: Hand.from_proto(r.hand))


def get(hand_id: str) -> Call[Hand]:
    return Call("GetHand", pb.GetHandRequest(hand_id=hand_id), lambda r: Hand.from_proto(r.hand))


def deal_hands_request(
    deck: str, hand_count: int, client_seeds: Sequence[str | bytes], close: bool
) -> pb.DealHandsRequest:
    return pb.DealHandsRequest(
        deck=deck, hand_count=hand_count, client_seeds=_seeds(client_seeds), close=close
    )


class DealtHands:
    """Reads a DealHands stream's messages into ``DealtHand``s. Each hand's transcript (once
    the batch is closed) is built from what the dealer sent of it (id, commitment, seed, deck)
    and the client seeds this client sent for every hand, as the dealer used them (normalised
    once, after the dealer accepted them): ``DealtHand.verify`` checks all of it."""

    def __init__(self, request: pb.DealHandsRequest) -> None:
        self._request = request
        self._seeds: tuple[bytes, ...] | None = None

    def _client_seeds(self) -> tuple[bytes, ...]:
        if self._seeds is None:
            self._seeds = tuple(
                normalize_client_seed(s.text if s.WhichOneof("value") == "text" else s.data)
                for s in self._request.client_seeds
            )
        return self._seeds

    def __call__(self, response: pb.DealHandsResponse) -> list[DealtHand]:
        deck = DeckSpec.parse(response.deck).name
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
                transcript=Transcript(
                    version=response.version,
                    deck=deck,
                    hand_id=h.hand_id,
                    commitment=h.commitment,
                    server_seed=h.server_seed,
                    client_seeds=self._client_seeds(),
                    cards=tuple(h.cards),
                )
                if h.server_seed
                else None,
            )
            for h in response.hands
        ]
