"""edge/grpc_logs.EndedAsAnswered: grpc.aio's ERROR with a traceback for a unary answer core could
not send because the call had just ended (a client's cancel or deadline racing the handler's
return; seen once in 40,000 fuzzed calls on a loaded machine, failing the fuzz's no-log check) is
one DEBUG line; a batch core refused to start (a misuse: our bug) and any other batch stay ERROR.
The records are made as grpc.aio makes them (server.pyx.pxi ``_handle_exceptions``), with its own
exception class; the race itself is too narrow to produce on demand."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from grpc._cython.cygrpc import ExecuteBatchError

from fairdeck_server.edge.grpc_logs import GRPC_CYTHON_LOGGER, EndedAsAnswered, tame_grpc_logs

METHOD = "/fairdeck.v1.DealerService/AddClientSeeds"
OPS = (
    "<grpc._cython.cygrpc.SendInitialMetadataOperation object at 0x7f0a54049a80>",
    "<grpc._cython.cygrpc.SendMessageOperation object at 0x7f0a541e8930>",
    "<grpc._cython.cygrpc.SendStatusFromServerOperation object at 0x7f0a54204ee0>",
)


def logged_by_grpc(text: str, caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    tame_grpc_logs()
    logger = logging.getLogger(GRPC_CYTHON_LOGGER)
    caplog.clear()
    with caplog.at_level(level, logger=GRPC_CYTHON_LOGGER):
        try:
            raise ExecuteBatchError(text)
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
