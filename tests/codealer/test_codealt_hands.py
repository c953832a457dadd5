"""Co-dealt hands end to end: a real ``fairdeck codealer`` process and a real dealer on 127.0.0.1:0,
through the gRPC contract and the SDK's seat module (fairdeck.client.codeal_seat)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import (
    CodealHands,
    SeatKey,
    hand_proof,
    open_cards,
    seat_releases,
    verify_codeal_hand,
)
from fairdeck.client.exceptions import FailedPrecondition, from_rpc_error
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.handfile import CodealHandProof
from fairdeck.v1 import codealer_pb2, dealer_pb2_grpc
from fairdeck.v1 import dealer_pb2 as pb
from tests.support.codealers import CodealerProcess
from tests.support.dealers import DealerProcess
from tests.support.fixtures import TableFactory
from tests.support.forked_serve import ServeForker


@pytest.fixture
def table(
    module_codealt_table: tuple[CodealerProcess, DealerProcess],
) -> tuple[CodealerProcess, DealerProcess]:
    """The module's co-dealer and dealer: each test deals hands of its own and stops neither."""
    return module_codealt_table


def stub(target: str) -> dealer_pb2_grpc.DealerServiceStub:
    return dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(target))


def refusal(call: object) -> tuple[str, str]:
    with pytest.raises(grpc.RpcError) as e:
        call()  # type: ignore[operator]
    error = from_rpc_error(e.value)
    return error.code.name, error.reason


def test_each_seat_opens_only_its_own_cards_and_the_closed_hand_verifies(
    table: tuple[CodealerProcess, DealerProcess],
) -> None:
    codealer, dealer = table
    with DealerClient(dealer.target, timeout=30) as client:
        hands = CodealHands(client)
        hand = hands.open_hand("standard")
        assert hand.mode == pb.DEAL_MODE_CODEALT and len(hand.codeal.shuffle_records) == 2
        alice, bob = SeatKey.generate(), SeatKey.generate()  # each made on the seat's device
        to_alice = hands.draw(hand.hand_id, 2, seat_public_key=alice.public_key)
        to_bob = hands.draw(hand.hand_id, 2, seat_public_key=bob.public_key)
        board = hands.draw(hand.hand_id, 3)
        assert to_alice.cards == () and to_bob.cards == ()  # the dealer cannot see them
        assert len(board.cards) == 3 and board.position == 4 and board.remaining == 45
        pinned = [bytes.fromhex(codealer.identity)]
        alice_cards = open_cards(hand, to_alice.sealed_cards, alice, pinned)
        bob_cards = open_cards(hand, to_bob.sealed_cards, bob, pinned)
        with pytest.raises(CodealError) as e:
            open_cards(hand, to_alice.sealed_cards, bob, pinned)
        assert e.value.step == "seal"
        # The co-dealer keeps its seed (every hole card, with the dealer's) until both seats release
        # the hand (spec 9.3); the refusal comes back through the dealer as it is, the hand open.
        from_alice = seat_releases(hand, to_alice.sealed_cards, alice)
        from_bob = seat_releases(hand, to_bob.sealed_cards, bob)
        for partial in ([], from_alice):
            with pytest.raises(FailedPrecondition) as refused:
                hands.close_hand(hand.hand_id, seat_releases=partial)
            assert (refused.value.reason, refused.value.field) == ("SEATS_NOT_RELEASED", "seat_releases")
        assert hands.get_hand(hand.hand_id).state == pb.HAND_STATE_SHUFFLED
        closed = hands.close_hand(hand.hand_id, seat_releases=[*from_alice, *from_bob])
    assert closed.state == pb.HAND_STATE_CLOSED
    assert [d.card for d in closed.codeal.dealt] == [*alice_cards, *bob_cards, *(c.id for c in board.cards)]
    seats = [d.seat_public_key for d in closed.codeal.dealt]
    assert seats == [alice.public_key] * 2 + [bob.public_key] * 2 + [b""] * 3
    verify_codeal_hand(closed, [bytes.fromhex(codealer.identity)])
    assert CodealHandProof.from_json(hand_proof(closed).to_json()) == hand_proof(closed)


def test_a_dealer_that_skips_the_codealers_shuffle_is_caught(
    table: tuple[CodealerProcess, DealerProcess],
) -> None:
    codealer, dealer = table
    dealer_stub = stub(dealer.target)
    hand = dealer_stub.OpenHand(pb.OpenHandRequest(deck="short", mode=pb.DEAL_MODE_CODEALT)).hand
    dealer_stub.DrawCards(pb.DrawCardsRequest(hand_id=hand.hand_id, count=2))
    closed = dealer_stub.CloseHand(pb.CloseHandRequest(hand_id=hand.hand_id)).hand
    skipped = pb.Hand()
    skipped.CopyFrom(closed)
    del skipped.codeal.shuffle_records[1]
    with pytest.raises(CodealError) as e:
        verify_codeal_hand(skipped, [bytes.fromhex(codealer.identity)])
    assert e.value.step == "transcript"
    # A co-dealer the verifier does not pin (the house posing as one) is refused at the key step.
    with pytest.raises(CodealError) as e:
        verify_codeal_hand(closed, [bytes(32)])
    assert e.value.step == "key"


def test_the_codealer_refuses_another_seats_card_and_a_card_out_of_order_even_after_a_restart(
    tmp_path: Path, codealer_dir: Path, serve_forker: ServeForker
) -> None:
    codealer = CodealerProcess(codealer_dir, forker=serve_forker)
    try:
        with DealerProcess(
            tmp_path / "data",
            tmp_path / "dealer.log",
            *codealer.dealer_flags(),
            forker=serve_forker,
        ) as dealer:
            dealer_stub = stub(dealer.target)
            hand = dealer_stub.OpenHand(pb.OpenHandRequest(deck="standard", mode=pb.DEAL_MODE_CODEALT)).hand
            alice, mallory = SeatKey.generate(), SeatKey.generate()
            dealer_stub.DrawCards(
                pb.DrawCardsRequest(hand_id=hand.hand_id, count=2, seat_public_key=alice.public_key)
            )
        codealer.stop()
        codealer = CodealerProcess(codealer_dir, forker=serve_forker)  # a restart: the ledger remembers
        direct = codealer.stub()  # the dealer's operator, asking the co-dealer itself
        assert refusal(
            lambda: direct.GetShare(
                codealer_pb2.GetShareRequest(
                    hand_id=hand.hand_id, position=0, seat_public_key=mallory.public_key
                )
            )
        ) == ("PERMISSION_DENIED", "SHARE_GIVEN_TO_ANOTHER_SEAT")
        assert refusal(
            lambda: direct.GetShare(codealer_pb2.GetShareRequest(hand_id=hand.hand_id, position=1))
        ) == ("PERMISSION_DENIED", "SHARE_GIVEN_TO_ANOTHER_SEAT")  # public is another seat too, mid-hand
        assert refusal(
            lambda: direct.GetShare(
                codealer_pb2.GetShareRequest(
                    hand_id=hand.hand_id, position=5, seat_public_key=mallory.public_key
                )
            )
        ) == ("FAILED_PRECONDITION", "SHARE_OUT_OF_ORDER")
        # The seat that holds position 0 may ask again (a retry) and gets its share.
        again = direct.GetShare(
            codealer_pb2.GetShareRequest(hand_id=hand.hand_id, position=0, seat_public_key=alice.public_key)
        )
        assert [len(s) for s in again.sealed_shares] == [176]
    finally:
        codealer.stop()


def test_codealer_down_refuses_codealt_opens_unavailable_and_ordinary_hands_still_deal(
    codealt_table_factory: TableFactory,
) -> None:
    codealer, dealer = codealt_table_factory()  # its own: it stops the co-dealer
    codealer.stop()
    dealer_stub = stub(dealer.target)
    assert refusal(
        lambda: dealer_stub.OpenHand(pb.OpenHandRequest(deck="standard", mode=pb.DEAL_MODE_CODEALT))
    ) == ("UNAVAILABLE", "CODEALER_UNAVAILABLE")
    hand = dealer_stub.OpenHand(pb.OpenHandRequest(deck="standard")).hand
    assert hand.mode == pb.DEAL_MODE_UNSPECIFIED and hand.commitment
    assert len(dealer_stub.DrawCards(pb.DrawCardsRequest(hand_id=hand.hand_id, count=5)).cards) == 5


def test_a_codealt_open_on_a_dealer_without_a_codealer_is_refused(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    with DealerProcess(tmp_path / "data", tmp_path / "dealer.log", forker=serve_forker) as dealer:
        assert refusal(
            lambda: stub(dealer.target).OpenHand(
                pb.OpenHandRequest(deck="standard", mode=pb.DEAL_MODE_CODEALT)
            )
        ) == ("FAILED_PRECONDITION", "CODEAL_NOT_CONFIGURED")


def test_a_whole_table_is_dealt_in_one_call_and_each_seat_opens_only_its_cards(
    table: tuple[CodealerProcess, DealerProcess],
) -> None:
    codealer, dealer = table
    with DealerClient(dealer.target, timeout=30) as client:
        hands = CodealHands(client)
        hand = hands.open_hand("standard")
        seats = [SeatKey.generate() for _ in range(3)]
        dealt = hands.deal_seats(hand.hand_id, 2, [s.public_key for s in seats])
        assert [[c.position for c in cards] for cards in dealt] == [[0, 1], [2, 3], [4, 5]]
        pinned = [bytes.fromhex(codealer.identity)]
        opened = [open_cards(hand, cards, seat, pinned) for cards, seat in zip(dealt, seats, strict=True)]
        with pytest.raises(CodealError):
            open_cards(hand, dealt[1], seats[0], pinned)
        pairs = zip(dealt, seats, strict=True)
        releases = [t for cards, seat in pairs for t in seat_releases(hand, cards, seat)]
        closed = hands.close_hand(hand.hand_id, seat_releases=releases)
    assert [d.card for d in closed.codeal.dealt] == [c for cards in opened for c in cards]
    verify_codeal_hand(closed, [bytes.fromhex(codealer.identity)])


def test_the_codealer_verifies_the_dealers_shuffle_before_its_own(
    codealer_dir: Path, serve_forker: ServeForker
) -> None:
    """A dealer that skips its own shuffle, or hands over one it did not make for this hand, gets no
    shuffle from the co-dealer: refused INVALID_ARGUMENT INVALID_TRANSCRIPT naming the step."""
    import random

    from fairdeck.codeal.keys import new_holder
    from fairdeck.codeal.local import codeal_local
    from fairdeck.core.decks import DeckSpec

    with CodealerProcess(codealer_dir, forker=serve_forker) as codealer:
        direct = codealer.stub()
        announced = direct.AnnounceHand(
            codealer_pb2.AnnounceHandRequest(hand_id="h-skip", deck="short", holder=1, holder_count=2)
        )
        other = codeal_local("short", "h-other", 2, [], random.Random(3).randbytes)  # another hand's
        mine = new_holder(DeckSpec.parse("short"), "h-skip", 0, random.Random(4).randbytes)
        keys = [mine.record.encode(), announced.key_record]
        skipped = codealer_pb2.ShuffleDeckRequest(hand_id="h-skip", key_records=keys)
        assert refusal(lambda: direct.ShuffleDeck(skipped)) == ("INVALID_ARGUMENT", "INVALID_TRANSCRIPT")
        replayed = codealer_pb2.ShuffleDeckRequest(
            hand_id="h-skip", key_records=keys, shuffle_records=[other.shuffles[0]]
        )
        with pytest.raises(grpc.RpcError) as e:
            direct.ShuffleDeck(replayed)
        error = from_rpc_error(e.value)
        assert (error.code.name, error.reason) == ("INVALID_ARGUMENT", "INVALID_TRANSCRIPT")
        assert error.field == "shuffle_records" and "shuffle" in str(error)


def test_everything_the_dealer_holds_during_a_hand_does_not_open_a_seats_card(
    table: tuple[CodealerProcess, DealerProcess], tmp_path: Path
) -> None:
    """The dealer's data dir (its database, co-dealt hands file and seed key) and its log, taken
    while a seat holds its cards: the dealer's own key opens no card, and the co-dealer's share of
    the seat's cards appears nowhere in it (the dealer only relayed it sealed)."""
    import sqlite3

    from fairdeck.codeal.elgamal import card_points
    from fairdeck.codeal.group import Scalar, mul, sub
    from fairdeck.codeal.record import ShuffleRecord
    from fairdeck.core.decks import DeckSpec
    from fairdeck_server.dealing.vault import SeedVault, read_key_file

    _, dealer = table
    with DealerClient(dealer.target, timeout=30) as client:
        hands = CodealHands(client)
        hand = hands.open_hand("standard")
        alice = SeatKey.generate()
        to_alice = hands.draw(hand.hand_id, 2, seat_public_key=alice.public_key)
        data = dealer.data_dir
        assert data is not None
        held = b"".join(p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file())
        held += dealer.stderr_path.read_bytes()
        keys = read_key_file(data / "seed.key")
        with sqlite3.connect(data / "codeal.db") as db:
            (sealed,) = db.execute(
                "SELECT sealed_secrets FROM codeal_hands WHERE hand_id = ?", (hand.hand_id,)
            ).fetchone()
        x0 = SeedVault(keys[0], tuple(keys[1:])).open(hand.hand_id, sealed)[:32]
        released = seat_releases(hand, to_alice.sealed_cards, alice)
        closed = hands.close_hand(hand.hand_id, seat_releases=released)
    spec = DeckSpec.parse("standard")
    final = ShuffleRecord.decode(bytes(hand.codeal.shuffle_records[1]), spec.size, 1).deck
    cards = card_points(spec)
    for dealt in closed.codeal.dealt:
        e = final[dealt.position]
        assert sub(e.c2, mul(Scalar(x0), e.c1)) not in cards  # the dealer's key alone opens nothing
        theirs = bytes(dealt.shares[1])[:32]  # the co-dealer's D for this position, public only now
        for form in (theirs, theirs.hex().encode(), theirs.hex().upper().encode()):
            assert form not in held


def test_a_dealer_whose_record_disagrees_with_the_codealers_is_refused_with_the_codealers_reason(
    table: tuple[CodealerProcess, DealerProcess],
) -> None:
    """Someone took position 0 for another seat at the co-dealer (a second dealer, or a dealer
    restored from an older backup): the dealer's draw is refused, and says why."""
    codealer, dealer = table
    with DealerClient(dealer.target, timeout=30) as client:
        hands = CodealHands(client)
        hand = hands.open_hand("short")
        codealer.stub().GetShare(
            codealer_pb2.GetShareRequest(
                hand_id=hand.hand_id, position=0, seat_public_key=SeatKey.generate().public_key
            )
        )
        with pytest.raises(FailedPrecondition) as e:
            hands.draw(hand.hand_id, 2, seat_public_key=SeatKey.generate().public_key)
    assert e.value.reason == "CODEALER_REFUSED" and "SHARE_GIVEN_TO_ANOTHER_SEAT" in str(e.value)


def test_the_readme_codealt_snippet_runs_as_written(
    table: tuple[CodealerProcess, DealerProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codealer, dealer = table
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (snippet,) = [b for b in readme.split("```python\n")[1:] if "CodealHands" in b.split("```")[0]]
    code = snippet.split("```")[0].replace('"127.0.0.1:50052"', repr(dealer.target))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "codealer.key").write_text(codealer.identity + "\n")
    exec(compile(code, "README.md", "exec"), {})
    out = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "verify", "alice.json", "--codealer-key", codealer.identity],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0 and out.stdout.startswith("OK: co-dealt hand "), out.stdout + out.stderr
    assert "2 cards dealt, 2 key holders, seeds revealed" in out.stdout


def test_a_seats_own_hand_proof_gives_the_same_line_in_fairdeck_verify_and_the_verifier_package(
    table: tuple[CodealerProcess, DealerProcess], tmp_path: Path
) -> None:
    """The README's co-dealt hand end to end: a real co-dealer and dealer, the SDK's per-seat proof
    (format 4, only that seat's cards), and the player's verifier (@fairdeck/verifier, the page's
    code) saying what `fairdeck verify --codealer-key` says."""
    from tests.support import browser

    browser.require(browser.node_missing())
    codealer, dealer = table
    with DealerClient(dealer.target, timeout=30) as client:
        hands = CodealHands(client)
        hand = hands.open_hand("standard")
        alice, bob = SeatKey.generate(), SeatKey.generate()
        to_alice = hands.draw(hand.hand_id, 2, seat_public_key=alice.public_key)
        to_bob = hands.draw(hand.hand_id, 2, seat_public_key=bob.public_key)
        hands.draw(hand.hand_id, 3)
        alice_cards = open_cards(hand, to_alice.sealed_cards, alice, [bytes.fromhex(codealer.identity)])
        releases = [
            *seat_releases(hand, to_alice.sealed_cards, alice),
            *seat_releases(hand, to_bob.sealed_cards, bob),
        ]
        closed = hands.close_hand(hand.hand_id, seat_releases=releases)
    proof = hand_proof(closed, seat_public_key=alice.public_key)
    assert [d.card for d in proof.hand.dealt] == list(alice_cards), "only alice's cards"
    path = tmp_path / "alice.json"
    path.write_text(proof.to_json(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "verify", str(path), "--codealer-key", codealer.identity],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = done.stdout.splitlines()[0]
    said = "(standard, 2 cards dealt, 2 key holders, seeds revealed)"
    assert line == f"OK: co-dealt hand {hand.hand_id} verified {said}"
    script = (
        "import { readFileSync } from 'node:fs'; import { check, verdictLine } from './src/index.js';"
        "const r = check(readFileSync(process.argv[1]), { codealerKey: process.argv[2] });"
        "const out = { line: verdictLine(r), cards: r.hand.dealt, summary: r.codeal.summary };"
        "process.stdout.write(JSON.stringify(out));"
    )
    node = subprocess.run(
        ["node", "--input-type=module", "-e", script, str(path), codealer.identity],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert node.returncode == 0, node.stderr[-2000:]
    got = json.loads(node.stdout)
    assert got["line"] == line
    assert got["cards"] == [d["card"] for d in json.loads(proof.to_json())["codeal"]["dealt"]]
    assert got["summary"].startswith("No single party could have read your cards.")
    with pytest.raises(ValueError):
        hand_proof(closed, seat_public_key=SeatKey.generate().public_key)
