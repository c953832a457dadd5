"""A co-dealt seat played on the player's page releases its hand (docs/codealing-spec.md 9.3): a
real ``fairdeck codealer`` (its default hold, 1800 s) and a real dealer on 127.0.0.1:0 deal two
seats through the SDK; each seat's cards are opened in the page (headless Chromium and Firefox,
window.fairdeck.seat), the player presses "My play is over", and the tokens the game's callback got
close the hand at once: before, the page could not give them and the hand revealed only after the
hold. Missing, other-seat, other-hand and altered tokens are refused SEATS_NOT_RELEASED. The page's
seatReleases gives the reference's line on every fairdeck-codeal-seat-releases-v1 vector."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, open_cards, seat_releases, verify_codeal_hand
from fairdeck.client.exceptions import FailedPrecondition
from fairdeck.core.decks import DeckSpec
from fairdeck.v1 import dealer_pb2 as pb
from tests.support import browser
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker

pytestmark = pytest.mark.xdist_group("test_codeal_page_release")

RELEASE_VECTORS = json.loads((browser.VECTORS / "fairdeck-codeal-seat-releases-v1.json").read_text())
DECK = "short"
HOLD_S = 1800  # the co-dealer's default --reveal-hold


@pytest.fixture(scope="module")
def table(
    tmp_path_factory: pytest.TempPathFactory, serve_forker: ServeForker
) -> Iterator[tuple[CodealerProcess, DealerProcess]]:
    tmp = tmp_path_factory.mktemp("page-release")
    init_codealer(tmp / "cd1")
    with (
        CodealerProcess(tmp / "cd1", forker=serve_forker) as codealer,
        DealerProcess(
            tmp / "data", tmp / "dealer.log", *codealer.dealer_flags(), forker=serve_forker
        ) as dealer,
    ):
        yield codealer, dealer


def seat_job(
    hand: pb.Hand, sealed: tuple[pb.SealedCard, ...], seat: SeatKey, identity: str
) -> dict[str, Any]:
    """What the game's page gets for one seat: the hand's records, its sealed cards, and (here only,
    so the test can draw for it first) the key the seat's device holds."""
    return {
        "deck": hand.deck,
        "hand_id": hand.hand_id,
        "keys": [bytes(r).hex() for r in hand.codeal.key_records],
        "shuffles": [bytes(r).hex() for r in hand.codeal.shuffle_records],
        "identity_keys": [identity],
        "secret": seat.secret.hex(),
        "cards": [
            {
                "position": c.position,
                "shares": [bytes(s).hex() for s in c.shares],
                "seals": [
                    {
                        "holder": s.holder,
                        "seat_public_key": bytes(s.seat_public_key).hex(),
                        "sealed_share_sha256": bytes(s.sealed_share_sha256).hex(),
                        "signature": bytes(s.signature).hex(),
                    }
                    for s in c.seals
                ],
            }
            for c in sealed
        ],
    }


@pytest.fixture(scope="module")
def deal(table: tuple[CodealerProcess, DealerProcess]) -> dict[str, Any]:
    """One hand dealt to alice and bob (and a board), and another hand dealt to alice."""
    codealer, dealer = table
    with DealerClient(dealer.target, timeout=60) as client:
        hands = CodealHands(client)
        hand = hands.open_hand(DECK)
        other = hands.open_hand(DECK)
        alice, bob = SeatKey.generate(), SeatKey.generate()
        to_alice = hands.draw(hand.hand_id, 2, seat_public_key=alice.public_key).sealed_cards
        to_bob = hands.draw(hand.hand_id, 2, seat_public_key=bob.public_key).sealed_cards
        hands.draw(hand.hand_id, 3)  # the board: public, needs no release
        in_other = hands.draw(other.hand_id, 2, seat_public_key=alice.public_key).sealed_cards
    pinned = [bytes.fromhex(codealer.identity)]
    spec = DeckSpec.parse(DECK)
    return {
        "hand": hand,
        "other": other,
        "seats": [(hand, to_alice, alice), (hand, to_bob, bob), (other, in_other, alice)],
        "codes": [
            [spec.card_for_id(i).code for i in open_cards(h, s, k, pinned)]
            for h, s, k in [(hand, to_alice, alice), (hand, to_bob, bob), (other, in_other, alice)]
        ],
        "jobs": [
            seat_job(h, s, k, codealer.identity)
            for h, s, k in [(hand, to_alice, alice), (hand, to_bob, bob), (other, in_other, alice)]
        ],
    }


RUNS: dict[tuple[str, str], dict[str, Any]] = {}
"""The page's run for each (hand, engine): the module's tests share one per engine."""


def run_page(engine: str, deal: dict[str, Any], factory: pytest.TempPathFactory) -> dict[str, Any]:
    browser.require_browser(engine)
    key = (deal["hand"].hand_id, engine)
    if key not in RUNS:
        job = {"page_seats": deal["jobs"], "seat_release_vectors": {"vectors": RELEASE_VECTORS}}
        result = browser.run(job, factory.mktemp(f"page-release-{engine}"), engine=engine, timeout=600)
        RUNS[key] = {
            **result["page_seats"],
            "errors": result["errors"],
            "requests": result["requests"],
            "seat_releases": result["seat_releases"],
        }
    return RUNS[key]


@pytest.fixture(scope="module", params=browser.ENGINES)
def page_run(
    request: pytest.FixtureRequest, deal: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    return run_page(request.param, deal, tmp_path_factory)


def test_the_pages_seat_releases_give_the_python_line_on_every_vector(page_run: dict[str, Any]) -> None:
    assert page_run["seat_releases"] == {c["name"]: c["line"] for c in RELEASE_VECTORS["cases"]}


def test_a_page_seat_releases_only_on_its_players_word_and_never_shows_a_token(
    page_run: dict[str, Any], deal: dict[str, Any]
) -> None:
    """With no card open the button is off and a release is refused; before the press, no token and
    "Not released"; a press whose callback fails says the tokens did not reach the game and leaves
    the button on; after the second press the game's callback got exactly the SDK's seat_releases,
    the section says "Released", its button is off, and no card of the hand is opened any more. No
    token or key (hex, base64 or decimals) in the document, address, storage, console or seat state."""
    assert page_run["errors"] == [] and page_run["requests"] == []
    for seat, (hand, sealed, key), codes in zip(page_run["seats"], deal["seats"], deal["codes"], strict=True):
        assert seat["public_key"] == key.public_key.hex()
        assert seat["cards"] == codes and seat["after"]["shown"] == shown(codes)
        assert seat["fresh"]["disabled"] and seat["fresh"]["status"].startswith("Not released: no card")
        assert seat["early"] == "SeatStateError"  # a release with no card open would bar every card
        assert not seat["before"]["given"] and not seat["before"]["disabled"]
        assert seat["before"]["status"].startswith("Not released")
        # The game's onrelease failed: the page does not say the hand can be closed, and lets retry.
        assert not seat["failed"]["given"] and not seat["failed"]["disabled"]
        assert seat["failed"]["status"].startswith(
            "Released on this page, but the 2 release tokens did not reach the game"
        )
        assert seat["after"]["status"].startswith(
            "Released: your play is over. 2 release tokens went to the game"
        )
        assert seat["after"]["disabled"] and seat["after_release"] == "SeatStateError"
        assert seat["tokens"] == [t.hex() for t in seat_releases(hand, sealed, key)]
    assert page_run["no_game"]["status"].startswith(
        "Released on this page, but the 2 release tokens did not reach the game"
    )
    assert not page_run["no_game"]["disabled"]  # the player can send them again
    sending, failed, resending, sent = page_run["later"]  # an onrelease that returns a promise
    assert sending["disabled"] and sending["status"].startswith("Released: your play is over. Sending 2")
    assert not failed["disabled"] and failed["status"] == page_run["no_game"]["status"]
    assert resending["disabled"] and resending["status"] == sending["status"]
    assert sent["disabled"] and sent["status"].startswith(
        "Released: your play is over. 2 release tokens went to the game"
    )
    assert page_run["leaks"] == [] and page_run["logged"] == []


def shown(codes: list[str]) -> str:
    """The cards as the page draws them: rank (10 for T) and suit glyph."""
    suits = {"c": "\u2663", "d": "\u2666", "h": "\u2665", "s": "\u2660"}
    return "".join(c[0].replace("T", "10") + suits[c[1]] for c in codes)


def refused(hands: CodealHands, hand_id: str, tokens: list[bytes]) -> None:
    with pytest.raises(FailedPrecondition) as e:
        hands.close_hand(hand_id, seat_releases=tokens)
    assert (e.value.reason, e.value.field) == ("SEATS_NOT_RELEASED", "seat_releases")


def test_page_seats_tokens_close_the_hand_at_once_and_wrong_ones_are_refused(
    table: tuple[CodealerProcess, DealerProcess],
    deal: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Under the co-dealer's 1800 s hold: alice's page tokens alone, alice's twice (as if for bob),
    alice's of the other hand in place of hers, or bob's each with a bit flipped are refused and the hand
    stays open; both seats' page tokens close it at once, both seeds revealed, and it verifies."""
    codealer, dealer = table
    page = run_page("chromium", deal, tmp_path_factory)  # Firefox's tokens are the same bytes (above)
    alice, bob, alice_other = ([bytes.fromhex(t) for t in s["tokens"]] for s in page["seats"])
    flipped = [bytes([t[0] ^ 1]) + t[1:] for t in bob]  # one valid token per seat is enough: alter all
    hand_id = deal["hand"].hand_id
    started = time.monotonic()
    with DealerClient(dealer.target, timeout=60) as client:
        hands = CodealHands(client)
        for tokens in ([], alice, [*alice, *alice], [*alice_other, *bob], [*alice, *flipped]):
            refused(hands, hand_id, tokens)
        assert hands.get_hand(hand_id).state == pb.HAND_STATE_SHUFFLED
        closed = hands.close_hand(hand_id, seat_releases=[*alice, *bob])
        refused(hands, deal["other"].hand_id, alice)  # the other hand: its release is not this one's
    assert time.monotonic() - started < HOLD_S / 10
    assert closed.state == pb.HAND_STATE_CLOSED and len(closed.codeal.seeds) == 2
    verify_codeal_hand(closed, [bytes.fromhex(codealer.identity)])
