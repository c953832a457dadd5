"""The AuditService edge: the log's checkpoints, entries and proofs over gRPC.

Every proof is made for a tree size that has a signed checkpoint, and is
returned with that checkpoint, so proof and root always come from the same
tree size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from fairdeck.v1 import audit_pb2 as pb
from fairdeck.v1 import audit_pb2_grpc
from fairdeck.wire import Reason
from fairdeck_server import refusals
from fairdeck_server.dealing.dealer import validate_hand_id
from fairdeck_server.edge.status import translated
from fairdeck_server.publishing.log_signing import CheckpointPublisher
from fairdeck_server.storage.base import Storage, StoredCheckpoint

MAX_PAGE = 1000
DEFAULT_PAGE = 100
# A page ends early rather than pass this many bytes of entries, so that a page
# of large reveals (64 client seeds each) stays under gRPC's 4 MiB default, or
# under three quarters of a smaller --max-message-bytes.
PAGE_BYTES = 3 * 1024 * 1024
# Indexes and sizes are stored as signed 64-bit integers; the proto's uint64
# allows more. Nothing at or past this exists, and storage must not see it.
INDEX_LIMIT = 2**63 - 1
PAGE_TOKEN = re.compile(r"[0-9]{1,19}")


class AuditServicer(audit_pb2_grpc.AuditServiceServicer):
    def __init__(
        self,
        storage: Storage,
        publisher: CheckpointPublisher,
        *,
        max_message_bytes: int = 0,
        final: Callable[[], StoredCheckpoint | None] = lambda: None,
        rotations: Sequence[bytes] = (),
    ) -> None:
        self.storage = storage
        self.rotations = list(rotations)
        """The log key file's rotation statements, served with the public key."""
        self.publisher = publisher
        self.final = final
        """The latest checkpoint the witness threshold cosigned, when witnesses are configured:
        it is what "the latest checkpoint" means then, so a client with a witness policy gets one
        it accepts (docs/witness.md, "Final checkpoints")."""
        self.page_bytes = min(PAGE_BYTES, max_message_bytes * 3 // 4) if max_message_bytes else PAGE_BYTES

    async def _checkpoint(self, size: int, field: str = "tree_size") -> StoredCheckpoint:
        """The signed checkpoint at ``size`` (0: the latest, final if witnesses are configured and one
        is); ``field`` names the request's."""
        await self.publisher.ready()  # with --tiles: not before the tiles of every checkpoint are whole
        if size == 0 and (final := self.final()) is not None:
            return final
        cp = await self.storage.checkpoint(size or None) if size < INDEX_LIMIT else None
        if cp is None and size == 0:
            cp = await self.publisher.publish()
        if cp is None:
            raise refusals.no_checkpoint(size, field)
        return cp

    @translated
    async def GetCheckpoint(self, request: pb.GetCheckpointRequest, context: Any) -> pb.GetCheckpointResponse:
        cp = await self._checkpoint(0)
        return pb.GetCheckpointResponse(signed_checkpoint=cp.note, tree_size=cp.size, root_hash=cp.root)

    @translated
    async def ListEntries(self, request: pb.ListEntriesRequest, context: Any) -> pb.ListEntriesResponse:
        start = request.start_index
        if request.page_token:
            if not PAGE_TOKEN.fullmatch(request.page_token):
                raise refusals.invalid(
                    "page_token", Reason.INVALID_PAGE_TOKEN, "not a token from ListEntries"
                )
            start = int(request.page_token)
        if not 0 <= request.page_size <= MAX_PAGE:
            raise refusals.invalid("page_size", Reason.INVALID_PAGE_SIZE, f"must be 0..{MAX_PAGE}")
        size = request.page_size or DEFAULT_PAGE
        if start >= INDEX_LIMIT:
            return pb.ListEntriesResponse()  # past the end of any log: an empty last page
        entries = await self.storage.log_entries(start, min(start + size, INDEX_LIMIT))
        page = pb.ListEntriesResponse()
        used = 0
        for i, data in enumerate(entries):
            used += len(data) + 16  # the entry, its index and its framing
            if i and used > self.page_bytes:
                break
            page.entries.add(index=start + i, data=data)
        if len(page.entries) < len(entries) or len(entries) == size:
            page.next_page_token = str(start + len(page.entries))
        return page

    @translated
    async def GetInclusionProof(
        self, request: pb.GetInclusionProofRequest, context: Any
    ) -> pb.GetInclusionProofResponse:
        await self.publisher.ready()
        index = await self._entry_index(request)
        if request.tree_size:
            cp = await self._checkpoint(request.tree_size)
        elif (final := self.final()) is not None and index < final.size:
            cp = final
        else:
            try:
                cp = await self.publisher.covering(index)
            except LookupError:
                raise refusals.entry_not_found("index", "no log entry at that index") from None
        if index >= cp.size:
            raise refusals.invalid(
                "tree_size", Reason.ENTRY_NOT_IN_TREE, "the entry is not in a tree of that size"
            )
        hashes = await self.storage.inclusion_proof(index, cp.size)
        (entry,) = await self.storage.log_entries(index, index + 1)
        return pb.GetInclusionProofResponse(
            index=index, tree_size=cp.size, hashes=hashes, entry=entry, signed_checkpoint=cp.note
        )

    async def _entry_index(self, request: pb.GetInclusionProofRequest) -> int:
        which = request.WhichOneof("entry")
        if which == "index":
            if request.index >= INDEX_LIMIT:
                raise refusals.entry_not_found("index", "no log entry at that index")
            return request.index
        if which != "hand_id":
            raise refusals.invalid("entry", Reason.MISSING_ENTRY, "set index or hand_id")
        validate_hand_id(request.hand_id)
        if request.kind not in (pb.ENTRY_KIND_COMMIT, pb.ENTRY_KIND_REVEAL):
            raise refusals.invalid("kind", Reason.INVALID_ENTRY_KIND, "COMMIT or REVEAL")
        index = await self.storage.entry_index(request.hand_id, reveal=request.kind == pb.ENTRY_KIND_REVEAL)
        if index is None:
            raise refusals.entry_not_found("hand_id", "no such entry")
        return index

    @translated
    async def GetConsistencyProof(
        self, request: pb.GetConsistencyProofRequest, context: Any
    ) -> pb.GetConsistencyProofResponse:
        cp = await self._checkpoint(request.second_tree_size, "second_tree_size")
        if request.second_tree_size == 0 and cp.size < request.first_tree_size:
            # The latest final checkpoint is behind the caller's (one it got from a proof that
            # could not wait for the witnesses): prove against the latest signed one instead.
            cp = await self.storage.checkpoint() or cp
        if not 1 <= request.first_tree_size <= cp.size:
            raise refusals.invalid("first_tree_size", Reason.INVALID_TREE_SIZE, f"must be 1..{cp.size}")
        hashes = await self.storage.consistency_proof(request.first_tree_size, cp.size)
        return pb.GetConsistencyProofResponse(
            first_tree_size=request.first_tree_size,
            second_tree_size=cp.size,
            hashes=hashes,
            signed_checkpoint=cp.note,
        )

    @translated
    async def GetPublicKey(self, request: pb.GetPublicKeyRequest, context: Any) -> pb.GetPublicKeyResponse:
        signer = self.publisher.signer
        return pb.GetPublicKeyResponse(
            origin=signer.name, verifier_key=signer.verifier.to_string(), key_rotations=self.rotations
        )
