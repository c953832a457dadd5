"""The SDK writes format 5 (docs/hand-proof.md) from a real dealer: a real ``fairdeck codealer``
process and a dealer on 127.0.0.1:0 deal a co-dealt hand through the SDK, the closed Hand says where
its setup, seals and seeds entries are in the log, ``codeal_proof`` fetches their receipts through an
``AuditClient`` and writes the file, and ``fairdeck verify`` holds it against the pinned keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.cli.commands import main as fairdeck
from fairdeck.client import AuditClient, DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, codeal_proof, seat_releases
from fairdeck.codeal.handfile import CodealHandProof
from fairdeck.codeal.logged_proof import LoggedCodealProof
from fairdeck.log.note import Verifier
from fairdeck.v1 import dealer_pb2 as pb
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import RunningDealer
from tests.support.forked_serve import ServeForker
from tests.support.logs import verifier_key

pytestmark = pytest.mark.xdist_group("codealer_proof_v5")
"""One worker runs the module, so its co-dealt hand is dealt once a run."""


@pytest.fixture(scope="module")
def closed(
    tmp_path_factory: pytest.TempPathFactory, serve_forker: ServeForker
) -> Iterator[tuple[pb.Hand, str, str, list[bytes], str]]:
    """A closed co-dealt hand (two cards to each of two seats, three public), the log key, the
    co-dealer's identity key, the seats' keys and the dealer's target (still running)."""
    root = tmp_path_factory.mktemp("codealt-v5")
    init_codealer(root / "cd1")
    with CodealerProcess(root / "cd1", forker=serve_forker) as codealer:
        config = {
            "codealer": codealer.target,
            "codealer_key": codealer.identity,
            "codealer_token": f"@{codealer.token_file}",
            "checkpoint_interval": 0.02,
        }
        with RunningDealer(root / "data", **config) as dealer, DealerClient(dealer.target, timeout=30) as c:
            hands = CodealHands(c)
            hand = hands.open_hand("standard")
            keys = [SeatKey.generate(), SeatKey.generate()]
            seats = [k.public_key for k in keys]
            dealt = hands.deal_seats(hand.hand_id, 2, seats)
            hands.draw(hand.hand_id, 3)
            pairs = zip(dealt, keys, strict=True)
            releases = [t for cards, seat in pairs for t in seat_releases(hand, cards, seat)]
            done = hands.close_hand(hand.hand_id, seat_releases=releases)
            yield done, verifier_key(root / "data"), codealer.identity, seats, dealer.target


def test_the_closed_hand_says_where_its_entries_are(
    closed: tuple[pb.Hand, str, str, list[bytes], str],
) -> None:
    hand = closed[0]
    at = hand.codeal.log_indexes
    assert at.HasField("setup") and at.HasField("seeds") and len(at.seals) == 1
    assert at.setup < at.seals[0] < at.seeds


def test_the_sdk_writes_format_5_and_fairdeck_verify_holds_it(
    closed: tuple[pb.Hand, str, str, list[bytes], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hand, log_key, identity, seats, target = closed
    with AuditClient(target, verifier=log_key, timeout=30) as audit:
        mine = codeal_proof(audit, hand, seat_public_key=seats[0])
        table = codeal_proof(audit, hand)
    assert isinstance(mine, LoggedCodealProof) and isinstance(table, LoggedCodealProof)
    assert mine.seat_keys == (seats[0], seats[0])
    assert table.seat_keys == (seats[0], seats[0], seats[1], seats[1], b"", b"", b"")
    assert [p for p, *_ in mine.seals[0].statements] == [0, 1, 2, 3]  # every sealed position
    mine.verify([bytes.fromhex(identity)], Verifier.parse(log_key))
    path = tmp_path / "hand.json"
    path.write_text(mine.to_json(), encoding="utf-8")
    status = fairdeck(["verify", str(path), "--codealer-key", identity, "--key", log_key])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.startswith(
        f"OK: co-dealt hand {hand.hand_id} verified (standard, 2 cards dealt, 2 key holders"
    )
    assert "in the log at tree size" in out


def test_a_hand_whose_entries_are_not_placed_gets_format_4(
    closed: tuple[pb.Hand, str, str, list[bytes], str],
) -> None:
    """A hand closed before the dealer noted its seals and seeds indexes: no receipts, format 4."""
    hand, log_key, identity, _, target = closed
    older = pb.Hand()
    older.CopyFrom(hand)
    older.codeal.ClearField("log_indexes")
    with AuditClient(target, verifier=log_key, timeout=30) as audit:
        proof = codeal_proof(audit, older)
    assert isinstance(proof, CodealHandProof)
    proof.verify([bytes.fromhex(identity)])


def test_a_hand_closed_without_seals_entries_gets_format_4(
    closed: tuple[pb.Hand, str, str, list[bytes], str],
) -> None:
    """A hand whose closing was logged by a dealer before seals entries: its seeds are placed but no
    seals entry is; format 5 would fail at step seal, so the SDK writes format 4."""
    hand, log_key, identity, _, target = closed
    older = pb.Hand()
    older.CopyFrom(hand)
    older.codeal.log_indexes.ClearField("seals")
    with AuditClient(target, verifier=log_key, timeout=30) as audit:
        proof = codeal_proof(audit, older)
    assert isinstance(proof, CodealHandProof)
    proof.verify([bytes.fromhex(identity)])
