"""Tenant isolation and the role table, through the real SDK against a dealer
that requires credentials."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.client.exceptions import FairdeckError, HandNotFound, PermissionDenied
from fairdeck.v1 import audit_pb2, dealer_pb2
from fairdeck_server.policy import auth
from fairdeck_server.principal import Role
from tests.support.dealers import RunningDealer
from tests.support.tokens import MakeToken

DEALER_METHODS = [m.name for m in dealer_pb2.DESCRIPTOR.services_by_name["DealerService"].methods]
AUDIT_METHODS = [m.name for m in audit_pb2.DESCRIPTOR.services_by_name["AuditService"].methods]


def answer(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str, str, str | None]:
    with pytest.raises(FairdeckError) as caught:
        call()
    e = caught.value
    return e.code, e.reason, str(e), e.field


def by_hand(client: DealerClient, hand_id: str) -> dict[str, Callable[[], Any]]:
    """Every DealerService call that names a hand."""
    return {
        "GetHand": lambda: client.get(hand_id),
        "DrawCards": lambda: client.draw(hand_id, 1),
        "DealHand": lambda: client.deal(hand_id),
        "CloseHand": lambda: client.close_hand(hand_id),
        "ShuffleHand": lambda: client.shuffle(hand_id, ["x"]),
        "AddClientSeeds": lambda: client.add_client_seeds(hand_id, ["x"]),
    }


def test_another_tenants_hand_is_indistinguishable_from_a_missing_one(
    secured: RunningDealer, token_for: MakeToken
) -> None:
    a, b = token_for("tenant-a", "dealer"), token_for("tenant-b", "dealer")
    with (
        DealerClient(secured.target, api_token=a, timeout=10) as alice,
        DealerClient(secured.target, api_token=b, timeout=10) as bob,
    ):
        open_hand = alice.open_hand()
        shuffled = alice.open_hand()
        alice.shuffle(shuffled.hand_id, ["s"])
        alice.draw(shuffled.hand_id, 2)
        closed = alice.deal_new_hand()
        alice.close_hand(closed.hand.hand_id)
        random_id = open_hand.hand_id[:-4] + ("0000" if not open_hand.hand_id.endswith("0000") else "1111")
        for method, call in by_hand(bob, random_id).items():
            missing = answer(call)
            assert missing == (grpc.StatusCode.NOT_FOUND, "HAND_NOT_FOUND", "hand not found", "hand_id"), (
                method
            )
            for hand in (open_hand.hand_id, shuffled.hand_id, closed.hand.hand_id):
                assert answer(by_hand(bob, hand)[method]) == missing, (method, hand)
        # Nothing Bob tried changed Alice's hands.
        assert alice.get(open_hand.hand_id).client_seeds == ()
        assert alice.draw(shuffled.hand_id, 1).position == 2
        assert alice.close_hand(open_hand.hand_id).transcript is not None


def test_the_role_table_covers_every_method() -> None:
    for name in DEALER_METHODS:
        expected = auth.ANY_ROLE if name == "GetHand" else auth.DEALER_ONLY
        assert auth.ROLES[f"/fairdeck.v1.DealerService/{name}"] == expected, name
    for name in AUDIT_METHODS:
        assert auth.ROLES[f"/fairdeck.v1.AuditService/{name}"] == auth.ANY_ROLE, name
    assert len(auth.ROLES) == len(DEALER_METHODS) + len(AUDIT_METHODS)


def test_an_auditor_reads_closed_hands_and_the_log_but_deals_nothing(
    secured: RunningDealer, token_for: MakeToken
) -> None:
    dealer_token, auditor_token = token_for("acme", "dealer"), token_for("acme", "auditor")
    other_auditor = token_for("other", "auditor")
    vkey = secured.server.publisher.signer.verifier  # type: ignore[union-attr]
    with (
        DealerClient(secured.target, api_token=dealer_token, timeout=10) as dealer,
        DealerClient(secured.target, api_token=auditor_token, timeout=10) as auditor,
        DealerClient(secured.target, api_token=other_auditor, timeout=10) as outsider,
    ):
        still_open = dealer.open_hand()
        shuffled = dealer.deal_new_hand()
        closed = dealer.close_hand(dealer.deal_new_hand().hand.hand_id)
        hand_id = still_open.hand_id
        calls: dict[str, Callable[[], Any]] = {
            "OpenHand": lambda: auditor.open_hand(),
            "AddClientSeeds": lambda: auditor.add_client_seeds(hand_id, ["x"]),
            "ShuffleHand": lambda: auditor.shuffle(hand_id, ["x"]),
            "DrawCards": lambda: auditor.draw(hand_id, 1),
            "DealHand": lambda: auditor.deal(hand_id),
            "DealNewHand": lambda: auditor.deal_new_hand(),
            "DealHands": lambda: list(auditor.deal_hands("standard", 3)),
            "CloseHand": lambda: auditor.close_hand(hand_id),
        }
        assert set(calls) | {"GetHand"} == set(DEALER_METHODS)
        for method, call in calls.items():
            code, reason, message, field = answer(call)
            assert (code, reason, field) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_NOT_ALLOWED", None), (
                method
            )
            assert message == f"the auditor role may not call {method}"
        with pytest.raises(PermissionDenied):
            auditor.open_hand()

        # GetHand: closed hands of its own tenant only; an open one looks missing.
        seen = auditor.get(closed.hand_id)
        assert seen.transcript is not None and seen.transcript.server_seed == closed.transcript.server_seed  # type: ignore[union-attr]
        missing = answer(lambda: auditor.get(still_open.hand_id[:-4] + "abcd"))
        assert answer(lambda: auditor.get(still_open.hand_id)) == missing
        assert answer(lambda: auditor.get(shuffled.hand.hand_id)) == missing
        assert answer(lambda: outsider.get(closed.hand_id)) == missing
        with pytest.raises(HandNotFound):
            auditor.get(still_open.hand_id)
        # Nothing the auditor tried touched the open hand.
        assert dealer.get(still_open.hand_id).client_seeds == ()

    # The log is global and readable by every role, with proofs that verify.
    with AuditClient(secured.target, verifier=vkey, api_token=other_auditor) as log:
        assert log.verify_hand(closed, commitment=closed.commitment).size >= closed.reveal_receipt.index + 1  # type: ignore[union-attr]
        assert sum(1 for _ in log.entries()) >= 3
    with AuditClient(secured.target, verifier=vkey) as anonymous, pytest.raises(FairdeckError) as refused:
        anonymous.checkpoint()
    assert refused.value.reason == "MISSING_CREDENTIALS"


@pytest.mark.parametrize("role", list(Role))
def test_the_principal_is_bound_for_streaming_calls(
    secured: RunningDealer, token_for: MakeToken, role: Role
) -> None:
    token = token_for("streamer", role.value)
    with DealerClient(secured.target, api_token=token, timeout=10) as client:
        if role is Role.AUDITOR:
            assert answer(lambda: list(client.deal_hands("standard", 2)))[1] == "ROLE_NOT_ALLOWED"
            return
        dealt = list(client.deal_hands("standard", 300, close=True))
        assert len(dealt) == 300
        # The hands belong to the token's tenant: its own client can read them, another cannot.
        assert client.get(dealt[-1].hand_id).hand_id == dealt[-1].hand_id
    other = token_for("someone-else", "dealer")
    with DealerClient(secured.target, api_token=other, timeout=10) as client, pytest.raises(HandNotFound):
        client.get(dealt[0].hand_id)
