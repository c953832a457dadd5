"""Rules that hold for every input: derivations, openings, seals, and no corrupted hand accepted."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairdeck.codeal import CodealError, CodealHand, final_order, verify_hand
from fairdeck.codeal.group import scalar
from fairdeck.codeal.seal import SEALED_BYTES, open_sealed_share, seal_share, seat_public_key
from fairdeck.codeal.shuffle import permutation, randomness, shuffler_client_seed
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.seeds import server_seed_length
from tests.support.codeal_hands import rng, table


@cache
def honest_hand() -> CodealHand:
    return table(seed=7).shuffle_all().hand(positions=(0, 1, 35))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(SPEC_NAMES)), st.integers(0, 15), st.randoms(use_true_random=False))
def test_each_holders_permutation_is_the_ordinary_derivation_of_its_seed(
    deck: str, k: int, r: object
) -> None:
    spec = DeckSpec.parse(deck)
    seed = r.randbytes(server_seed_length(spec))  # type: ignore[attr-defined]
    psi = permutation(spec, "h-1", k, seed)
    assert sorted(psi) == list(range(spec.size))
    dealt = derive_deck(deck, "h-1", seed, [shuffler_client_seed(k)])
    assert [spec.card_ids[j] for j in psi] == list(dealt)
    # Another holder with the same seed shuffles differently.
    assert permutation(spec, "h-1", k + 1, seed) != psi


@settings(max_examples=10, deadline=None)
@given(st.integers(2, 3), st.integers(0, 2**32))
def test_every_dealt_card_is_the_one_the_seeds_put_there(holders: int, seed: int) -> None:
    t = table(holders=holders, seed=seed).shuffle_all()
    hand = t.hand(positions=range(36))
    verify_hand(hand)
    psis = [t.witness(k)[0] for k in range(holders)]
    assert [d.card for d in hand.dealt] == list(final_order(t.spec, psis))
    assert sorted(d.card for d in hand.dealt) == sorted(t.spec.card_ids)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_no_single_byte_change_anywhere_in_a_hand_is_accepted(data: st.DataObject) -> None:
    hand = honest_hand()
    field = data.draw(st.sampled_from(["keys", "shuffles", "shares", "seeds"]))
    if field == "shares":
        i = data.draw(st.integers(0, len(hand.dealt) - 1))
        k = data.draw(st.integers(0, 1))
        shares = list(hand.dealt[i].shares)
        shares[k] = _flip(data, shares[k])
        dealt = list(hand.dealt)
        dealt[i] = replace(dealt[i], shares=tuple(shares))
        bad = replace(hand, dealt=tuple(dealt))
    else:
        entries = list(getattr(hand, field))
        i = data.draw(st.integers(0, len(entries) - 1))
        entries[i] = _flip(data, entries[i])
        changes: dict[str, tuple[bytes, ...]] = {field: tuple(entries)}
        bad = replace(hand, **changes)  # type: ignore[arg-type]
    with pytest.raises(CodealError):
        verify_hand(bad)


def _flip(data: st.DataObject, blob: bytes) -> bytes:
    at = data.draw(st.integers(0, len(blob) - 1))
    bit = data.draw(st.integers(0, 7))
    return blob[:at] + bytes([blob[at] ^ (1 << bit)]) + blob[at + 1 :]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 51), st.integers(0, 5), st.binary(min_size=128, max_size=128), st.integers(0, 2**32))
def test_a_sealed_share_opens_only_for_its_seat_position_and_holder(
    p: int, k: int, share: bytes, s: int
) -> None:
    spec, random = DeckSpec.parse("standard"), rng(s)
    seat, other = random(32), random(32)
    sealed = seal_share(spec, "h-1", p, k, share, seat_public_key(seat), random)
    assert len(sealed) == SEALED_BYTES
    assert open_sealed_share(spec, "h-1", p, k, sealed, seat) == share
    for args in [("h-1", p, k, other), ("h-1", p + 1, k, seat), ("h-1", p, k + 1, seat), ("h-2", p, k, seat)]:
        with pytest.raises(CodealError) as caught:
            open_sealed_share(spec, args[0], args[1], args[2], sealed, args[3])
        assert caught.value.step == "seal"


def test_a_low_order_seat_key_is_refused() -> None:
    spec = DeckSpec.parse("standard")
    with pytest.raises(CodealError) as caught:
        seal_share(spec, "h-1", 0, 0, bytes(128), bytes(32), rng(1))
    assert caught.value.step == "seal"


def test_re_encryption_randomness_is_never_zero_and_never_repeats() -> None:
    spec = DeckSpec.parse("standard")
    rs = randomness(spec, "h-1", 0, bytes(45))
    assert scalar(0) not in rs and len(set(rs)) == 52
