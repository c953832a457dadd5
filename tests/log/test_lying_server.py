"""A lying AuditService: a gRPC proxy between the SDK and a real dealer that
alters what the dealer answers. AuditClient and AsyncAuditClient must raise
VerificationError(step="log") for every lie they can detect, and pass when the
proxy tells the truth.

The proxy is a grpc.aio server with a generic handler of raw bytes that
forwards each AuditService call to the real dealer and hands the parsed
request, response and a way to forward (another) request to the lie under
test. Some lies are made with the log's REAL signing key (a dishonest dealer
rather than a man in the middle): every signature and audit path then
verifies, and only the content check of ``verify_hand`` can catch them, which
is what those tests pin down.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AsyncAuditClient, AuditClient
from fairdeck.client.models import Hand
from fairdeck.core.errors import VerificationError
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.logentry import CommitEntry, RevealEntry, decode
from fairdeck.log.note import Signer, Verifier
from fairdeck.log.receipts import open_signed_checkpoint
from fairdeck.v1 import audit_pb2 as pb
from fairdeck.v1 import audit_pb2_grpc
from tests.log.testkit import sign_tree, signer_of
from tests.support.dealers import RunningDealer

SERVICE = "fairdeck.v1.AuditService"
MESSAGES: dict[str, tuple[type[Message], type[Message]]] = {
    "GetCheckpoint": (pb.GetCheckpointRequest, pb.GetCheckpointResponse),
    "ListEntries": (pb.ListEntriesRequest, pb.ListEntriesResponse),
    "GetInclusionProof": (pb.GetInclusionProofRequest, pb.GetInclusionProofResponse),
    "GetConsistencyProof": (pb.GetConsistencyProofRequest, pb.GetConsistencyProofResponse),
    "GetPublicKey": (pb.GetPublicKeyRequest, pb.GetPublicKeyResponse),
}
Forward = Callable[[Message], Awaitable[Any]]
LieFn = Callable[[str, Any, Forward], Awaitable[Any]]


async def honest(method: str, request: Any, forward: Forward) -> Any:
    return await forward(request)


class LyingProxy:
    """Forwards AuditService calls to ``upstream``; ``lie`` decides what is answered."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.lie: LieFn = honest
        self.calls: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.target = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)

    async def _start(self) -> str:
        self.channel = grpc.aio.insecure_channel(self.upstream)
        self.server = grpc.aio.server()
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(self._handler(name))  # raw bytes in and out
            for name in MESSAGES
        }
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return f"127.0.0.1:{port}"

    def _handler(
        self, method: str
    ) -> Callable[[bytes, grpc.aio.ServicerContext[Any, Any]], Awaitable[bytes]]:
        request_type, response_type = MESSAGES[method]
        upstream = self.channel.unary_unary(  # no serializers: raw bytes both ways
            f"/{SERVICE}/{method}", request_serializer=None, response_deserializer=None
        )

        async def forward(request: Message) -> Any:
            raw = await upstream(request.SerializeToString(), timeout=10)
            return response_type.FromString(raw)

        async def handle(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            self.calls.append(method)
            try:
                response = await self.lie(method, request_type.FromString(raw), forward)
            except grpc.aio.AioRpcError as e:
                await context.abort(e.code(), e.details() or "")
            answer: bytes = response.SerializeToString()
            return answer

        return handle

    def close(self) -> None:
        async def stop() -> None:
            await self.server.stop(None)
            await self.channel.close(None)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@dataclass
class Scene:
    """A real dealer's log and what an honest client knows about it."""

    data_dir: Path
    signer: Signer
    """The log's real key: the lies marked "key holder" use it."""
    vkey: str
    closed: Hand
    """A hand opened and closed; its reveal is not the last entry."""
    opened_commitment: bytes
    still_open: Hand
    old: Checkpoint
    """A checkpoint the client saw earlier (for consistency)."""
    older_note: bytes
    """A signed checkpoint of an even smaller tree."""
    head_size: int


def _await_head(vkey: str, target: str, size: int) -> tuple[Checkpoint, bytes]:
    """The dealer's signed head once it covers ``size`` entries, and its note."""
    deadline = time.monotonic() + 10
    with grpc.insecure_channel(target) as channel:
        stub = audit_pb2_grpc.AuditServiceStub(channel)
        while True:
            note = stub.GetCheckpoint(pb.GetCheckpointRequest(), timeout=10).signed_checkpoint
            cp = open_signed_checkpoint(note, Verifier.parse(vkey))
            if cp.size >= size:
                return cp, note
            assert time.monotonic() < deadline, "no checkpoint covers the log"
            time.sleep(0.01)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = tmp_path_factory.mktemp("lying") / "data"
    dealer = RunningDealer(data, checkpoint_interval=0.01)
    dealer.start()
    proxy = LyingProxy(dealer.target)
    try:
        vkey = signer_of(data).verifier.to_string()
        with DealerClient(dealer.target, timeout=20) as c:
            list(c.deal_hands("standard", 10, close=True))  # entries 0..19, one transaction
            older, older_note = _await_head(vkey, dealer.target, 20)
            assert older.size == 20
            list(c.deal_hands("short", 7, close=True))  # entries 20..33
            old, _ = _await_head(vkey, dealer.target, 34)
            assert old.size == 34
            opened = c.open_hand("standard")
            c.shuffle(opened.hand_id, ["alice", "bob"])
            c.draw(opened.hand_id, 4)
            still_open = c.open_hand("jokers")
            closed = c.close_hand(opened.hand_id)
            for _ in range(5):
                c.deal_new_hand("standard")
            head, _ = _await_head(vkey, dealer.target, 34 + 3 + 5)
        assert head.size == 42
        yield (
            Scene(data, signer_of(data), vkey, closed, opened.commitment, still_open, old, older_note, 42),
            proxy,
        )
    finally:
        proxy.close()
        dealer.close()


# -- what the client is asked --------------------------------------------------------------------------

Op = Callable[[Any, Scene], Any]
"""Calls one method of an AuditClient or AsyncAuditClient (returning an awaitable for the latter)."""

OPS: dict[str, Op] = {
    "verify_hand": lambda log, s: log.verify_hand(s.closed, commitment=s.opened_commitment),
    "verify_open_hand": lambda log, s: log.verify_hand(s.still_open),
    "inclusion_proof": lambda log, s: log.inclusion_proof(s.closed.reveal_receipt.index),  # type: ignore[union-attr]
    "inclusion_by_hand": lambda log, s: log.inclusion_proof(hand_id=s.closed.hand_id, reveal=True),
    "consistency": lambda log, s: log.consistency(s.old),
    "checkpoint": lambda log, s: log.checkpoint(),
}
PROOF_OPS = ("verify_hand", "verify_open_hand", "inclusion_proof", "inclusion_by_hand")


def run(kind: str, target: str, scene: Scene, op: str) -> Any:
    if kind == "sync":
        with AuditClient(target, verifier=scene.vkey, timeout=10) as log:
            return OPS[op](log, scene)

    async def main() -> Any:
        async with AsyncAuditClient(target, verifier=scene.vkey, timeout=10) as log:
            return await OPS[op](log, scene)

    return asyncio.run(main())


# -- the lies ------------------------------------------------------------------------------------------------

Alter = Callable[[Scene, Any, Any], None]
"""Changes a response in place, given the scene and the request."""


def on(methods: tuple[str, ...], alter: Alter, scene: Scene) -> LieFn:
    async def lie(method: str, request: Any, forward: Forward) -> Any:
        response = await forward(request)
        if method in methods:
            alter(scene, request, response)
        return response

    return lie


def _flip_bit(data: bytes, at: int = 0) -> bytes:
    b = bytearray(data)
    b[at] ^= 0x01
    return bytes(b)


def _note_lines(note: bytes) -> list[str]:
    return note.decode().split("\n")


def _with_line(note: bytes, number: int, new: str) -> bytes:
    lines = _note_lines(note)
    lines[number] = new
    return "\n".join(lines).encode()


def alter_root_line(s: Scene, req: Any, r: Any) -> None:
    root = base64.b64decode(_note_lines(r.signed_checkpoint)[2])
    r.signed_checkpoint = _with_line(r.signed_checkpoint, 2, base64.b64encode(_flip_bit(root, 31)).decode())


def alter_size_line(s: Scene, req: Any, r: Any) -> None:
    size = int(_note_lines(r.signed_checkpoint)[1])
    r.signed_checkpoint = _with_line(r.signed_checkpoint, 1, str(size + 1))


def alter_signature(s: Scene, req: Any, r: Any) -> None:
    lines = _note_lines(r.signed_checkpoint)
    prefix, _, sig64 = lines[4].rpartition(" ")
    sig = _flip_bit(base64.b64decode(sig64), 10)  # past the 4-byte key id: the Ed25519 signature
    r.signed_checkpoint = _with_line(r.signed_checkpoint, 4, f"{prefix} {base64.b64encode(sig).decode()}")


def sign_by_impostor(s: Scene, req: Any, r: Any) -> None:
    """Same origin, another key: what a man in the middle can sign."""
    lines = _note_lines(r.signed_checkpoint)
    impostor = Signer.from_seed(s.signer.name, bytes(32))
    r.signed_checkpoint = sign_tree(impostor, int(lines[1]), base64.b64decode(lines[2]))


def flip_proof_hash(s: Scene, req: Any, r: Any) -> None:
    r.hashes[len(r.hashes) // 2] = _flip_bit(r.hashes[len(r.hashes) // 2], 5)


def drop_proof_hash(s: Scene, req: Any, r: Any) -> None:
    del r.hashes[-1]


def extra_proof_hash(s: Scene, req: Any, r: Any) -> None:
    r.hashes.append(bytes(32))


def short_proof_hash(s: Scene, req: Any, r: Any) -> None:
    r.hashes[0] = r.hashes[0][:31]


def wrong_tree_size_field(s: Scene, req: Any, r: Any) -> None:
    r.tree_size += 1


def old_checkpoint_for_proof(s: Scene, req: Any, r: Any) -> None:
    """The proof of the head, with an older (valid) signed checkpoint."""
    r.signed_checkpoint = s.older_note


def old_checkpoint_and_size_for_proof(s: Scene, req: Any, r: Any) -> None:
    """An older (valid) signed checkpoint and its size, with the head's proof."""
    r.signed_checkpoint = s.older_note
    r.tree_size = 20


def alter_entry_commitment(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, CommitEntry):
        changed = CommitEntry(e.time_ms, e.hand_id, e.version, e.deck, _flip_bit(e.commitment, 7))
        r.entry = changed.encode()
    else:
        r.entry = _flip_bit(r.entry, len(r.entry) - 1)  # the deck digest's last byte


def older_checkpoint_for_consistency(s: Scene, req: Any, r: Any) -> None:
    """A valid, older head: the log seems to have shrunk below what the client saw."""
    r.signed_checkpoint = s.older_note
    r.second_tree_size = 20


# Lies made with the log's REAL key: signatures and paths verify, contents do not.


def _root_from_path(index: int, size: int, leaf: bytes, proof: list[bytes]) -> bytes:
    """The root an inclusion proof leads to (RFC 9162 section 2.1.3.2)."""
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if fn & 1 or fn == sn:
            r = merkle.node_hash(p, r)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            r = merkle.node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return r


def _resign_for_entry(s: Scene, r: Any, entry: bytes) -> None:
    """Replace the entry and sign, with the real key, the root its path now leads to."""
    r.entry = entry
    root = _root_from_path(r.index, r.tree_size, merkle.leaf_hash(entry), list(r.hashes))
    r.signed_checkpoint = sign_tree(s.signer, r.tree_size, root)


def key_holder_other_commitment(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, CommitEntry):
        other = CommitEntry(e.time_ms, e.hand_id, e.version, e.deck, _flip_bit(e.commitment, 7))
        _resign_for_entry(s, r, other.encode())


def key_holder_other_deck(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, RevealEntry):
        other = RevealEntry(e.time_ms, e.hand_id, e.outcome, e.server_seed, e.client_seeds, bytes(32))
        _resign_for_entry(s, r, other.encode())


def key_holder_other_seed(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, RevealEntry):
        seed = bytes(reversed(e.server_seed))
        _resign_for_entry(
            s, r, RevealEntry(e.time_ms, e.hand_id, e.outcome, seed, e.client_seeds, e.deck_digest).encode()
        )


def key_holder_other_client_seeds(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, RevealEntry):
        seeds = (*e.client_seeds, b"extra seat")
        _resign_for_entry(
            s, r, RevealEntry(e.time_ms, e.hand_id, e.outcome, e.server_seed, seeds, e.deck_digest).encode()
        )


def key_holder_fork(s: Scene, req: Any, r: Any) -> None:
    """A different head signed with the real key: the log forked after what the client saw."""
    lines = _note_lines(r.signed_checkpoint)
    r.signed_checkpoint = sign_tree(s.signer, int(lines[1]), _flip_bit(base64.b64decode(lines[2]), 0))


def other_entry(scene_index: Callable[[Scene], int], *, admit_index: bool) -> Callable[[Scene], LieFn]:
    """Answer a proof request with the (valid, signed) proof of another entry;
    ``admit_index``: say which entry it is (else claim it is the one asked for)."""

    def make(s: Scene) -> LieFn:
        async def lie(method: str, request: Any, forward: Forward) -> Any:
            if method != "GetInclusionProof":
                return await forward(request)
            asked = request.index
            other = pb.GetInclusionProofRequest(index=scene_index(s), kind=request.kind)
            response = await forward(other)
            if not admit_index and request.WhichOneof("entry") == "index":
                response.index = asked
            return response

        return lie

    return make


def consistency_for_other_size(s: Scene) -> LieFn:
    async def lie(method: str, request: Any, forward: Forward) -> Any:
        if method == "GetConsistencyProof":
            request.first_tree_size -= 1  # a valid proof, from the wrong old tree
        return await forward(request)

    return lie


@dataclass(frozen=True)
class Lie:
    says: str
    """What the VerificationError must say: the check that caught the lie."""
    make: Callable[[Scene], LieFn]
    breaks: tuple[str, ...]
    """The operations that must raise VerificationError under this lie."""


NOTE_METHODS = ("GetCheckpoint", "GetInclusionProof", "GetConsistencyProof")
ALL_OPS = tuple(OPS)


def _on(methods: tuple[str, ...], alter: Alter) -> Callable[[Scene], LieFn]:
    return lambda s: on(methods, alter, s)


_ENTRY_OF_ANOTHER_HAND = other_entry(lambda s: s.closed.commit_receipt.index - 1, admit_index=True)

LIES: dict[str, Lie] = {
    # proof hashes
    "flip a proof hash bit": Lie(
        "is not in the signed tree: inclusion proof does not lead to the root",
        _on(("GetInclusionProof",), flip_proof_hash),
        PROOF_OPS,
    ),
    "drop a proof hash": Lie(
        "inclusion proof has 4 hashes, want 5", _on(("GetInclusionProof",), drop_proof_hash), PROOF_OPS
    ),
    "add a proof hash": Lie(
        "inclusion proof has 6 hashes, want 5", _on(("GetInclusionProof",), extra_proof_hash), PROOF_OPS
    ),
    "short proof hash": Lie("proof[0] is 31 bytes", _on(("GetInclusionProof",), short_proof_hash), PROOF_OPS),
    "flip a consistency hash bit": Lie(
        "the log at 42 does not extend the log at 34",
        _on(("GetConsistencyProof",), flip_proof_hash),
        ("consistency",),
    ),
    "drop a consistency hash": Lie(
        "the log at 42 does not extend the log at 34",
        _on(("GetConsistencyProof",), drop_proof_hash),
        ("consistency",),
    ),
    "consistency from another size": Lie(
        "the log at 42 does not extend the log at 34", consistency_for_other_size, ("consistency",)
    ),
    # the signed checkpoint
    "checkpoint root": Lie("invalid signature by known key", _on(NOTE_METHODS, alter_root_line), ALL_OPS),
    "checkpoint size": Lie("invalid signature by known key", _on(NOTE_METHODS, alter_size_line), ALL_OPS),
    "checkpoint signature": Lie(
        "invalid signature by known key", _on(NOTE_METHODS, alter_signature), ALL_OPS
    ),
    "checkpoint by another key": Lie(
        "no signature by a known key", _on(NOTE_METHODS, sign_by_impostor), ALL_OPS
    ),
    "proof tree size field": Lie(
        "proof is for tree size 43, the checkpoint signs 42",
        _on(("GetInclusionProof",), wrong_tree_size_field),
        PROOF_OPS,
    ),
    "old checkpoint with the proof": Lie(
        "proof is for tree size 42, the checkpoint signs 20",
        _on(("GetInclusionProof",), old_checkpoint_for_proof),
        PROOF_OPS,
    ),
    "old checkpoint and size with the proof": Lie(
        "is not below the tree size 20",
        _on(("GetInclusionProof",), old_checkpoint_and_size_for_proof),
        PROOF_OPS,
    ),
    "old checkpoint for consistency": Lie(
        "the log shrank from 34 to 20 entries",
        _on(("GetConsistencyProof",), older_checkpoint_for_consistency),
        ("consistency",),
    ),
    # another entry
    "proof of another index, admitted": Lie(
        "the proof is for entry 33",
        _ENTRY_OF_ANOTHER_HAND,
        ("verify_hand", "verify_open_hand", "inclusion_proof"),
    ),
    "proof of another index, claimed as asked": Lie(
        "is not in the signed tree",
        other_entry(lambda s: s.closed.commit_receipt.index - 1, admit_index=False),
        ("verify_hand", "verify_open_hand", "inclusion_proof"),
    ),
    "entry bytes altered": Lie(
        "is not in the signed tree", _on(("GetInclusionProof",), alter_entry_commitment), PROOF_OPS
    ),
    # the dealer itself, with its real key
    "key holder: other commitment": Lie(
        "the logged commitment is not the one the dealer published",
        _on(("GetInclusionProof",), key_holder_other_commitment),
        ("verify_hand", "verify_open_hand"),
    ),
    "key holder: other deck digest": Lie(
        "the logged reveal differs from the transcript",
        _on(("GetInclusionProof",), key_holder_other_deck),
        ("verify_hand",),
    ),
    "key holder: other seed": Lie(
        "the logged reveal differs from the transcript",
        _on(("GetInclusionProof",), key_holder_other_seed),
        ("verify_hand",),
    ),
    "key holder: other client seeds": Lie(
        "the logged reveal differs from the transcript",
        _on(("GetInclusionProof",), key_holder_other_client_seeds),
        ("verify_hand",),
    ),
    "key holder: forked head": Lie(
        "the log at 42 does not extend the log at 34",
        _on(("GetConsistencyProof",), key_holder_fork),
        ("consistency",),
    ),
}

CASES = [pytest.param(name, op, id=f"{name} / {op}") for name, lie in LIES.items() for op in lie.breaks]


@pytest.fixture
def proxied(world: Any) -> Any:
    scene, proxy = world
    proxy.lie = honest
    proxy.calls.clear()
    yield scene, proxy
    proxy.lie = honest


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("op", ALL_OPS)
def test_honest_proxy_passes(kind: str, op: str, proxied: Any) -> None:
    scene, proxy = proxied
    result = run(kind, proxy.target, scene, op)
    assert proxy.calls, "the call went through the proxy"
    if op.startswith("verify"):
        assert isinstance(result, Checkpoint) and result.size == scene.head_size
    elif op.startswith("inclusion"):
        entry = decode(result.entry)
        assert isinstance(entry, RevealEntry) and entry.hand_id == scene.closed.hand_id
        assert result.index == scene.closed.reveal_receipt.index
    else:
        assert isinstance(result, Checkpoint) and result.size == scene.head_size


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(("lie", "op"), CASES)
def test_lie_is_caught(kind: str, lie: str, op: str, proxied: Any) -> None:
    scene, proxy = proxied
    proxy.lie = LIES[lie].make(scene)
    with pytest.raises(VerificationError) as caught:
        run(kind, proxy.target, scene, op)
    assert caught.value.step == "log"
    assert LIES[lie].says in caught.value.detail
    assert proxy.calls


KEY_HOLDER_LIES = {
    "key holder: other commitment": lambda s: s.closed.commit_receipt.index,
    "key holder: other deck digest": lambda s: s.closed.reveal_receipt.index,
    "key holder: other seed": lambda s: s.closed.reveal_receipt.index,
    "key holder: other client seeds": lambda s: s.closed.reveal_receipt.index,
}


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("lie", KEY_HOLDER_LIES)
def test_key_holder_lies_pass_the_proof_alone(kind: str, lie: str, proxied: Any) -> None:
    """The dishonest dealer's proofs are valid proofs of the entries it serves:
    inclusion_proof(index) cannot object; only verify_hand, which checks the
    entry against what the dealer told the game server, does (test_lie_is_caught)."""
    scene, proxy = proxied
    index = KEY_HOLDER_LIES[lie](scene)
    with AuditClient(proxy.target, verifier=scene.vkey, timeout=10) as log:
        true_entry = log.inclusion_proof(index).entry
    proxy.lie = LIES[lie].make(scene)

    async def proof() -> Any:
        async with AsyncAuditClient(proxy.target, verifier=scene.vkey, timeout=10) as log:
            return await log.inclusion_proof(index)

    if kind == "sync":
        with AuditClient(proxy.target, verifier=scene.vkey, timeout=10) as log:
            forged = log.inclusion_proof(index)
    else:
        forged = asyncio.run(proof())
    assert forged.entry != true_entry
    assert decode(forged.entry).hand_id == scene.closed.hand_id


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_proof_by_hand_id_of_another_hand(kind: str, proxied: Any) -> None:
    """Asked for hand H's reveal by hand id, the server answers with a valid proof
    of another hand's entry. The client must not call that a proof of H."""
    scene, proxy = proxied
    proxy.lie = _ENTRY_OF_ANOTHER_HAND(scene)
    with pytest.raises(VerificationError):
        run(kind, proxy.target, scene, "inclusion_by_hand")
