"""Clients of the AuditService that verify everything they receive.

``AuditClient`` (blocking) and ``AsyncAuditClient`` (asyncio) trust only the
verifier keys they are given (one, or a list spanning the log's key rotations, every one used),
and the keys that rotation statements signed by those keys lead to (fairdeck.log.rotation:
followed when a checkpoint does not verify, ``follow_rotations``): checkpoints are
signature-checked, proofs are checked against them, and a hand's log entries are checked against
what the dealer said about the hand. A server, or a proxy, that alters a checkpoint,
a proof or an entry makes them raise VerificationError(step="log").

    with AuditClient("127.0.0.1:50051", verifier=vkey) as log:
        checkpoint = log.verify_hand(closed_hand, commitment=opened.commitment)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

import grpc

from fairdeck.client import calls
from fairdeck.client.calls import RETRIED_CODES, USE_CLIENT_DEFAULT, Deadline, Timeout
from fairdeck.client.channel import PAGE_SIZE, AsyncClient, EntryPager, SyncClient, _Configured
from fairdeck.client.exceptions import FairdeckError
from fairdeck.client.models import Hand
from fairdeck.core.errors import VerificationError
from fairdeck.log.audit import Auditor, AuditReport, CodealChecks
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.cosignature import WitnessPolicy
from fairdeck.log.handproof import ROTATED, HandProof
from fairdeck.log.logentry import CommitEntry, EntryError, RevealEntry, decode
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import (
    InclusionProof,
    check_commit_entry,
    check_reveal_entry,
    open_signed_checkpoint,
    verify_consistency,
)
from fairdeck.log.rotation import Rotation, chain_to, follow
from fairdeck.v1 import audit_pb2 as pb
from fairdeck.v1 import audit_pb2_grpc, dealer_pb2_grpc
from fairdeck.wire import Reason

T = TypeVar("T")


def _proof_request(
    index: int | None, hand_id: str | None, reveal: bool, tree_size: int
) -> pb.GetInclusionProofRequest:
    kind = pb.ENTRY_KIND_REVEAL if reveal else pb.ENTRY_KIND_COMMIT
    if index is not None:
        return pb.GetInclusionProofRequest(index=index, kind=kind, tree_size=tree_size)
    return pb.GetInclusionProofRequest(hand_id=hand_id or "", kind=kind, tree_size=tree_size)


def _proof(r: pb.GetInclusionProofResponse) -> InclusionProof:
    return InclusionProof(r.index, r.tree_size, tuple(r.hashes), r.entry, r.signed_checkpoint)


def _hand_requests(hand: Hand) -> list[tuple[pb.GetInclusionProofRequest, int]]:
    wanted = [(_proof_request(hand.commit_receipt.index, None, False, 0), hand.commit_receipt.index)]
    if hand.transcript is not None and hand.reveal_receipt is not None:
        wanted.append((_proof_request(hand.reveal_receipt.index, None, True, 0), hand.reveal_receipt.index))
    return wanted


def _check_hand(
    hand: Hand,
    proofs: list[InclusionProof],
    verifier: Sequence[Verifier],
    commitment: bytes | None,
    policy: WitnessPolicy | None,
) -> Checkpoint:
    checkpoints = []
    for i, proof in enumerate(proofs):
        checkpoints.append(proof.verify(verifier, policy=policy))
        if i == 0:
            check_commit_entry(proof.entry, hand, commitment)
        else:
            check_reveal_entry(proof.entry, hand)
    return max(checkpoints, key=lambda cp: cp.size)


def _checked(proof: InclusionProof, index: int | None, hand_id: str | None, reveal: bool) -> InclusionProof:
    """The proof is of the entry asked for: that index, or that hand's commit or reveal."""
    if index is not None:
        return _checked_index(proof, index)
    try:
        entry = decode(proof.entry)
    except EntryError as e:
        raise VerificationError("log", f"log entry does not parse: {e}") from None
    kind = RevealEntry if reveal else CommitEntry
    if not isinstance(entry, kind) or entry.hand_id != hand_id:
        what = "reveal" if reveal else "commitment"
        raise VerificationError("log", f"the proof is not of the {what} of hand {hand_id}")
    return proof


def _closed(hand: Hand) -> None:
    if hand.transcript is None:
        raise VerificationError("format", f"hand {hand.hand_id} is not closed: its proof exists once it is")


def _hand_proof(
    hand: Hand,
    commit: InclusionProof,
    reveal: InclusionProof,
    verifier: Sequence[Verifier],
    policy: WitnessPolicy | None,
    statements: Sequence[bytes] = (),
) -> HandProof:
    """The proof, in format 3 with the rotation statements that lead to the checkpoint's key when
    there are any (a player who holds an older key follows them), else in format 1."""
    _closed(hand)
    assert hand.transcript is not None
    dealt = tuple(hand.transcript.codes()[: hand.dealt_count])
    chain = tuple(r.note for r in chain_to(statements, reveal.signed_checkpoint))
    proof = HandProof(hand.transcript, dealt, commit, reveal, verifier[0].to_string())
    if chain:
        proof = HandProof(hand.transcript, dealt, commit, reveal, verifier[0].to_string(), ROTATED, chain)
    proof.verify(verifier, policy)
    return proof


def _verifiers(verifier: Verifier | str | Sequence[Verifier | str]) -> list[Verifier]:
    given = [verifier] if isinstance(verifier, Verifier | str) else list(verifier)
    if not given:
        raise ValueError("no verifier key given")
    return [Verifier.parse(v) if isinstance(v, str) else v for v in given]


def _checkpoint_notes(response: pb.GetCheckpointResponse | None) -> list[bytes]:
    """The latest checkpoint's note, or none for a dealer that has signed nothing yet."""
    return [] if response is None else [response.signed_checkpoint]


def _no_checkpoint(error: FairdeckError) -> bool:
    return error.reason == Reason.NO_CHECKPOINT


def _checked_index(proof: InclusionProof, index: int) -> InclusionProof:
    if proof.index != index:
        raise VerificationError("log", f"asked for entry {index}, the proof is for entry {proof.index}")
    return proof


class _Verifying(_Configured):
    """What both audit clients add to the shared constructor: the log's verifier key,
    taken first, and a longer default timeout (proofs of a large log take longer)."""

    _STUB = audit_pb2_grpc.AuditServiceStub

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        verifier: Verifier | str | Sequence[Verifier | str],
        witness_policy: WitnessPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        api_token: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        timeout: float | None = 30.0,
        insecure: bool = False,
        retries: int = 2,
        max_retry_delay: float = 5.0,
        retry_backoff: float = 0.1,
        retry_codes: Collection[grpc.StatusCode] = RETRIED_CODES,
    ) -> None:
        self.verifiers = _verifiers(verifier)
        """Every key a checkpoint may be signed by: those given, then those rotations led to."""
        self.witness_policy = witness_policy
        """With a policy, every checkpoint must carry its threshold of valid witness cosignatures,
        or VerificationError(step="cosignatures") names who signed and who is missing."""
        super().__init__(
            target,
            credentials=credentials,
            api_token=api_token,
            metadata=metadata,
            timeout=timeout,
            insecure=insecure,
            retries=retries,
            max_retry_delay=max_retry_delay,
            retry_backoff=retry_backoff,
            retry_codes=retry_codes,
        )

    @property
    def verifier(self) -> Verifier:
        """The first key given."""
        return self.verifiers[0]

    def _followed(self, response: pb.GetPublicKeyResponse) -> list[Rotation]:
        self.verifiers, followed = follow(self.verifiers, list(response.key_rotations))
        return followed

    def _auditor(self, notes: list[bytes], max_hand_lifetime: float, since: bytes | None) -> Auditor:
        return Auditor(
            self.verifiers,
            max_hand_lifetime_ms=int(max_hand_lifetime * 1000),
            since=since,
            checkpoints=notes,
            policy=self.witness_policy,
            codeal=codeal_checks,
        )


def codeal_checks(codealer_keys: Sequence[bytes] = ()) -> CodealChecks:
    """The checks of co-dealt entries, made at a log's first one: only then is the co-dealt code
    (libsodium) loaded. ``codealer_keys``: pinned co-dealer identity keys, holder order (seals)."""
    from fairdeck.codeal.log_audit import CodealLogAudit

    return CodealLogAudit(codealer_keys=tuple(codealer_keys))


class AuditClient(_Verifying, SyncClient):
    """A blocking, verifying client of the dealer's transparency log."""

    def follow_rotations(
        self, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> list[Rotation]:
        """Read the log key's rotation statements and trust each key they lead to from a key
        trusted already; return the rotations followed (none: nothing new)."""
        return self._follow(timeout, request_id)

    def _follow(self, timeout: Timeout | Deadline, request_id: str | None = None) -> list[Rotation]:
        return self._followed(self._call("GetPublicKey", pb.GetPublicKeyRequest(), timeout, request_id))

    def _verified(self, check: Callable[[], T], timeout: Timeout | Deadline) -> T:
        """``check()``; if it fails and a rotation leads to a key not trusted yet, again with it."""
        try:
            return check()
        except VerificationError:
            if not self._follow(timeout):
                raise
            return check()

    def _call(self, method: str, request: Any, timeout: Timeout | Deadline, request_id: str | None) -> Any:
        return self._unary(method, request, timeout=timeout, request_id=request_id)

    def checkpoint(
        self, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Checkpoint:
        """The latest checkpoint, signature-checked."""
        r = self._call("GetCheckpoint", pb.GetCheckpointRequest(), timeout, request_id)
        return self._verified(
            lambda: open_signed_checkpoint(r.signed_checkpoint, self.verifiers, policy=self.witness_policy),
            timeout,
        )

    def inclusion_proof(
        self,
        index: int | None = None,
        *,
        hand_id: str | None = None,
        reveal: bool = False,
        tree_size: int = 0,
        codealt: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> InclusionProof:
        """A verified inclusion proof, by entry index or by hand (commit or reveal entry).
        ``codealt``: the entry at ``index`` is a co-dealt one (types 3 to 7), which
        ``fairdeck.codeal.entries`` reads: its signature and audit path are checked here, not its bytes."""
        return self._inclusion_proof(index, hand_id, reveal, tree_size, timeout, request_id, codealt)

    def _inclusion_proof(
        self,
        index: int | None,
        hand_id: str | None,
        reveal: bool,
        tree_size: int,
        timeout: Timeout | Deadline,
        request_id: str | None,
        codealt: bool = False,
    ) -> InclusionProof:
        request = _proof_request(index, hand_id, reveal, tree_size)
        proof = _proof(self._call("GetInclusionProof", request, timeout, request_id))
        self._verified(
            lambda: proof.verify(self.verifiers, policy=self.witness_policy, parse_entry=not codealt), timeout
        )
        return _checked(proof, index, hand_id, reveal)

    def verify_hand(
        self,
        hand: Hand,
        *,
        commitment: bytes | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Checkpoint:
        """Prove the hand's commitment (and, once closed, its reveal) is in the signed log.
        ``timeout`` is for all of its calls together."""
        deadline = Deadline(timeout, self.config.timeout)
        proofs = [
            _checked_index(_proof(self._call("GetInclusionProof", req, deadline, request_id)), i)
            for req, i in _hand_requests(hand)
        ]
        return self._verified(
            lambda: _check_hand(hand, proofs, self.verifiers, commitment, self.witness_policy), deadline
        )

    def consistency(
        self, old: Checkpoint, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Checkpoint:
        """Prove the latest signed log extends ``old``; return the latest checkpoint."""
        r = self._call(
            "GetConsistencyProof",
            pb.GetConsistencyProofRequest(first_tree_size=old.size),
            timeout,
            request_id,
        )
        return self._verified(
            lambda: verify_consistency(
                old, r.signed_checkpoint, tuple(r.hashes), self.verifiers, self.witness_policy
            ),
            timeout,
        )

    def hand_proof(
        self, hand: Hand | str, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> HandProof:
        """A closed hand's one-file proof (docs/hand-proof.md), verified before it is returned.

        ``hand`` is the closed ``Hand`` or its id (then read with GetHand on this channel). Both
        receipts lead to the latest checkpoint (the latest final one, with witnesses). After a log
        key rotation the proof is of format 3 and carries the statements (from GetPublicKey) that
        lead to the checkpoint's key. ``timeout`` is for all of its calls together."""
        deadline = Deadline(timeout, self.config.timeout)
        if isinstance(hand, str):
            get = calls.get(hand)
            dealer = dealer_pb2_grpc.DealerServiceStub(self._channel)
            hand = get.parse(
                self._unary(get.method, get.request, timeout=deadline, request_id=request_id, stub=dealer)
            )
        _closed(hand)
        reveal = self._inclusion_proof(None, hand.hand_id, True, 0, deadline, request_id)
        commit = self._inclusion_proof(None, hand.hand_id, False, reveal.tree_size, deadline, request_id)
        key = self._call("GetPublicKey", pb.GetPublicKeyRequest(), deadline, request_id)
        return _hand_proof(hand, commit, reveal, self.verifiers, self.witness_policy, key.key_rotations)

    def entries(
        self, start: int = 0, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """Every entry from ``start`` on, as (index, bytes), in order. ``timeout`` is for each
        page (a log of millions of entries takes a while)."""
        pager = EntryPager(start, PAGE_SIZE)
        while not pager.done:
            yield from pager.take(self._call("ListEntries", pager.request(), timeout, request_id))

    def audit(
        self,
        *,
        max_hand_lifetime: float,
        since: bytes | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> AuditReport:
        """The whole audit of ``fairdeck audit --target`` (fairdeck.log.audit): every entry
        replayed against the latest checkpoint, with the dealer's key rotation statements followed
        from the keys given, and hands judged overdue by the log's own time, never this machine's
        (``max_hand_lifetime``: the dealer's, in seconds). ``since``: a checkpoint note saved by an
        earlier audit, proven a prefix. ``timeout`` is for each call."""
        try:
            head = self._call("GetCheckpoint", pb.GetCheckpointRequest(), timeout, request_id)
        except FairdeckError as e:
            if not _no_checkpoint(e):
                raise
            head = None
        key = self._call("GetPublicKey", pb.GetPublicKeyRequest(), timeout, request_id)
        auditor = self._auditor(_checkpoint_notes(head) + list(key.key_rotations), max_hand_lifetime, since)
        for _, entry in self.entries(timeout=timeout, request_id=request_id):
            auditor.add(entry)
        return auditor.finish()


class AsyncAuditClient(_Verifying, AsyncClient):
    """An asyncio, verifying client of the dealer's transparency log; same methods, awaited."""

    async def follow_rotations(
        self, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> list[Rotation]:
        """Read the log key's rotation statements and trust each key they lead to from a key
        trusted already; return the rotations followed (none: nothing new)."""
        return await self._follow(timeout, request_id)

    async def _follow(self, timeout: Timeout | Deadline, request_id: str | None = None) -> list[Rotation]:
        response = await self._call("GetPublicKey", pb.GetPublicKeyRequest(), timeout, request_id)
        return self._followed(response)

    async def _verified(self, check: Callable[[], T], timeout: Timeout | Deadline) -> T:
        """``check()``; if it fails and a rotation leads to a key not trusted yet, again with it."""
        try:
            return check()
        except VerificationError:
            if not await self._follow(timeout):
                raise
            return check()

    async def _call(
        self, method: str, request: Any, timeout: Timeout | Deadline, request_id: str | None
    ) -> Any:
        return await self._unary(method, request, timeout=timeout, request_id=request_id)

    async def checkpoint(
        self, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Checkpoint:
        """The latest checkpoint, signature-checked."""
        r = await self._call("GetCheckpoint", pb.GetCheckpointRequest(), timeout, request_id)
        return await self._verified(
            lambda: open_signed_checkpoint(r.signed_checkpoint, self.verifiers, policy=self.witness_policy),
            timeout,
        )

    async def inclusion_proof(
        self,
        index: int | None = None,
        *,
        hand_id: str | None = None,
        reveal: bool = False,
        tree_size: int = 0,
        codealt: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> InclusionProof:
        """A verified inclusion proof, by entry index or by hand (commit or reveal entry).
        ``codealt``: the entry at ``index`` is a co-dealt one (types 3 to 7), which
        ``fairdeck.codeal.entries`` reads: its signature and audit path are checked here, not its bytes."""
        return await self._inclusion_proof(index, hand_id, reveal, tree_size, timeout, request_id, codealt)

    async def _inclusion_proof(
        self,
        index: int | None,
        hand_id: str | None,
        reveal: bool,
        tree_size: int,
        timeout: Timeout | Deadline,
        request_id: str | None,
        codealt: bool = False,
    ) -> InclusionProof:
        request = _proof_request(index, hand_id, reveal, tree_size)
        proof = _proof(await self._call("GetInclusionProof", request, timeout, request_id))
        await self._verified(
            lambda: proof.verify(self.verifiers, policy=self.witness_policy, parse_entry=not codealt), timeout
        )
        return _checked(proof, index, hand_id, reveal)

    async def verify_hand(
        self,
        hand: Hand,
        *,
        commitment: bytes | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Checkpoint:
        """Prove the hand's commitment (and, once closed, its reveal) is in the signed log.
        ``timeout`` is for all of its calls together."""
        deadline = Deadline(timeout, self.config.timeout)
        proofs = [
            _checked_index(_proof(await self._call("GetInclusionProof", req, deadline, request_id)), i)
            for req, i in _hand_requests(hand)
        ]
        return await self._verified(
            lambda: _check_hand(hand, proofs, self.verifiers, commitment, self.witness_policy), deadline
        )

    async def consistency(
        self, old: Checkpoint, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Checkpoint:
        """Prove the latest signed log extends ``old``; return the latest checkpoint."""
        r = await self._call(
            "GetConsistencyProof",
            pb.GetConsistencyProofRequest(first_tree_size=old.size),
            timeout,
            request_id,
        )
        return await self._verified(
            lambda: verify_consistency(
                old, r.signed_checkpoint, tuple(r.hashes), self.verifiers, self.witness_policy
            ),
            timeout,
        )

    async def hand_proof(
        self, hand: Hand | str, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> HandProof:
        """A closed hand's one-file proof (docs/hand-proof.md), verified before it is returned.

        ``hand`` is the closed ``Hand`` or its id (then read with GetHand on this channel). Both
        receipts lead to the latest checkpoint (the latest final one, with witnesses). After a log
        key rotation the proof is of format 3 and carries the statements (from GetPublicKey) that
        lead to the checkpoint's key. ``timeout`` is for all of its calls together."""
        deadline = Deadline(timeout, self.config.timeout)
        if isinstance(hand, str):
            get = calls.get(hand)
            dealer = dealer_pb2_grpc.DealerServiceStub(self._channel)
            hand = get.parse(
                await self._unary(
                    get.method, get.request, timeout=deadline, request_id=request_id, stub=dealer
                )
            )
        _closed(hand)
        reveal = await self._inclusion_proof(None, hand.hand_id, True, 0, deadline, request_id)
        commit = await self._inclusion_proof(
            None, hand.hand_id, False, reveal.tree_size, deadline, request_id
        )
        key = await self._call("GetPublicKey", pb.GetPublicKeyRequest(), deadline, request_id)
        return _hand_proof(hand, commit, reveal, self.verifiers, self.witness_policy, key.key_rotations)

    async def entries(
        self, start: int = 0, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> AsyncIterator[tuple[int, bytes]]:
        """Every entry from ``start`` on, as (index, bytes), in order. ``timeout`` is for each
        page (a log of millions of entries takes a while)."""
        pager = EntryPager(start, PAGE_SIZE)
        while not pager.done:
            for entry in pager.take(await self._call("ListEntries", pager.request(), timeout, request_id)):
                yield entry

    async def audit(
        self,
        *,
        max_hand_lifetime: float,
        since: bytes | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> AuditReport:
        """The whole audit of ``fairdeck audit --target`` (fairdeck.log.audit): every entry
        replayed against the latest checkpoint, with the dealer's key rotation statements followed
        from the keys given, and hands judged overdue by the log's own time, never this machine's
        (``max_hand_lifetime``: the dealer's, in seconds). ``since``: a checkpoint note saved by an
        earlier audit, proven a prefix. ``timeout`` is for each call."""
        try:
            head = await self._call("GetCheckpoint", pb.GetCheckpointRequest(), timeout, request_id)
        except FairdeckError as e:
            if not _no_checkpoint(e):
                raise
            head = None
        key = await self._call("GetPublicKey", pb.GetPublicKeyRequest(), timeout, request_id)
        auditor = self._auditor(_checkpoint_notes(head) + list(key.key_rotations), max_hand_lifetime, since)
        async for _, entry in self.entries(timeout=timeout, request_id=request_id):
            auditor.add(entry)
        return auditor.finish()
