"""The proof of shuffle on its own, for every size, permutation and randomness (spec section 7)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.codeal import CodealError
from fairdeck.codeal.elgamal import Deck, card_point, encrypt
from fairdeck.codeal.group import Scalar, reduce_wide
from fairdeck.codeal.keys import HolderSecrets
from fairdeck.codeal.proof import ShuffleProof, proof_bytes, prove_shuffle, verify_shuffle
from fairdeck.codeal.shuffle import shuffle_deck
from tests.support.codeal_hands import rng, table

CTX = table(seed=11).ctx


def deck(n: int, seed: int) -> Deck:
    r = rng(seed)
    return tuple(encrypt(card_point(c), CTX.joint_key, reduce_wide(r(64))) for c in range(n))


scalars = st.binary(min_size=64, max_size=64).map(reduce_wide)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(2, 12).flatmap(
        lambda n: st.tuples(st.permutations(range(n)), st.lists(scalars, min_size=n, max_size=n))
    )
)
def test_an_honest_shuffle_of_any_size_verifies(case: tuple[list[int], list[Scalar]]) -> None:
    psi, rs = case
    before = deck(len(psi), 1)
    after = shuffle_deck(before, psi, rs, CTX.joint_key)
    proof = prove_shuffle(CTX, 0, before, after, psi, rs, rng(2))
    assert len(proof.encode()) == proof_bytes(len(psi))
    assert ShuffleProof.decode(proof.encode(), len(psi), 0) == proof
    verify_shuffle(CTX, 0, before, after, proof)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(2, 12).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, n - 1), min_size=n, max_size=n), st.lists(scalars, min_size=n, max_size=n)
        )
    )
)
def test_a_map_that_is_not_a_permutation_never_verifies(case: tuple[list[int], list[Scalar]]) -> None:
    psi, rs = case
    if sorted(psi) == list(range(len(psi))):
        return
    before = deck(len(psi), 3)
    after = shuffle_deck(before, psi, rs, CTX.joint_key)
    proof = prove_shuffle(CTX, 0, before, after, psi, rs, rng(4))
    with pytest.raises(CodealError) as caught:
        verify_shuffle(CTX, 0, before, after, proof)
    assert caught.value.step == "shuffle"


@settings(max_examples=20, deadline=None)
@given(
    st.integers(2, 10).flatmap(
        lambda n: st.tuples(st.permutations(range(n)), st.integers(0, n - 1), st.integers(52, 53))
    )
)
def test_a_card_swapped_in_never_verifies(case: tuple[list[int], int, int]) -> None:
    psi, at, card = case
    rs = [reduce_wide(rng(i)(64)) for i in range(len(psi))]
    before = deck(len(psi), 5)
    after = list(shuffle_deck(before, psi, rs, CTX.joint_key))
    after[at] = encrypt(card_point(card), CTX.joint_key, rs[at])
    proof = prove_shuffle(CTX, 0, before, tuple(after), psi, rs, rng(6))
    with pytest.raises(CodealError):
        verify_shuffle(CTX, 0, before, tuple(after), proof)


def test_secrets_never_show_in_a_holders_repr() -> None:
    holder: HolderSecrets = table(seed=12).holders[0]
    text = repr(holder)
    assert holder.seed.hex() not in text and holder.x.hex() not in text and repr(holder.seed) not in text
