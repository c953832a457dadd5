"""The co-dealer's rules on the seat keys it seals to (docs/codealing-spec.md 9.1), and the honest
dealer's check of what the co-dealer signed (9.2), in process over real SQLite files: one key for
two seats of one call is refused, low-order keys are refused before a position is recorded, and a
seat key changed on the way to the co-dealer (the link is plain text) is caught by the dealer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from fairdeck.client.codeal_seat import SeatKey
from fairdeck.codeal.entries import SETUP, SHUFFLE
from fairdeck.wire import Reason
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.refusals import DealerError
from tests.support.codeal_pool import InProcessLink, log_of, make_dealer, seat_tokens
from tests.support.forked_serve import ServeForker

P = 2**255 - 19
LOW_ORDER = {
    "all zero": bytes(32),
    "u = 1 (order 4)": (1).to_bytes(32, "little"),
    "u = p - 1 (order 2)": (P - 1).to_bytes(32, "little"),
}


def refused(work: object) -> DealerError:
    async def run() -> DealerError:
        with pytest.raises(DealerError) as e:
            await work  # type: ignore[misc]
        return e.value

    return asyncio.run(run())


def test_one_seat_key_for_two_seats_of_one_call_is_refused_by_the_codealer_and_the_dealer(
    tmp_path: Path,
) -> None:
    """Two seats of one multi-seat call sharing a key would let whoever holds it open both seats'
    cards under statements that each name "the seat's own key". Before, both sides sealed them."""
    dealer = make_dealer(tmp_path)
    key = SeatKey.generate().public_key
    row = asyncio.run(dealer.open_hand("t1", "short"))
    codealer = dealer.link.codealer  # type: ignore[attr-defined]
    with pytest.raises(DealerError) as by_codealer:
        codealer.share(row.hand_id, 0, b"", [], 2, [key, SeatKey.generate().public_key, key])
    assert (by_codealer.value.reason, by_codealer.value.field) == (
        Reason.INVALID_SEAT_KEY,
        "seat_public_keys",
    )
    assert codealer.ledger.shares(row.hand_id) == {}  # nothing recorded
    by_dealer = refused(dealer.draw("t1", row.hand_id, 1, b"", [key, key]))
    assert (by_dealer.reason, by_dealer.field) == (Reason.INVALID_SEAT_KEY, "seat_public_keys")
    assert codealer.ledger.shares(row.hand_id) == {}


@pytest.mark.parametrize("name", LOW_ORDER)
def test_a_low_order_seat_key_is_refused_before_the_position_is_recorded(tmp_path: Path, name: str) -> None:
    dealer = make_dealer(tmp_path)
    row = asyncio.run(dealer.open_hand("t1", "short"))
    codealer = dealer.link.codealer  # type: ignore[attr-defined]
    with pytest.raises(DealerError) as e:
        codealer.share(row.hand_id, 0, LOW_ORDER[name], [], 1)
    assert e.value.reason == Reason.INVALID_SEAT_KEY and "low-order" in str(e.value)
    assert codealer.ledger.shares(row.hand_id) == {}
    good = SeatKey.generate().public_key
    given = codealer.share(row.hand_id, 0, good, [], 1)  # position 0 is still free for the seat
    assert len(given.sealed) == len(given.seal_signatures) == 1


class KeySwappingLink(InProcessLink):
    """A link on which someone changes the seat key on its way to the co-dealer."""

    def __init__(self, inner: InProcessLink, key: bytes) -> None:
        super().__init__(inner.codealer)
        self.key = key

    async def share(
        self, hand_id: str, position: int, seat_key: bytes, count: int, seats: Sequence[bytes] = ()
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        return await super().share(hand_id, position, self.key if seat_key else seat_key, count, seats)


def test_the_dealer_refuses_a_seal_statement_that_does_not_name_the_seat_key_it_asked_for(
    tmp_path: Path,
) -> None:
    dealer: CodealDealer = make_dealer(tmp_path)
    row = asyncio.run(dealer.open_hand("t1", "short"))
    dealer.link = KeySwappingLink(dealer.link, SeatKey.generate().public_key)  # type: ignore[arg-type]
    e = refused(dealer.draw("t1", row.hand_id, 2, SeatKey.generate().public_key))
    assert e.reason == Reason.CODEALER_INVALID
    assert str(e) == (
        "the co-dealer's seal statement does not verify: seal: position 0: co-dealer 1's seal statement "
        "does not verify under its pinned identity key"
    )


def test_a_close_whose_seal_statement_does_not_verify_fails_and_logs_nothing(tmp_path: Path) -> None:
    """The co-dealer's RevealSeed answer carries its seal statements; one that does not verify under
    the pinned identity key fails the close (CODEALER_INVALID, naming the position) before anything
    of the close is stored or logged: the log never holds a statement the dealer did not check."""
    dealer = make_dealer(tmp_path)
    row = asyncio.run(dealer.open_hand("t1", "short"))
    seat = SeatKey.generate()
    draw = asyncio.run(dealer.draw("t1", row.hand_id, 2, seat.public_key))
    codealer = dealer.link.codealer  # type: ignore[attr-defined]
    codealer.ledger.transaction(
        lambda db: db.execute(
            "UPDATE seals SET signature = ? WHERE hand_id = ? AND position = 1", (bytes(64), row.hand_id)
        )
    )
    e = refused(dealer.close("t1", row.hand_id, releases=seat_tokens(row.hand_id, "short", draw, seat)))
    assert e.reason == Reason.CODEALER_INVALID
    assert str(e) == (
        "the co-dealer's seal statements do not verify: position 1: the statement does not verify under "
        "the pinned identity key"
    )
    assert [entry[4] for entry in log_of(tmp_path)] == [SETUP, SHUFFLE, SHUFFLE]
    assert dealer.store.get(row.hand_id).closed_ms is None  # type: ignore[union-attr]


def test_a_ledger_made_before_the_seals_table_gets_it_when_opened_to_serve(tmp_path: Path) -> None:
    """A co-dealer upgraded in place opens its ledger with ``create=False``; the seals table is
    added, the positions it gave before keep their seat, and a retry of one is sealed and signed."""
    dealer = make_dealer(tmp_path)
    row = asyncio.run(dealer.open_hand("t1", "short"))
    codealer = dealer.link.codealer  # type: ignore[attr-defined]
    seat = SeatKey.generate().public_key
    codealer.share(row.hand_id, 0, seat, [], 1)
    codealer.ledger.transaction(lambda db: db.execute("DROP TABLE seals"))  # as the old schema
    codealer.ledger.close()
    codealer.ledger = Ledger(tmp_path / "codealer.db", create=False)
    assert codealer.ledger.seals(row.hand_id) == {}
    given = codealer.share(row.hand_id, 0, seat, [], 1)
    assert codealer.ledger.seals(row.hand_id)[0] == (seat, given.sealed[0], given.seal_signatures[0])
    with pytest.raises(DealerError) as e:
        codealer.share(row.hand_id, 0, SeatKey.generate().public_key, [], 1)
    assert e.value.reason == Reason.SHARE_GIVEN_TO_ANOTHER_SEAT


def test_a_low_order_seat_key_at_the_dealer_was_the_codealers_refusal_relayed_not_a_bad_argument(
    tmp_path: Path,
    serve_forker: ServeForker,
) -> None:
    """Through the real processes a low-order seat key came back FAILED_PRECONDITION
    CODEALER_REFUSED (the co-dealer's refusal, relayed after a round trip): a bad argument of the
    caller's must be INVALID_ARGUMENT INVALID_SEAT_KEY naming its field, found by the dealer."""
    import grpc

    from fairdeck.client.exceptions import from_rpc_error
    from fairdeck.v1 import dealer_pb2, dealer_pb2_grpc
    from tests.support.codealers import CodealerProcess, init_codealer
    from tests.support.dealers import DealerProcess

    init_codealer(tmp_path / "cd1")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        dealer = DealerProcess(
            tmp_path / "data", tmp_path / "dealer.log", *codealer.dealer_flags(), forker=serve_forker
        )
        with dealer, grpc.insecure_channel(dealer.target) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            open_request = dealer_pb2.OpenHandRequest(deck="standard", mode=dealer_pb2.DEAL_MODE_CODEALT)
            hand_id = stub.OpenHand(open_request, timeout=60).hand.hand_id
            for key in LOW_ORDER.values():
                for field, request in (
                    (
                        "seat_public_key",
                        dealer_pb2.DrawCardsRequest(hand_id=hand_id, count=1, seat_public_key=key),
                    ),
                    (
                        "seat_public_keys",
                        dealer_pb2.DrawCardsRequest(
                            hand_id=hand_id, count=1, seat_public_keys=[SeatKey.generate().public_key, key]
                        ),
                    ),
                ):
                    with pytest.raises(grpc.RpcError) as e:
                        stub.DrawCards(request, timeout=60)
                    error = from_rpc_error(e.value)
                    assert (error.code.name, error.reason) == ("INVALID_ARGUMENT", "INVALID_SEAT_KEY"), error
                    assert str(e.value.details()).startswith(f"{field}: a low-order X25519 key"), e.value


def spellings(key: bytes) -> dict[str, bytes]:
    """Other byte strings X25519 reads as ``key`` (RFC 7748 masks the top bit and reduces u)."""
    u = int.from_bytes(key, "little")
    out = {"top bit set": (u | 1 << 255).to_bytes(32, "little")}
    if u < 2**255 - P:
        out["u + p"] = (u + P).to_bytes(32, "little")
    return out


def test_another_spelling_of_a_seat_key_was_taken_as_another_seat(tmp_path: Path) -> None:
    """A seat key with its top bit set (or u >= p) is the same X25519 key as the canonical one, so
    one request could deal two "seats" to one device past rule 3, and a seal statement named bytes
    the device does not hold as its key. Both the co-dealer and the dealer refuse it now."""
    dealer = make_dealer(tmp_path)
    row = asyncio.run(dealer.open_hand("t1", "short"))
    codealer = dealer.link.codealer  # type: ignore[attr-defined]
    seat = SeatKey.generate().public_key
    for name, other in {
        **spellings(seat),
        **spellings(bytes([9]) + bytes(31)),
        "all ff": b"\xff" * 32,
    }.items():
        with pytest.raises(DealerError) as e:
            codealer.share(row.hand_id, 0, b"", [], 1, [seat, other])
        assert e.value.reason == Reason.INVALID_SEAT_KEY and "non-canonical" in str(e.value), name
        by_dealer = refused(dealer.draw("t1", row.hand_id, 1, other))
        assert (by_dealer.reason, by_dealer.field) == (Reason.INVALID_SEAT_KEY, "seat_public_key"), name
        assert "non-canonical" in str(by_dealer), name
    assert codealer.ledger.shares(row.hand_id) == {}


def test_seat_keys_are_checked_only_once_the_deck_bounds_their_number(tmp_path: Path) -> None:
    """Each seat key costs an X25519 exchange to check: a request of thousands of keys (a 512 KiB
    request holds 15,000) is refused on its size first, before any key is checked."""
    dealer = make_dealer(tmp_path)
    row = asyncio.run(dealer.open_hand("t1", "short"))
    keys = [SeatKey.generate().public_key for _ in range(40)] + [LOW_ORDER["all zero"]]
    e = refused(dealer.draw("t1", row.hand_id, 1, b"", keys))
    assert e.reason == Reason.NOT_ENOUGH_CARDS, e
