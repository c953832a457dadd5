"""The CoDealerService servicer and the co-dealer's gRPC server (``fairdeck codealer serve``).

Protobuf in, ``CoDealer`` calls (run in a worker thread: shuffles and proofs take tens of
milliseconds of CPU), protobuf out; refusals end through status.py with their stable reason.
A ledger that cannot write answers UNAVAILABLE STORAGE_UNAVAILABLE: nothing was given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from fairdeck.v1 import codealer_pb2 as pb
from fairdeck.v1 import codealer_pb2_grpc
from fairdeck_server import refusals
from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import LedgerError
from fairdeck_server.edge.status import translated
from fairdeck_server.vault import VaultError

T = TypeVar("T")


async def _run(work: Callable[[], T]) -> T:
    try:
        return await asyncio.to_thread(work)
    except LedgerError as e:
        raise refusals.storage_unavailable(str(e)) from None
    except VaultError as e:
        raise refusals.seed_unavailable(str(e)) from None


class CoDealerServicer(codealer_pb2_grpc.CoDealerServiceServicer):
    def __init__(self, codealer: CoDealer) -> None:
        self.codealer = codealer

    @translated
    async def AnnounceHand(self, request: pb.AnnounceHandRequest, context: Any) -> pb.AnnounceHandResponse:
        record, signature = await _run(
            lambda: self.codealer.announce(
                request.hand_id, request.deck, request.holder, request.holder_count
            )
        )
        return pb.AnnounceHandResponse(
            key_record=record, key_record_signature=signature, identity_key=self.codealer.identity_key
        )

    @translated
    async def ShuffleDeck(self, request: pb.ShuffleDeckRequest, context: Any) -> pb.ShuffleDeckResponse:
        record, signature = await _run(
            lambda: self.codealer.shuffle(
                request.hand_id, list(request.key_records), list(request.shuffle_records)
            )
        )
        return pb.ShuffleDeckResponse(shuffle_record=record, shuffle_record_signature=signature)

    @translated
    async def GetShare(self, request: pb.GetShareRequest, context: Any) -> pb.GetShareResponse:
        given = await _run(
            lambda: self.codealer.share(
                request.hand_id,
                request.position,
                request.seat_public_key,
                list(request.later_shuffle_records),
                request.count,
                list(request.seat_public_keys),
            )
        )
        return pb.GetShareResponse(
            shares=given.shares, sealed_shares=given.sealed, seal_signatures=given.seal_signatures
        )

    @translated
    async def RevealSeed(self, request: pb.RevealSeedRequest, context: Any) -> pb.RevealSeedResponse:
        return pb.RevealSeedResponse(seed=await _run(lambda: self.codealer.reveal(request.hand_id)))

    @translated
    async def GetIdentity(self, request: pb.GetIdentityRequest, context: Any) -> pb.GetIdentityResponse:
        return pb.GetIdentityResponse(identity_key=self.codealer.identity_key)


async def start_codealer_server(codealer: CoDealer, listen: str) -> tuple[grpc.aio.Server, int]:
    """A started gRPC server for ``codealer`` on ``listen`` (plain text) and its bound port (0 if
    it could not bind)."""
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    codealer_pb2_grpc.add_CoDealerServiceServicer_to_server(CoDealerServicer(codealer), server)
    port = server.add_insecure_port(listen)
    if port:
        await server.start()
    return server, port
