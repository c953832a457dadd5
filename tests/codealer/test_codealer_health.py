"""Health that reflects ability, for co-dealt dealing and for the co-dealer itself: the dealer's
``fairdeck.v1.DealerService/codeal`` follows its co-dealer (reachable, taking the token, with the
pinned identity) while the ordinary mode's names stay SERVING; the co-dealer's own health follows
its ledger's writes. Real ``fairdeck codealer`` and ``fairdeck serve`` processes on 127.0.0.1:0."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import grpc
import pytest

from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from tests.support.codealers import CODEAL, NOT_SERVING, SERVING, CodealerProcess, init_codealer, status
from tests.support.dealers import DealerProcess
from tests.support.faults import metric, wait_for
from tests.support.fixtures import TableFactory
from tests.support.forked_serve import ServeForker


@pytest.fixture
def table(codealt_table_factory: TableFactory) -> tuple[CodealerProcess, DealerProcess]:
    return codealt_table_factory("--metrics-listen", "127.0.0.1:0")


@pytest.mark.light
def test_codealt_health_was_serving_with_the_codealer_down_now_its_own_name_follows_it(
    table: tuple[CodealerProcess, DealerProcess], codealer_dir: Path, serve_forker: ServeForker
) -> None:
    """The dealer's health said SERVING for everything with its co-dealer down: a balancer sent
    co-dealt tables to a dealer that refused them all. Co-dealt dealing has its own name, NOT_SERVING
    while the co-dealer is unreachable; the ordinary mode's names stay SERVING and deal on."""
    codealer, dealer = table
    wait_for("co-dealt health SERVING", lambda: status(dealer.target, CODEAL) == SERVING, timeout=60)
    assert metric(dealer, "fairdeck_codealer_healthy") == 1
    port = codealer.port
    codealer.stop()
    wait_for("co-dealt health NOT_SERVING", lambda: status(dealer.target, CODEAL) == NOT_SERVING)
    assert status(dealer.target, "") == SERVING
    assert status(dealer.target, "fairdeck.v1.DealerService") == SERVING
    assert metric(dealer, "fairdeck_codealer_healthy") == 0
    stub = dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(dealer.target))
    hand = stub.OpenHand(pb.OpenHandRequest(deck="standard")).hand
    assert len(stub.DrawCards(pb.DrawCardsRequest(hand_id=hand.hand_id, count=5)).cards) == 5
    assert "co-dealt health NOT_SERVING: the co-dealer at" in (dealer.stderr_path.read_text())
    with CodealerProcess(codealer_dir, f"127.0.0.1:{port}", forker=serve_forker):  # back on its address
        wait_for(
            "co-dealt health SERVING again", lambda: status(dealer.target, CODEAL) == SERVING, timeout=60
        )
        assert metric(dealer, "fairdeck_codealer_healthy") == 1


def test_codealt_health_is_not_serving_for_a_codealer_with_another_identity(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    init_codealer(tmp_path / "cd1")
    other = init_codealer(tmp_path / "cd2")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        flags = [other if f == codealer.identity else f for f in codealer.dealer_flags()]
        log = tmp_path / "dealer.log"
        with DealerProcess(tmp_path / "data", log, *flags, forker=serve_forker) as dealer:
            wait_for(
                "the identity check",
                lambda: "another identity key" in dealer.stderr_path.read_text(),
                timeout=60,
            )
            assert status(dealer.target, CODEAL) == NOT_SERVING
            assert status(dealer.target, "") == SERVING


@pytest.mark.light
def test_the_codealers_health_follows_its_ledgers_writes(
    codealer_dir: Path, serve_forker: ServeForker
) -> None:
    """The co-dealer served no health at all. It says SERVING while its ledger takes writes: with
    the ledger's write lock held elsewhere (a second process, a stuck backup) it cannot record a
    share, so NOT_SERVING until a probe write succeeds again."""
    with CodealerProcess(codealer_dir, forker=serve_forker) as codealer:
        wait_for("co-dealer SERVING", lambda: status(codealer.target, "") == SERVING)
        assert status(codealer.target, "fairdeck.v1.CoDealerService") == SERVING
        blocker = sqlite3.connect(codealer_dir / "codealer.db", isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            wait_for("co-dealer NOT_SERVING", lambda: status(codealer.target, "") == NOT_SERVING, timeout=60)
            assert status(codealer.target, "fairdeck.v1.CoDealerService") == NOT_SERVING
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        wait_for("co-dealer SERVING again", lambda: status(codealer.target, "") == SERVING, timeout=60)
        log = codealer.stop()
    assert "does not take writes: health NOT_SERVING" in log and "takes writes: health SERVING" in log


@pytest.mark.light
def test_codealt_health_said_serving_while_the_codealers_ledger_took_no_writes(
    table: tuple[CodealerProcess, DealerProcess], codealer_dir: Path
) -> None:
    """The dealer's co-dealt health asked only for the co-dealer's identity, which needs no write:
    with the co-dealer's ledger locked (every share refused STORAGE_UNAVAILABLE) it said SERVING.
    Now the identity check is refused while the co-dealer's ledger takes no writes, so co-dealt
    health follows it (and the ordinary mode's stays SERVING)."""
    codealer, dealer = table
    wait_for("co-dealt SERVING", lambda: status(dealer.target, CODEAL) == SERVING, timeout=60)
    blocker = sqlite3.connect(codealer_dir / "codealer.db", isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        wait_for("co-dealer NOT_SERVING", lambda: status(codealer.target, "") == NOT_SERVING, timeout=60)
        wait_for("co-dealt NOT_SERVING", lambda: status(dealer.target, CODEAL) == NOT_SERVING, timeout=30)
        assert status(dealer.target, "") == SERVING
        blocker.execute("ROLLBACK")
    finally:
        blocker.close()
    wait_for("co-dealt SERVING again", lambda: status(dealer.target, CODEAL) == SERVING, timeout=60)
    assert "cannot record shares (its ledger does not take writes)" in dealer.stderr()


@pytest.mark.light
def test_codealt_health_said_serving_while_the_dealers_own_codeal_db_took_no_writes(
    table: tuple[CodealerProcess, DealerProcess], tmp_path: Path
) -> None:
    """With the dealer's codeal.db locked (a backup holding it, a full disk) every co-dealt draw
    failed, and co-dealt health said SERVING: it followed the co-dealer and the dealer's main
    database only. It now follows a probe write to codeal.db too."""
    _, dealer = table
    wait_for("co-dealt SERVING", lambda: status(dealer.target, CODEAL) == SERVING, timeout=60)
    blocker = sqlite3.connect(tmp_path / "data" / "codeal.db", isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        wait_for("co-dealt NOT_SERVING", lambda: status(dealer.target, CODEAL) == NOT_SERVING, timeout=60)
        assert status(dealer.target, "") == SERVING
        blocker.execute("ROLLBACK")
    finally:
        blocker.close()
    wait_for("co-dealt SERVING again", lambda: status(dealer.target, CODEAL) == SERVING, timeout=60)
    assert "the dealer's codeal.db does not take writes" in dealer.stderr()
