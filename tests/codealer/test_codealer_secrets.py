"""A month of a co-dealer's ordinary life leaves no secret where others can read it: a co-dealt
hand dealt to a seat and closed, calls without the token and with a wrong one, a malformed call,
the token rotated and the dealer started with the old one. Neither process's log or answers hold
the co-dealer's identity key, its secrets key, the dealer's token (old or new), the dealer's seed
or log key, or the seat's secret key, in any spelling (tests/support/secret_forms.py); and no file
either process wrote is readable by group or others. Real processes, real files."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, open_cards, seat_releases
from fairdeck.client.exceptions import FairdeckError
from fairdeck.v1 import codealer_pb2
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.secret_forms import forms


def file_secrets(directory: Path) -> dict[str, bytes]:
    """The secret bytes in a co-dealer's or dealer's key files, by name."""
    out: dict[str, bytes] = {}
    for name in ("codealer.key", "secrets.key", "dealer.token", "seed.key", "log.key"):
        path = directory / name
        if path.exists():
            text = path.read_text().strip()
            if name == "codealer.key":
                out[name] = bytes.fromhex(text)
            elif name == "dealer.token":
                out[name] = text.encode()
            else:
                out[name] = base64.b64decode(text.splitlines()[0].split()[-1] + "==")
    return out


def test_a_codealers_month_leaves_no_secret_in_a_log_an_answer_or_a_readable_file(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask: whatever is private must be made so
    try:
        run_a_month(tmp_path)
    finally:
        os.umask(old)


def run_a_month(tmp_path: Path) -> None:
    cd_dir, data = tmp_path / "cd1", tmp_path / "data"
    init_codealer(cd_dir)
    seat = SeatKey.generate()
    answers: list[str] = []
    secret: dict[str, bytes] = {"seat secret": seat.secret}
    codealer = CodealerProcess(cd_dir)
    try:
        secret["old token"] = codealer.token.encode()
        with DealerProcess(data, tmp_path / "dealer.log", *codealer.dealer_flags()) as dealer:
            with DealerClient(dealer.target, timeout=60) as client:
                hands = CodealHands(client)
                hand = hands.open_hand("standard")
                got = hands.draw(hand.hand_id, 2, seat_public_key=seat.public_key)
                assert len(open_cards(hand, got.sealed_cards, seat, [bytes.fromhex(codealer.identity)])) == 2
                releases = seat_releases(hand, got.sealed_cards, seat)  # secrets until used: never logged
                secret.update({f"seat release {i}": t for i, t in enumerate(releases)})
                hands.close_hand(hand.hand_id, seat_releases=releases)
            for token in (None, "fdcd_" + "B" * 43, codealer.token):
                with pytest.raises(grpc.RpcError) as e:  # no token, a wrong one; a malformed call
                    codealer.stub(token).ShuffleDeck(
                        codealer_pb2.ShuffleDeckRequest(hand_id=hand.hand_id, key_records=[b"x" * 128]),
                        timeout=60,
                    )
                answers.append(str(e.value.details()))
        secret.update(file_secrets(cd_dir), **file_secrets(data))
        copy = tmp_path / "dealer-host.token"  # the dealer's copy, taken before the rotation
        copy.write_bytes((cd_dir / "dealer.token").read_bytes())
        copy.chmod(0o600)
        subprocess.run(
            [sys.executable, "-m", "fairdeck.cli", "codealer", "token", "--dir", str(cd_dir)],
            check=True,
            capture_output=True,
            timeout=60,
            env=clean_env(),
        )
        secret["new token"] = (cd_dir / "dealer.token").read_text().strip().encode()
        logs = [codealer.stop()]
        codealer = CodealerProcess(cd_dir)  # takes the new token; the dealer still has the old
        flags = (*codealer.dealer_flags(), "--codealer-token", f"@{copy}")  # the last token given counts
        with DealerProcess(data, tmp_path / "dealer.log", *flags) as dealer:
            with DealerClient(dealer.target, timeout=60) as client, pytest.raises(FairdeckError) as refused:
                stale = CodealHands(client)  # a pooled deck opens; its first card needs the co-dealer
                stale.draw(stale.open_hand("standard").hand_id, 1)
            assert refused.value.reason == "CODEALER_UNAVAILABLE", refused.value
            answers.append(str(refused.value))
        logs.append(codealer.stop())
    finally:
        codealer.stop()
    logs.append((tmp_path / "dealer.log").read_text())
    text = "\n".join(logs + answers)
    for name, value in secret.items():
        for form in forms(value):
            shown = form if isinstance(form, str) else form.decode("latin-1")
            assert shown not in text, f"{name} in a log line or an answer"
    for directory in (cd_dir, data):
        for path in directory.iterdir():
            if path.is_file():
                mode = stat.S_IMODE(path.stat().st_mode)
                assert not mode & 0o077, f"{path} is {mode:04o}"
