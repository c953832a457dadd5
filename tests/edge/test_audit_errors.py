"""Every refusal of the AuditService, as a table, and the paging edges.

Same checks as test_errors.py for the DealerService: the raw request through
the generated stub, the status code, and one ErrorInfo with a stable reason
and the field at fault. The rows near 2**63 and the non-ASCII digits were
answered INTERNAL before the edge checked them (found by tests/fuzz).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.v1 import audit_pb2 as apb
from fairdeck.v1 import audit_pb2_grpc
from tests.support.dealers import RunningDealer
from tests.support.error_details import DOMAIN, assert_no_leak, error_info
from tests.support.logs import verifier_key
from tests.support.waits import wait_for

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
TOP = 2**64 - 1  # the largest uint64


@dataclass(frozen=True)
class Row:
    id: str
    method: str
    request: Message
    code: grpc.StatusCode
    reason: str
    field: str


ROWS = [
    Row("ListEntries-token-letters", "ListEntries", apb.ListEntriesRequest(page_token="abc"),
        INVALID, "INVALID_PAGE_TOKEN", "page_token"),
    Row("ListEntries-token-superscript-two", "ListEntries", apb.ListEntriesRequest(page_token="\u00b2"),
        INVALID, "INVALID_PAGE_TOKEN", "page_token"),
    Row("ListEntries-token-arabic-digits", "ListEntries", apb.ListEntriesRequest(page_token="\u0661\u0662"),
        INVALID, "INVALID_PAGE_TOKEN", "page_token"),
    Row("ListEntries-token-negative", "ListEntries", apb.ListEntriesRequest(page_token="-1"),
        INVALID, "INVALID_PAGE_TOKEN", "page_token"),
    Row("ListEntries-token-20-digits", "ListEntries", apb.ListEntriesRequest(page_token="1" * 20),
        INVALID, "INVALID_PAGE_TOKEN", "page_token"),
    Row("ListEntries-page-size-1001", "ListEntries", apb.ListEntriesRequest(page_size=1001),
        INVALID, "INVALID_PAGE_SIZE", "page_size"),
    Row("GetInclusionProof-nothing", "GetInclusionProof", apb.GetInclusionProofRequest(),
        INVALID, "MISSING_ENTRY", "entry"),
    Row("GetInclusionProof-index-past-the-log", "GetInclusionProof",
        apb.GetInclusionProofRequest(index=10**9), NOT_FOUND, "ENTRY_NOT_FOUND", "index"),
    Row("GetInclusionProof-index-2**63", "GetInclusionProof", apb.GetInclusionProofRequest(index=2**63),
        NOT_FOUND, "ENTRY_NOT_FOUND", "index"),
    Row("GetInclusionProof-index-uint64-max", "GetInclusionProof", apb.GetInclusionProofRequest(index=TOP),
        NOT_FOUND, "ENTRY_NOT_FOUND", "index"),
    Row("GetInclusionProof-tree-size-2**63", "GetInclusionProof",
        apb.GetInclusionProofRequest(index=0, tree_size=2**63), NOT_FOUND, "NO_CHECKPOINT", "tree_size"),
    Row("GetInclusionProof-tree-size-unsigned", "GetInclusionProof",
        apb.GetInclusionProofRequest(index=0, tree_size=10**9), NOT_FOUND, "NO_CHECKPOINT", "tree_size"),
    Row("GetInclusionProof-entry-after-the-tree", "GetInclusionProof",
        apb.GetInclusionProofRequest(index=2, tree_size=2), INVALID, "ENTRY_NOT_IN_TREE", "tree_size"),
    Row("GetInclusionProof-hand-id-65-chars", "GetInclusionProof",
        apb.GetInclusionProofRequest(hand_id="h" * 65, kind=apb.ENTRY_KIND_COMMIT),
        INVALID, "INVALID_HAND_ID", "hand_id"),
    Row("GetInclusionProof-hand-id-space", "GetInclusionProof",
        apb.GetInclusionProofRequest(hand_id="a b", kind=apb.ENTRY_KIND_REVEAL),
        INVALID, "INVALID_HAND_ID", "hand_id"),
    Row("GetInclusionProof-hand-id-no-kind", "GetInclusionProof",
        apb.GetInclusionProofRequest(hand_id="no-such-hand"), INVALID, "INVALID_ENTRY_KIND", "kind"),
    Row("GetInclusionProof-hand-id-unknown", "GetInclusionProof",
        apb.GetInclusionProofRequest(hand_id="no-such-hand", kind=apb.ENTRY_KIND_COMMIT),
        NOT_FOUND, "ENTRY_NOT_FOUND", "hand_id"),
    Row("GetConsistencyProof-second-2**63", "GetConsistencyProof",
        apb.GetConsistencyProofRequest(first_tree_size=1, second_tree_size=2**63),
        NOT_FOUND, "NO_CHECKPOINT", "second_tree_size"),
    Row("GetConsistencyProof-second-uint64-max", "GetConsistencyProof",
        apb.GetConsistencyProofRequest(first_tree_size=1, second_tree_size=TOP),
        NOT_FOUND, "NO_CHECKPOINT", "second_tree_size"),
    Row("GetConsistencyProof-second-unsigned", "GetConsistencyProof",
        apb.GetConsistencyProofRequest(first_tree_size=1, second_tree_size=3),
        NOT_FOUND, "NO_CHECKPOINT", "second_tree_size"),
    Row("GetConsistencyProof-first-zero", "GetConsistencyProof",
        apb.GetConsistencyProofRequest(first_tree_size=0), INVALID, "INVALID_TREE_SIZE", "first_tree_size"),
    Row("GetConsistencyProof-first-past-the-head", "GetConsistencyProof",
        apb.GetConsistencyProofRequest(first_tree_size=2**63),
        INVALID, "INVALID_TREE_SIZE", "first_tree_size"),
]  # fmt: skip


@pytest.fixture
def stub(running: Any, client: DealerClient) -> Iterator[audit_pb2_grpc.AuditServiceStub]:
    list(client.deal_hands("standard", 1, close=True))  # a log of two entries, a commit and a reveal
    with grpc.insecure_channel(running.target) as channel:
        audit = audit_pb2_grpc.AuditServiceStub(channel)
        wait_for(
            "a checkpoint of both entries",
            lambda: audit.GetCheckpoint(apb.GetCheckpointRequest(), timeout=10).tree_size >= 2,
            timeout=10,
        )
        yield audit


def test_table_covers_every_method_but_the_public_key() -> None:
    methods = {m.name for m in apb.DESCRIPTOR.services_by_name["AuditService"].methods}
    assert {row.method for row in ROWS} == methods - {"GetCheckpoint", "GetPublicKey"}
    assert len({row.id for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_error(row: Row, stub: audit_pb2_grpc.AuditServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        getattr(stub, row.method)(row.request, timeout=10)
    error: Any = raised.value
    assert error.code() == row.code, error.details()
    assert_no_leak(error.details())
    status, info = error_info(error)
    assert (status.code, status.message) == (row.code.value[0], error.details())
    assert (info.domain, info.reason, info.metadata.get("field")) == (DOMAIN, row.reason, row.field)


@pytest.mark.parametrize("start", [2, 2**63 - 1, 2**63, TOP])
def test_a_start_past_the_log_is_an_empty_last_page(
    start: int, stub: audit_pb2_grpc.AuditServiceStub
) -> None:
    for request in (
        apb.ListEntriesRequest(start_index=start, page_size=1000),
        apb.ListEntriesRequest(page_token=str(min(start, 10**19 - 1))),
    ):
        page = stub.ListEntries(request, timeout=10)
        assert (list(page.entries), page.next_page_token) == ([], "")


def test_the_boundaries_next_to_the_refusals_are_accepted(stub: audit_pb2_grpc.AuditServiceStub) -> None:
    page = stub.ListEntries(apb.ListEntriesRequest(page_token="0", page_size=1000), timeout=10)
    assert [e.index for e in page.entries] == [0, 1] and page.next_page_token == ""
    page = stub.ListEntries(apb.ListEntriesRequest(page_token="0000000000000000001", page_size=1), timeout=10)
    assert [e.index for e in page.entries] == [1] and page.next_page_token == "2"
    proof = stub.GetInclusionProof(apb.GetInclusionProofRequest(index=1, tree_size=2), timeout=10)
    assert (proof.index, proof.tree_size) == (1, 2)
    consistency = stub.GetConsistencyProof(apb.GetConsistencyProofRequest(first_tree_size=2), timeout=10)
    assert consistency.second_tree_size == 2 and list(consistency.hashes) == []


def test_a_page_of_big_entries_ends_early_and_paging_reads_them_all(
    running: Any, client: DealerClient
) -> None:
    """250 reveals of 64 client seeds of 256 bytes (about 17 KB each) do not fit a 4 MiB
    message; the dealer ends the page short of that, and the token resumes at the next entry."""
    seeds = [bytes([i]) * 256 for i in range(64)]
    dealt = list(client.deal_hands("standard", 250, client_seeds=seeds, close=True))
    assert len(dealt) == 250
    with grpc.insecure_channel(running.target) as channel:
        stub = audit_pb2_grpc.AuditServiceStub(channel)
        first = stub.ListEntries(apb.ListEntriesRequest(page_size=1000), timeout=30)
        size = sum(len(e.data) for e in first.entries)
        assert 250 <= len(first.entries) < 500 and size <= 3 * 1024 * 1024
        assert first.next_page_token == str(len(first.entries))
    with AuditClient(running.target, verifier=verifier_key(running.data_dir), timeout=30) as log:
        indexes = [index for index, _ in log.entries()]
    assert indexes == list(range(500))


def test_a_smaller_message_limit_makes_pages_smaller(tmp_path: Path) -> None:
    """With --max-message-bytes 1 MiB a page ends before 768 KiB of entries, so the
    audit still pages through reveals that a 3 MiB page would not fit."""
    running = RunningDealer(tmp_path / "small", max_message_bytes=1024 * 1024)
    running.start()
    try:
        seeds = [bytes([i]) * 256 for i in range(64)]
        with DealerClient(running.target, timeout=30) as c:
            assert len(list(c.deal_hands("standard", 80, client_seeds=seeds, close=True))) == 80
        with grpc.insecure_channel(running.target) as channel:
            stub = audit_pb2_grpc.AuditServiceStub(channel)
            page = stub.ListEntries(apb.ListEntriesRequest(page_size=1000), timeout=30)
        assert 0 < sum(len(e.data) for e in page.entries) <= 768 * 1024
        assert page.next_page_token == str(len(page.entries)) and len(page.entries) < 160
        with AuditClient(running.target, verifier=verifier_key(running.data_dir), timeout=30) as log:
            assert [index for index, _ in log.entries()] == list(range(160))  # 1.3 MB of entries
    finally:
        running.close()
