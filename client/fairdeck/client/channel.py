"""What every client of the dealer shares: its channel, config and stub, set up
once here (``SyncClient``, ``AsyncClient``), the one way a unary call is sent
and its error translated, and the one pager of the log's ListEntries
(``EntryPager``), used by the audit clients and by ``fairdeck audit``.

The blocking and asyncio bases differ only in how they wait; the public
clients (dealer_client.py, audit_client.py) subclass them and add their methods.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Collection, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self

import grpc
from google.protobuf.message import Message

from fairdeck.client.calls import (
    RETRIED_CODES,
    USE_CLIENT_DEFAULT,
    ClientConfig,
    Deadline,
    Timeout,
    retry_delay_for,
)
from fairdeck.client.exceptions import from_rpc_error
from fairdeck.core.errors import VerificationError
from fairdeck.v1 import audit_pb2

__all__ = ["PAGE_SIZE", "AsyncClient", "EntryPager", "SyncClient"]

PAGE_SIZE = 1000
"""Entries asked for per ListEntries page (the dealer may send fewer: it caps a page's bytes)."""


class _Configured:
    """The constructor every client shares: the keyword arguments, the config built from
    them, and the channel and stub of the client's one service (``_STUB``), opened by
    the blocking or the asyncio base."""

    _STUB: ClassVar[type[Any]]

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        credentials: grpc.ChannelCredentials | None = None,
        api_token: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        timeout: float | None = 10.0,
        options: Sequence[tuple[str, Any]] = (),
        insecure: bool = False,
        retries: int = 2,
        max_retry_delay: float = 5.0,
        retry_backoff: float = 0.1,
        retry_codes: Collection[grpc.StatusCode] = RETRIED_CODES,
    ) -> None:
        self.config = ClientConfig(
            target,
            credentials=credentials,
            api_token=api_token,
            metadata=tuple(metadata),
            timeout=timeout,
            options=tuple(options),
            insecure=insecure,
            retries=retries,
            max_retry_delay=max_retry_delay,
            retry_backoff=retry_backoff,
            retry_codes=frozenset(retry_codes),
        )
        self._open()

    def _open(self) -> None:
        raise NotImplementedError


class SyncClient(_Configured):
    """A blocking client: ``config``, its channel and a stub of one service."""

    def _open(self) -> None:
        self._channel = self.config.channel()
        self._stub = self._STUB(self._channel)

    def _unary(
        self,
        method: str,
        request: Message,
        *,
        timeout: Timeout | Deadline = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
        stub: Any = None,
    ) -> Any:
        """Send one unary call (to ``stub``, by default the client's), retried as
        ``retry_delay_for`` says, all of it within one deadline (``timeout``); raise the SDK's
        exception."""
        deadline = Deadline(timeout, self.config.timeout)
        metadata = self.config.call_metadata(request_id)
        attempt = 0
        while True:
            try:
                return getattr(stub or self._stub, method)(
                    request, timeout=deadline.remaining(), metadata=metadata
                )
            except grpc.RpcError as e:
                error = from_rpc_error(e)
                delay = retry_delay_for(method, request, error, attempt, self.config)
                if delay is None or not deadline.allows(delay):
                    raise error from e
            time.sleep(delay)
            attempt += 1

    def close(self) -> None:
        """Close the channel; calls still running end with ``Cancelled``."""
        self._channel.close()

    def close_channel(self) -> None:
        """Deprecated: ``close()`` (asyncio: ``aclose()``), for one more release."""
        warnings.warn("close_channel() is deprecated: use close()", DeprecationWarning, stacklevel=2)
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncClient(_Configured):
    """An asyncio client: ``config``, its channel and a stub of one service.

    The channel is made on first use, in the running event loop, and again if a later call runs
    in another loop: a grpc.aio channel belongs to the loop it was made in. So a client may be
    made at import time and used under ``asyncio.run`` as often as needed.
    """

    _loop: asyncio.AbstractEventLoop | None = None
    _aio: grpc.aio.Channel | None = None

    def _open(self) -> None:
        self._loop = None
        self._aio = None

    @property
    def _channel(self) -> grpc.aio.Channel:
        loop = asyncio.get_running_loop()
        if self._aio is None or self._loop is not loop:
            self._aio = self.config.aio_channel()
            self._loop = loop
            self._stub_of_loop = self._STUB(self._aio)
        return self._aio

    @property
    def _stub(self) -> Any:
        self._channel  # noqa: B018 - makes the channel of the running loop
        return self._stub_of_loop

    async def _unary(
        self,
        method: str,
        request: Message,
        *,
        timeout: Timeout | Deadline = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
        stub: Any = None,
    ) -> Any:
        """Send one unary call (to ``stub``, by default the client's), retried as
        ``retry_delay_for`` says, all of it within one deadline (``timeout``); raise the SDK's
        exception."""
        deadline = Deadline(timeout, self.config.timeout)
        metadata = self.config.call_metadata(request_id)
        attempt = 0
        while True:
            try:
                return await getattr(stub or self._stub, method)(
                    request, timeout=deadline.remaining(), metadata=metadata
                )
            except grpc.RpcError as e:
                error = from_rpc_error(e)
                delay = retry_delay_for(method, request, error, attempt, self.config)
                if delay is None or not deadline.allows(delay):
                    raise error from e
            await asyncio.sleep(delay)
            attempt += 1

    async def aclose(self) -> None:
        """Close the channel; calls still running end with ``Cancelled``."""
        if self._aio is not None and self._loop is asyncio.get_running_loop():
            await self._aio.close(grace=None)
        self._aio = None

    async def close(self) -> None:
        """Close the channel; calls still running end with ``Cancelled``."""
        await self.aclose()

    async def close_channel(self) -> None:
        """Deprecated: ``close()`` (asyncio: ``aclose()``), for one more release."""
        warnings.warn("close_channel() is deprecated: use aclose()", DeprecationWarning, stacklevel=2)
        await self.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class EntryPager:
    """Pages through ListEntries from ``start``: which page to ask for next, and
    the entries each page holds, checked to be the next ones in order. The caller
    sends the requests (blocking or awaited) until ``done``::

        pager = EntryPager(start)
        while not pager.done:
            yield from pager.take(stub.ListEntries(pager.request()))
    """

    def __init__(self, start: int = 0, page_size: int = PAGE_SIZE) -> None:
        self.next_index = start
        self.page_size = page_size
        self.done = False
        self._token = ""

    def request(self) -> audit_pb2.ListEntriesRequest:
        return audit_pb2.ListEntriesRequest(
            start_index=self.next_index, page_size=self.page_size, page_token=self._token
        )

    def take(self, page: audit_pb2.ListEntriesResponse) -> list[tuple[int, bytes]]:
        """The page's (index, entry) pairs; VerificationError if it skips or repeats an index."""
        entries = []
        for e in page.entries:
            if e.index != self.next_index:
                raise VerificationError(
                    "log", f"the server sent entry {e.index} where {self.next_index} was due"
                )
            entries.append((e.index, e.data))
            self.next_index += 1
        self._token = page.next_page_token
        self.done = not page.next_page_token
        return entries
