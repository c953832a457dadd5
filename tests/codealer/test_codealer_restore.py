"""A co-dealer whose ledger came back from an older backup forgot the shares it gave after it:
asked again for a position it already sealed to a seat, it sealed it a second time, to whatever
key the caller named (the dealer's own). ``fairdeck codealer restored --dir DIR`` ends every hand
the restored ledger holds open, so none gives a position again. Real processes, real files."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey
from fairdeck.client.exceptions import from_rpc_error
from fairdeck.v1 import codealer_pb2
from tests.support.codealers import CodealerProcess, init_codealer, online_copy
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.forked_serve import ServeForker


def restore(directory: Path, copy: Path) -> None:
    for extra in ("codealer.db-wal", "codealer.db-shm"):
        (directory / extra).unlink(missing_ok=True)
    shutil.copy(copy, directory / "codealer.db")


def seal_again(codealer: CodealerProcess, hand_id: str, key: bytes) -> codealer_pb2.GetShareResponse:
    request = codealer_pb2.GetShareRequest(hand_id=hand_id, position=0, seat_public_key=key, count=1)
    reply: codealer_pb2.GetShareResponse = codealer.stub().GetShare(request, timeout=60)
    return reply


def test_a_codealer_restored_from_an_older_backup_sealed_a_dealt_position_again_to_another_key(
    tmp_path: Path,
    serve_forker: ServeForker,
) -> None:
    directory = tmp_path / "cd1"
    init_codealer(directory)
    alice, mallory = SeatKey.generate(), SeatKey.generate()
    with CodealerProcess(directory, forker=serve_forker) as codealer:
        dealer = DealerProcess(
            tmp_path / "data", tmp_path / "dealer.log", *codealer.dealer_flags(), forker=serve_forker
        )
        with dealer, DealerClient(dealer.target, timeout=60) as client:
            hands = CodealHands(client)
            hand = hands.open_hand("standard")
            online_copy(directory / "codealer.db", tmp_path / "nightly.db")  # the hand open, nothing dealt
            hands.draw(hand.hand_id, 2, seat_public_key=alice.public_key)  # positions 0 and 1
        with pytest.raises(grpc.RpcError) as refused:  # the live co-dealer refuses, as it should
            seal_again(codealer, hand.hand_id, mallory.public_key)
        assert from_rpc_error(refused.value).reason == "SHARE_GIVEN_TO_ANOTHER_SEAT"
    restore(directory, tmp_path / "nightly.db")

    control = tmp_path / "control"  # the hazard, without the command: position 0 sealed again
    shutil.copytree(directory, control)
    (control / "fairdeck.lock").unlink(missing_ok=True)
    with CodealerProcess(control, forker=serve_forker) as forgetful:
        assert len(seal_again(forgetful, hand.hand_id, mallory.public_key).sealed_shares) == 1

    out = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "codealer", "restored", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert out.returncode == 0, out.stderr
    assert re.match(r"ended \d+ co-dealt hands open in ", out.stderr.splitlines()[-1]), out.stderr
    with CodealerProcess(directory, forker=serve_forker) as codealer:
        with pytest.raises(grpc.RpcError) as refused:
            seal_again(codealer, hand.hand_id, mallory.public_key)
        error = from_rpc_error(refused.value)
        assert (error.code.name, error.reason) == ("FAILED_PRECONDITION", "HAND_CLOSED")


def test_restored_refuses_a_running_codealer_and_a_dir_without_one_in_one_line(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    def restored(directory: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fairdeck.cli", "codealer", "restored", "--dir", str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(),
        )

    out = restored(tmp_path / "nothing")
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
    assert "no co-dealer at" in out.stderr and "restore its whole directory" in out.stderr
    init_codealer(tmp_path / "cd1")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker):
        out = restored(tmp_path / "cd1")
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
    assert "in use by another co-dealer" in out.stderr, out.stderr
