"""edge/grpc_logs.EndedAsAnswered: grpc.aio's ERROR with a traceback for a unary answer or a
stream's final status core could not send because the call had just ended (a client's cancel or
deadline racing the handler's return; seen once in 40,000 fuzzed calls on a loaded machine) is one
DEBUG line; a batch core refused to start (a misuse: our bug), an abort's and a write's stay ERROR.
The records are made as grpc.aio makes them (server.pyx.pxi ``_handle_exceptions``), with its own
exception class and frames named as its functions; the race itself is too narrow to produce on
demand. What the filter matches of grpc's private texts is pinned against the installed grpcio:
its compiled module's strings, and real failed batches of a real server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc._cython import cygrpc
from grpc._cython.cygrpc import ExecuteBatchError

from fairdeck_server.edge.grpc_logs import (
    BATCH_RAISER,
    GRPC_CYTHON_LOGGER,
    STREAM_FINISH,
    STREAM_FINISHER,
    UNARY_FINISH,
    EndedAsAnswered,
    batch_ops,
    batch_sender,
    tame_grpc_logs,
)
from tests.support.waits import wait_for_async

METHOD = "/fairdeck.v1.DealerService/AddClientSeeds"
OPS = (
    "<grpc._cython.cygrpc.SendInitialMetadataOperation object at 0x7f0a54049a80>",
    "<grpc._cython.cygrpc.SendMessageOperation object at 0x7f0a541e8930>",
    "<grpc._cython.cygrpc.SendStatusFromServerOperation object at 0x7f0a54204ee0>",
)


def execute_batch(text: str) -> None:
    """Named as grpc.aio's (callback_common.pyx.pxi), which raises a failed batch."""
    raise ExecuteBatchError(text)


def _finish_handler_with_stream_responses(text: str) -> None:
    """Named as grpc.aio's function that sends a stream's final status (server.pyx.pxi)."""
    execute_batch(text)


def _send_error_status_from_server(text: str) -> None:
    """Named as grpc.aio's function that sends an abort's status (callback_common.pyx.pxi)."""
    execute_batch(text)


def logged_by_grpc(
    text: str, caplog: pytest.LogCaptureFixture, level: int, sender: Callable[[str], None] = execute_batch
) -> list[logging.LogRecord]:
    tame_grpc_logs()
    logger = logging.getLogger(GRPC_CYTHON_LOGGER)
    caplog.clear()
    with caplog.at_level(level, logger=GRPC_CYTHON_LOGGER):
        try:
            sender(text)
        except ExecuteBatchError:
            logger.exception("ExecuteBatchError raised in core by servicer method [%s]", METHOD)
    return [r for r in caplog.records if r.name == GRPC_CYTHON_LOGGER]


def test_a_unary_answer_unsent_as_its_call_ended_is_one_debug_line_and_nothing_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failed = f'Failed "execute_batch": ({", ".join(OPS)})'
    assert logged_by_grpc(failed, caplog, logging.WARNING) == []
    (record,) = logged_by_grpc(failed, caplog, logging.DEBUG)
    assert record.levelno == logging.DEBUG and record.exc_info is None
    said = (
        f"a {METHOD} call ended before its answer went out (its client's cancel or deadline, its "
        "connection closed, or a send limit)"
    )
    assert record.getMessage() == said


@pytest.mark.parametrize(
    "text",
    [
        "Failed grpc_call_start_batch: 8 with grpc_call_error value: b'GRPC_CALL_ERROR_TOO_MANY_OPERATIONS'",
        f'Failed "execute_batch": ({OPS[0]}, {OPS[2]})',  # an abort's batch: not the unary answer
        f'Failed "execute_batch": ({OPS[1]})',  # a stream's write
    ],
    ids=["refused to start (a misuse)", "an abort's batch", "a stream's write"],
)
def test_any_other_failed_batch_stays_an_error_with_its_traceback(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    (record,) = logged_by_grpc(text, caplog, logging.WARNING)
    assert record.levelno == logging.ERROR and record.exc_info is not None


def test_installed_once_however_often_asked() -> None:
    tame_grpc_logs()
    tame_grpc_logs()
    filters = logging.getLogger(GRPC_CYTHON_LOGGER).filters
    assert sum(isinstance(f, EndedAsAnswered) for f in filters) == 1


def test_the_codealers_server_was_made_without_the_filters_every_server_is_now_made_in_one_place() -> None:
    """``fairdeck codealer serve`` made its grpc.aio server itself and never installed the filters
    (a token that was not UTF-8 logged whole: tests/codealer/test_codealer_transport.py). Every
    server is now made by edge/transport.aio_server, which installs them: no other module of the
    server calls ``grpc.aio.server``."""
    server = Path(__file__).resolve().parents[2] / "server" / "fairdeck_server"
    makers = sorted(
        str(p.relative_to(server)) for p in server.rglob("*.py") if "grpc.aio.server(" in p.read_text()
    )
    assert makers == ["edge/transport.py"], makers


# -- a stream's final status ----------------------------------------------------------------------


@pytest.mark.parametrize("ops", [(OPS[2],), (OPS[0], OPS[2])], ids=["after its messages", "with none"])
def test_a_streams_final_status_unsent_as_its_call_ended_was_an_error_with_a_traceback(
    ops: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    """A stream's handler returning as its client cancels: grpc.aio sends the final status (with
    the headers, if the stream wrote nothing) in a batch of its own from
    ``_finish_handler_with_stream_responses``, and core fails it: the same race as the unary
    answer's, logged at ERROR with a traceback. Now one DEBUG line, nothing at WARNING."""
    failed = f'Failed "execute_batch": ({", ".join(ops)},)'
    sender = _finish_handler_with_stream_responses
    assert logged_by_grpc(failed, caplog, logging.WARNING, sender) == []
    (record,) = logged_by_grpc(failed, caplog, logging.DEBUG, sender)
    assert record.levelno == logging.DEBUG and record.exc_info is None
    said = f"a {METHOD} stream ended before its final status went out (its client's cancel or deadline, "
    assert record.getMessage() == said + "its connection closed)"


@pytest.mark.parametrize("ops", [(OPS[2],), (OPS[0], OPS[2])], ids=["after its messages", "with none"])
def test_the_same_status_batch_sent_by_an_abort_or_by_no_known_function_stays_an_error(
    ops: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    """An abort sends the same operations (``_send_error_status_from_server``): only the stream's
    own final batch is the race the filter knows; the rest keep their ERROR and traceback."""
    failed = f'Failed "execute_batch": ({", ".join(ops)},)'
    for sender in (_send_error_status_from_server, execute_batch):
        (record,) = logged_by_grpc(failed, caplog, logging.WARNING, sender)
        assert record.levelno == logging.ERROR and record.exc_info is not None, sender


# -- grpc's private texts, as the installed grpcio has them -----------------------------------------


def compiled_texts() -> list[bytes]:
    """The bytes of grpcio's compiled Cython module and of each zlib stream in it: Cython keeps a
    module's string constants (its log formats among them) compressed in one such stream."""
    data = Path(cygrpc.__file__).read_bytes()
    view, texts = memoryview(data), [data]
    for start in (m.start() for m in re.finditer(rb"\x78[\x01\x5e\x9c\xda]", data)):
        try:
            if len(zlib.decompressobj().decompress(view[start : start + 256])) >= 64:
                texts.append(zlib.decompressobj().decompress(view[start:]))
        except zlib.error:
            continue
    return texts


def test_the_private_grpc_texts_the_filter_matches_are_the_installed_grpcios() -> None:
    """The filter matches grpc.aio's log format, its private exception class and the names of its
    functions and operations by text: a grpcio that renamed any would let the filter silently stop
    matching (the ERRORs back) or match something else. Each must be in the installed module."""
    wanted = [
        "ExecuteBatchError raised in core by servicer method [%s]",  # _handle_exceptions' format
        BATCH_RAISER,
        STREAM_FINISHER,
        "_send_error_status_from_server",
        *UNARY_FINISH,
        *{op for ops in STREAM_FINISH for op in ops},
    ]
    texts = compiled_texts()
    missing = [w for w in wanted if not any(w.encode() in t for t in texts)]
    assert missing == [], f"grpcio {grpc.__version__} no longer has {missing}: check edge/grpc_logs.py"
    assert ExecuteBatchError.__name__ == "ExecuteBatchError"


def test_a_real_failed_batch_reads_as_the_filter_parses_it() -> None:
    """A real grpc.aio server's batches failed by a call its client cancelled (a stream's handler
    that writes, then aborts, once cancelled: it catches each error): the exception's class, its
    text ('Failed "execute_batch": (ops,)'), its operations and the frame that sent it are read as
    the filter reads them; an abort's batch, logged as grpc.aio logs it, stays ERROR."""
    failed: dict[str, BaseException] = {}

    async def stream(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> Any:
        yield b"first"
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()  # until its client cancels
        for name, step in (
            ("write", lambda: context.write(b"x")),
            ("abort", lambda: context.abort(grpc.StatusCode.INTERNAL, "x")),
        ):
            try:
                await step()
            except Exception as e:
                failed[name] = e

    async def scene() -> None:
        server = grpc.aio.server()
        handler = grpc.unary_stream_rpc_method_handler(stream)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.S", {"S": handler}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.unary_stream("/t.S/S")(b"")
                await call.read()
                call.cancel()
                await wait_for_async("both batches failed", lambda: len(failed) == 2)
        finally:
            await server.stop(None)

    asyncio.run(scene())
    write, abort = failed["write"], failed["abort"]
    assert type(write).__name__ == type(abort).__name__ == "ExecuteBatchError", failed
    assert batch_ops(str(write)) == ["SendMessageOperation"], str(write)
    assert batch_sender(write.__traceback__) == "_send_message"
    assert batch_ops(str(abort)) == STREAM_FINISH[0], str(abort)  # as a stream's final status
    assert batch_sender(abort.__traceback__) == "_send_error_status_from_server"  # but an abort's
    record = logging.LogRecord(
        GRPC_CYTHON_LOGGER,
        logging.ERROR,
        __file__,
        0,
        "ExecuteBatchError raised in core by servicer method [%s]",
        ("/t.S/S",),
        (type(abort), abort, abort.__traceback__),
    )
    assert EndedAsAnswered().filter(record) and record.levelno == logging.ERROR
