"""One SDK base: every client sets up its channel, config and stub in
fairdeck.client.channel, ``ClientConfig`` takes all but the target by name, and
ListEntries has one pager (``EntryPager``), used by both audit clients and by
``fairdeck audit --target``, that refuses a page out of order.

The log here is a stand-in AuditService on 127.0.0.1 (a real gRPC server) that
pages a fixed list of entries three at a time, and can be told to skip one:
a real dealer never sends entries out of order, so it cannot show the check.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from fairdeck.cli.audit_command import remote_log
from fairdeck.client import AsyncAuditClient, AuditClient, ClientConfig
from fairdeck.client.channel import EntryPager
from fairdeck.core.errors import VerificationError
from fairdeck.log.note import Signer
from fairdeck.v1 import audit_pb2 as pb
from fairdeck.v1 import audit_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent.parent
ENTRIES = [f"entry {i}".encode() for i in range(8)]
VKEY = Signer.generate("fairdeck.test/log").verifier.to_string()


class PagedLog(audit_pb2_grpc.AuditServiceServicer):
    """ENTRIES, three a page; ``skip`` (an index) is left out of its page."""

    def __init__(self) -> None:
        self.skip: int | None = None
        self.requests: list[pb.ListEntriesRequest] = []

    def GetCheckpoint(self, request: pb.GetCheckpointRequest, context: Any) -> pb.GetCheckpointResponse:
        return pb.GetCheckpointResponse(signed_checkpoint=b"note", tree_size=len(ENTRIES))

    def ListEntries(self, request: pb.ListEntriesRequest, context: Any) -> pb.ListEntriesResponse:
        self.requests.append(request)
        start = int(request.page_token) if request.page_token else request.start_index
        page = pb.ListEntriesResponse()
        for i in range(start, min(start + 3, len(ENTRIES))):
            if i != self.skip:
                page.entries.add(index=i, data=ENTRIES[i])
        if start + 3 < len(ENTRIES):
            page.next_page_token = str(start + 3)
        return page


@pytest.fixture(scope="module")
def log_server() -> Iterator[tuple[str, PagedLog]]:
    log = PagedLog()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    audit_pb2_grpc.add_AuditServiceServicer_to_server(log, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", log
    finally:
        server.stop(None)


@pytest.fixture
def paged(log_server: tuple[str, PagedLog]) -> Iterator[tuple[str, PagedLog]]:
    target, log = log_server
    log.skip = None
    log.requests.clear()
    yield target, log
    log.skip = None


def sync_entries(target: str, start: int = 0) -> list[tuple[int, bytes]]:
    with AuditClient(target, verifier=VKEY) as client:
        return list(client.entries(start))


def async_entries(target: str, start: int = 0) -> list[tuple[int, bytes]]:
    async def go() -> list[tuple[int, bytes]]:
        async with AsyncAuditClient(target, verifier=VKEY) as client:
            return [entry async for entry in client.entries(start)]

    return asyncio.run(go())


def cli_entries(target: str, start: int = 0) -> list[tuple[int, bytes]]:
    assert start == 0, "the audit reads the whole log"
    size, notes, entries = remote_log(target, 10.0)
    assert (size, notes) == (len(ENTRIES), [b"note"])
    return list(enumerate(entries))


READERS = {"AuditClient": sync_entries, "AsyncAuditClient": async_entries, "fairdeck audit": cli_entries}


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_pages_through_the_whole_log(reader: str, paged: tuple[str, PagedLog]) -> None:
    target, log = paged
    assert READERS[reader](target) == list(enumerate(ENTRIES))
    assert [r.page_token for r in log.requests] == ["", "3", "6"]


def test_the_clients_page_from_a_start(paged: tuple[str, PagedLog]) -> None:
    target, _ = paged
    assert sync_entries(target, 5) == async_entries(target, 5) == list(enumerate(ENTRIES))[5:]


@pytest.mark.parametrize("reader", ["AuditClient", "AsyncAuditClient"])
def test_audit_client_entries_refuses_a_page_that_skips_an_entry(
    reader: str, paged: tuple[str, PagedLog]
) -> None:
    """The audit clients passed on whatever indexes a server sent: a log with an
    entry left out read as a whole one. Now the one pager checks the order."""
    target, log = paged
    log.skip = 4
    with pytest.raises(VerificationError) as caught:
        READERS[reader](target)
    assert caught.value.step == "log"
    assert caught.value.detail == "the server sent entry 5 where 4 was due"


def test_the_audit_command_reports_a_skipped_entry_as_an_unreadable_log(paged: tuple[str, PagedLog]) -> None:
    target, log = paged
    log.skip = 4
    with pytest.raises(ValueError, match=r"^the server sent entry 5 where 4 was due$"):
        cli_entries(target)


def test_the_pager_alone() -> None:
    pager = EntryPager(10, page_size=2)
    assert (pager.request().start_index, pager.request().page_size, pager.request().page_token) == (10, 2, "")
    page = pb.ListEntriesResponse(next_page_token="12")
    page.entries.add(index=10, data=b"a")
    page.entries.add(index=11, data=b"b")
    assert pager.take(page) == [(10, b"a"), (11, b"b")] and not pager.done
    assert pager.request().page_token == "12"
    repeated = pb.ListEntriesResponse()
    repeated.entries.add(index=11, data=b"b")
    with pytest.raises(VerificationError, match="entry 11 where 12 was due"):
        pager.take(repeated)
    assert pager.take(pb.ListEntriesResponse()) == [] and pager.done


def test_client_config_takes_all_but_the_target_by_name() -> None:
    """``ClientConfig(target, credentials, api_token, ...)`` by position put a token
    where credentials go without a word; only the target is positional now."""
    assert ClientConfig("127.0.0.1:1", api_token="fdk_x").api_token == "fdk_x"
    with pytest.raises(TypeError):
        ClientConfig("127.0.0.1:1", None, "fdk_x")  # type: ignore[misc]


def constructed(name: str) -> list[str]:
    """Where, in the client package, ``name(...)`` is called."""
    found = []
    for path in sorted((ROOT / "client" / "fairdeck").rglob("*.py")):
        if "v1" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if called == name:
                    found.append(str(path.relative_to(ROOT)))
    return found


def test_one_pager_and_one_place_that_sets_up_a_client() -> None:
    assert set(constructed("ListEntriesRequest")) == {"client/fairdeck/client/channel.py"}
    assert set(constructed("channel")) | set(constructed("aio_channel")) == {
        "client/fairdeck/client/channel.py"
    }
    # One constructor builds every client's config (base.py); the dealer clients add none of
    # their own, and the two audit clients share one that takes their verifier first.
    assert "client/fairdeck/client/channel.py" in constructed("ClientConfig")
    assert not {"client/fairdeck/client/dealer_client.py", "client/fairdeck/client/audit_client.py"} & set(
        constructed("ClientConfig")
    )
    from fairdeck.client import AsyncAuditClient, AsyncDealerClient, AuditClient, DealerClient

    for cls in (DealerClient, AsyncDealerClient, AuditClient, AsyncAuditClient):
        assert "__init__" not in vars(cls), cls
