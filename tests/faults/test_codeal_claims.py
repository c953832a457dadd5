"""A replica paused (SIGSTOP, a frozen VM) while its co-dealt record is moved knowingly to another
replica (``fairdeck init --codeal-record --take-over``), then resumed: two dealers up that would
hold, and close, the same co-dealt hands. The one that no longer holds the record's claim must say
so: co-dealt health NOT_SERVING, and its co-dealt calls refused UNAVAILABLE STORAGE_UNAVAILABLE
naming its codeal.db, while the one that took it over serves. A take-over while the holder is alive
is refused. Real processes, a real PostgreSQL database."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands
from fairdeck.client.exceptions import FairdeckError
from fairdeck_server.dealing.codeal_health import CODEAL_HEALTH
from fairdeck_server.dealing.vault import load_or_create_key
from fairdeck_server.publishing.log_signing import load_or_create_signer
from tests.support.codealers import NOT_SERVING, SERVING, CodealerProcess, init_codealer, online_copy, status
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker
from tests.support.waits import wait_for


def take_over(forker: ServeForker, data: Path, url: str, log_key: Path) -> subprocess.CompletedProcess[str]:
    """``fairdeck init --codeal-record --take-over``, forked (a fresh process: polled below)."""
    command = ["init", "--codeal-record", "--take-over", "--db", url]
    command += ["--data", str(data), "--log-key-file", str(log_key)]
    return forker.run(command, timeout=60)


@pytest.mark.light
def test_a_paused_replica_resumed_after_its_record_moved_dealt_on_beside_the_new_holder(
    tmp_path: Path, pg_url: str, serve_forker: ServeForker
) -> None:
    seed_key, log_key = tmp_path / "seed.key", tmp_path / "log.key"
    load_or_create_key(seed_key, environ={})
    load_or_create_signer(log_key, "fairdeck.test/codeal-claims")
    init_codealer(tmp_path / "cd")
    with CodealerProcess(tmp_path / "cd", forker=serve_forker) as codealer:
        flags = ("--db", pg_url, "--seed-key-file", str(seed_key), "--log-key-file", str(log_key))
        flags += (*codealer.dealer_flags(), "--log-level", "INFO")
        a_dir, b_dir = tmp_path / "a", tmp_path / "b"
        a_dir.mkdir()  # as a replica's operator makes it (before, serve did not on PostgreSQL)
        with DealerProcess(a_dir, tmp_path / "a.log", *flags, forker=serve_forker) as a:
            with DealerClient(a.target, timeout=60) as client:
                opened = CodealHands(client).open_hand("standard").hand_id
            b_dir.mkdir()
            online_copy(a_dir / "codeal.db", b_dir / "codeal.db")
            alive = take_over(serve_forker, b_dir, pg_url, log_key)
            assert alive.returncode == 2 and "Traceback" not in alive.stderr, alive.stderr
            assert "stop it first" in alive.stderr and str(a_dir.resolve()) in alive.stderr, alive.stderr
            a.signal(signal.SIGSTOP)
            try:
                moved = wait_for(
                    "the take-over, once A is silent",
                    lambda: _done(take_over(serve_forker, b_dir, pg_url, log_key)),
                    timeout=60,
                    every=0.5,
                )
                assert "is now held by " in moved.stderr and str(b_dir.resolve()) in moved.stderr, (
                    moved.stderr
                )
                b = DealerProcess(b_dir, tmp_path / "b.log", *flags, forker=serve_forker)
            finally:
                a.signal(signal.SIGCONT)
            with b:
                wait_for(
                    "A's co-dealt health NOT_SERVING", lambda: status(a.target, CODEAL_HEALTH) == NOT_SERVING
                )
                with DealerClient(a.target, timeout=60) as client:
                    wait_for(  # health says so at resume already; that B holds it, one renewal later
                        "A's renewal to find its record held by B", lambda: _knows_it_lost(client, opened)
                    )
                    with pytest.raises(FairdeckError) as refused:
                        CodealHands(client).close_hand(opened)
                error = refused.value
                assert error.code == grpc.StatusCode.UNAVAILABLE and error.reason == "STORAGE_UNAVAILABLE"
                assert str(a_dir / "codeal.db") in str(error) and "now held by the replica at" in str(error)
                with DealerClient(a.target, timeout=60) as client, pytest.raises(FairdeckError) as refused:
                    CodealHands(client).open_hand("standard")
                assert refused.value.code == grpc.StatusCode.UNAVAILABLE, refused.value
                wait_for("B's co-dealt health SERVING", lambda: status(b.target, CODEAL_HEALTH) == SERVING)
                with DealerClient(b.target, timeout=60) as client:
                    CodealHands(client).close_hand(opened)
    said = (tmp_path / "a.log").read_text()
    assert "co-dealt health NOT_SERVING" in said and "Traceback" not in said


def _done(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str] | None:
    """The take-over's run once it succeeded; None while it is refused as too early."""
    if out.returncode == 0:
        return out
    assert "stop it first" in out.stderr, out.stderr
    return None


def _knows_it_lost(client: DealerClient, hand_id: str) -> bool:
    """Whether A's co-dealt calls are refused as its record now held by another replica. Resumed,
    A refuses them at once as its claim unconfirmed (it lapsed during the pause), and health says
    NOT_SERVING; who holds it, only once its renewal, woken at resume, has read the claim's row.
    Asked by a draw that does nothing either way (a seat key a byte short), always refused here."""
    with pytest.raises(FairdeckError) as draw:
        CodealHands(client).draw(hand_id, 1, seat_public_key=b"k" * 31)
    error = draw.value
    assert error.code == grpc.StatusCode.UNAVAILABLE and error.reason == "STORAGE_UNAVAILABLE", error
    if "now held by the replica at" in str(error):
        return True
    assert "cannot confirm that this replica holds co-dealt record" in str(error), error
    return False
