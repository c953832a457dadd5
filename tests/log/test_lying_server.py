"""A lying AuditService: a gRPC proxy (tests/support/lying_proxy.py) between the SDK and a real
dealer that alters what the dealer answers. AuditClient and AsyncAuditClient must raise
VerificationError(step="log") for every lie they can detect (tests/support/lies.py), and pass when the
proxy tells the truth.

Some lies are made with the log's REAL signing key (a dishonest dealer rather than a man in
the middle): every signature and audit path then verifies, and only the content check of
``verify_hand`` can catch them, which is what those tests pin down.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AsyncAuditClient, AuditClient
from fairdeck.core.errors import VerificationError
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.logentry import RevealEntry, decode
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import open_signed_checkpoint
from fairdeck.v1 import audit_pb2 as pb
from fairdeck.v1 import audit_pb2_grpc
from tests.support.dealers import RunningDealer
from tests.support.lies import ALL_OPS, ENTRY_OF_ANOTHER_HAND, LIES, OPS, Scene
from tests.support.logs import signer_of
from tests.support.lying_proxy import LyingProxy, honest
from tests.support.waits import wait_for


def _await_head(vkey: str, target: str, size: int) -> tuple[Checkpoint, bytes]:
    """The dealer's signed head once it covers ``size`` entries, and its note."""
    with grpc.insecure_channel(target) as channel:
        stub = audit_pb2_grpc.AuditServiceStub(channel)

        def covering() -> tuple[Checkpoint, bytes] | None:
            note = stub.GetCheckpoint(pb.GetCheckpointRequest(), timeout=10).signed_checkpoint
            cp = open_signed_checkpoint(note, Verifier.parse(vkey))
            return (cp, note) if cp.size >= size else None

        return wait_for("a checkpoint covering the log", covering, timeout=10, every=0.01)


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


def run(kind: str, target: str, scene: Scene, op: str) -> Any:
    if kind == "sync":
        with AuditClient(target, verifier=scene.vkey, timeout=10) as log:
            return OPS[op](log, scene)

    async def main() -> Any:
        async with AsyncAuditClient(target, verifier=scene.vkey, timeout=10) as log:
            return await OPS[op](log, scene)

    return asyncio.run(main())


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
    proxy.lie = ENTRY_OF_ANOTHER_HAND(scene)
    with pytest.raises(VerificationError):
        run(kind, proxy.target, scene, "inclusion_by_hand")
