"""Every attack on a co-dealt hand that the spec says is caught, caught at the step it names.

Each test plays one dishonest party (a shuffler, a share giver, a dealer, a forger) with the
real prover and signer, so the only thing between the attack and an accepted hand is the check
under test; each was seen to fail with that check disabled. Hands are verified without their
seeds (during the hand) unless the check is the seed step's.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from fairdeck.codeal import CodealError, verify_hand
from fairdeck.codeal.elgamal import Ciphertext, card_point, encrypt
from fairdeck.codeal.group import BASE, Point, add, mul_base, s_add, s_sub, scalar, sub
from fairdeck.codeal.keys import KeyRecord, holder_from, new_holder
from fairdeck.codeal.proof import prove_shuffle, verify_shuffle
from fairdeck.codeal.shares import Share, make_share, verify_share
from fairdeck.codeal.shuffle import shuffle_deck
from tests.support.codeal_hands import Table, rng, table, with_shares


def rejected_at(step: str, hand: object) -> CodealError:
    with pytest.raises(CodealError) as caught:
        verify_hand(hand)  # type: ignore[arg-type]
    assert caught.value.step == step, caught.value
    return caught.value


def test_an_honest_hand_verifies_during_and_after_the_hand() -> None:
    t = table().shuffle_all()
    verify_hand(t.hand(seeds=False))
    verify_hand(t.hand(seeds=True))
    verify_hand(table(holders=3, seed=2).shuffle_all().hand(range(36)))


# A shuffler that duplicates, drops or swaps in a card.


@pytest.mark.parametrize("first", [True, False], ids=["dealer", "co-dealer"])
def test_a_shuffler_that_duplicates_a_card_and_drops_another_is_caught(first: bool) -> None:
    t = table()
    if not first:
        t.shuffle(0)
    k = len(t.records)
    psi, _ = t.witness(k)
    t.shuffle(k, psi=(psi[0], psi[0], *psi[2:]))
    if first:
        t.shuffle(1)
    assert "proof of shuffle fails" in str(rejected_at("shuffle", t.hand(seeds=False)))


@pytest.mark.parametrize("card", [0, 51], ids=["a card not in the deck", "a second ace of spades"])
def test_a_shuffler_that_swaps_in_a_card_is_caught(card: int) -> None:
    t = table()
    psi, rs = t.witness(0)
    honest = shuffle_deck(t.deck, psi, rs, t.ctx.joint_key)
    forged = (encrypt(card_point(card), t.ctx.joint_key, rs[0]), *honest[1:])
    t.shuffle(0, after=forged)
    t.shuffle(1)
    rejected_at("shuffle", t.hand(seeds=False))


def test_a_shuffler_that_drops_a_card_from_the_deck_is_caught() -> None:
    t = table().shuffle_all()
    hand = t.hand(seeds=False)
    short = hand.shuffles[1][:4] + hand.shuffles[1][68:]
    rejected_at("encoding", replace(hand, shuffles=(hand.shuffles[0], short)))


# A shuffler that re-encrypts with zero or reused randomness.


def test_re_encryption_with_zero_randomness_is_caught() -> None:
    t = table()
    t.shuffle(0)
    t.shuffle(1, rs=[scalar(0)] * 36)  # a valid proof: zero is a witness like any other
    assert "no re-encryption" in str(rejected_at("shuffle", t.hand(seeds=False)))


def test_the_first_shuffle_with_zero_randomness_cannot_even_be_encoded() -> None:
    t = table()
    t.shuffle(0, rs=[scalar(0)] * 36)  # every c1 is the identity, which no party may send
    t.shuffle(1)
    assert "identity" in str(rejected_at("encoding", t.hand(seeds=False)))


def test_re_encryption_with_one_randomness_for_all_cards_is_caught() -> None:
    t = table()
    t.shuffle(0, rs=[scalar(7)] * 36)
    t.shuffle(1)
    assert "reused randomness" in str(rejected_at("shuffle", t.hand(seeds=False)))


def test_reused_randomness_in_a_later_shuffle_is_caught_when_the_seeds_are_revealed() -> None:
    t = table()
    t.shuffle(0)
    t.shuffle(1, rs=[scalar(7)] * 36)
    verify_hand(t.hand(seeds=False))  # a holder may leak its own permutation: one honest holder suffices
    assert "re-derive" in str(rejected_at("seed", t.hand(seeds=True)))


# A proof replayed from another hand or another position.


def test_a_shuffle_replayed_from_another_hand_is_caught() -> None:
    spec, r = table().spec, rng(3)
    a = table(hand_id="hand-a")
    # The same holders, the same keys and seeds, in another hand.
    b = Table(spec, "hand-b", [holder_from(spec, "hand-b", h.k, h.x, h.seed, r) for h in a.holders], r)
    assert b.ctx.joint_key == a.ctx.joint_key and b.deck == a.deck
    a.shuffle_all()
    b.records = list(a.records)
    assert "proof of shuffle fails" in str(rejected_at("shuffle", b.hand(seeds=False)))


def test_a_shuffle_proof_replayed_at_another_step_is_caught() -> None:
    t = table(holders=3)
    psi, rs = t.witness(1)
    after = shuffle_deck(t.deck, psi, rs, t.ctx.joint_key)
    proof = prove_shuffle(t.ctx, 1, t.deck, after, psi, rs, t.random)
    verify_shuffle(t.ctx, 1, t.deck, after, proof)
    with pytest.raises(CodealError, match="proof of shuffle fails"):
        verify_shuffle(t.ctx, 2, t.deck, after, proof)


def test_a_share_replayed_at_another_position_is_caught() -> None:
    t = table().shuffle_all()
    e = t.deck[0]
    share = make_share(t.ctx, 0, 0, t.holders[0].x, e, t.random)
    verify_share(t.ctx, 0, 0, e, share)
    with pytest.raises(CodealError, match="DLEQ"):
        verify_share(t.ctx, 5, 0, e, share)
    with pytest.raises(CodealError, match="DLEQ"):
        verify_share(t.ctx, 0, 1, e, share)  # and as another holder's


# A share with a wrong DLEQ proof.


def test_a_share_with_a_tampered_response_is_caught() -> None:
    t = table().shuffle_all()
    hand = t.hand(seeds=False)
    s = Share.decode(hand.dealt[0].shares[1], "share")
    bad = replace(s, z=s_add(s.z, scalar(1))).encode()
    rejected_at("share", with_shares(hand, 0, 1, bad))


def test_a_share_that_would_open_another_card_is_caught() -> None:
    t = table().shuffle_all()
    hand = t.hand(seeds=False)
    s = Share.decode(hand.dealt[0].shares[1], "share")
    # Shift D so that c2 - D0 - D1 becomes another card; the proof is the honest one.
    opened, other = card_point(hand.dealt[0].card), card_point(hand.dealt[1].card)
    bad = replace(s, d=add(s.d, sub(opened, other))).encode()
    rejected_at("share", with_shares(hand, 0, 1, bad))


def test_a_share_from_a_key_that_is_not_the_holders_is_caught() -> None:
    t = table().shuffle_all()
    hand = t.hand(seeds=False)
    wrong = make_share(t.ctx, 0, 1, scalar(12345), t.deck[0], t.random)  # a consistent proof, wrong key
    rejected_at("share", with_shares(hand, 0, 1, wrong.encode()))


# A malleated ciphertext.


def test_a_malleated_ciphertext_in_a_published_deck_is_caught() -> None:
    t = table().shuffle_all()
    hand = t.hand(seeds=False)
    record = bytearray(hand.shuffles[1])
    c2 = Point(bytes(record[4 + 32 : 4 + 64]))
    record[4 + 32 : 4 + 64] = add(c2, BASE)  # c2 + B: the same c1, another plaintext
    rejected_at("shuffle", replace(hand, shuffles=(hand.shuffles[0], bytes(record))))


def test_a_deck_malleated_between_two_shufflers_is_caught() -> None:
    t = table()
    t.shuffle(0)
    deck = list(t.deck)
    deck[3] = Ciphertext(deck[3].c1, add(deck[3].c2, BASE))
    t.records[0] = replace(t.records[0], deck=tuple(deck))  # what holder 1 is handed in transit
    t.shuffle(1)  # holder 1 shuffles it honestly, with a valid proof
    # Holder 0's proof and signature do not cover the malleated deck.
    rejected_at("shuffle", t.hand(positions=(), seeds=False))


# Points outside the group, non-canonical encodings, the identity.

NON_CANONICAL = bytes.fromhex("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
NEGATIVE = bytes.fromhex("0100000000000000000000000000000000000000000000000000000000000000")
NOT_ON_CURVE = bytes.fromhex("26948d35ca62e643e26a83177332e6b6afeb9d08e4268b650f1f5bbd8d81d371")
IDENTITY = bytes(32)
BAD_POINTS = [NON_CANONICAL, NEGATIVE, NOT_ON_CURVE, IDENTITY]
BAD_POINT_IDS = ["non-canonical", "negative", "not-a-point", "identity"]


def poke(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value) :]


@pytest.mark.parametrize("bad", BAD_POINTS, ids=BAD_POINT_IDS)
@pytest.mark.parametrize(
    "where, offset",
    [("key", 0), ("pop", 32), ("deck c1", 4), ("deck c2", 36), ("proof", 4 + 64 * 36), ("share", 0)],
)
def test_a_bad_point_anywhere_is_rejected_as_encoding(bad: bytes, where: str, offset: int) -> None:
    hand = table().shuffle_all().hand(seeds=False)
    if where in ("key", "pop"):
        hand = replace(hand, keys=(poke(hand.keys[0], offset, bad), hand.keys[1]))
    elif where == "share":
        hand = with_shares(hand, 0, 0, poke(hand.dealt[0].shares[0], offset, bad))
    else:
        hand = replace(hand, shuffles=(poke(hand.shuffles[0], offset, bad), hand.shuffles[1]))
    rejected_at("encoding", hand)


def test_a_scalar_not_below_l_is_rejected_as_encoding() -> None:
    hand = table().shuffle_all().hand(seeds=False)
    too_big = (2**256 - 1).to_bytes(32, "little")
    rejected_at("encoding", replace(hand, keys=(poke(hand.keys[0], 64, too_big), hand.keys[1])))
    end = len(hand.shuffles[0])
    record = poke(hand.shuffles[0], end - 32, too_big)
    rejected_at("encoding", replace(hand, shuffles=(record, hand.shuffles[1])))


# A transcript that skips a holder's shuffle.


def test_a_transcript_without_the_co_dealers_shuffle_is_caught() -> None:
    t = table()
    t.shuffle(0)
    assert "one shuffle per holder" in str(rejected_at("transcript", t.hand(seeds=False)))


def test_a_dealer_that_runs_the_co_dealers_shuffle_itself_is_caught() -> None:
    t = table()
    t.shuffle(0)
    psi, rs = t.witness(0)  # the dealer's own choice of permutation and randomness
    t.shuffle(1, psi=psi, rs=[s_add(r, scalar(1)) for r in rs], signer=0)  # a valid proof, its own signature
    assert "not signed by holder 1" in str(rejected_at("shuffle", t.hand(seeds=False)))


def test_a_transcript_with_the_dealers_shuffle_twice_is_caught() -> None:
    t = table()
    t.shuffle(0)
    hand = t.hand(positions=(), seeds=False)
    rejected_at("transcript", replace(hand, shuffles=(hand.shuffles[0], hand.shuffles[0])))


# A rogue key.


def test_a_rogue_key_that_cancels_the_dealers_is_caught() -> None:
    t = table()
    known = scalar(424242)
    rogue_key = sub(mul_base(known), t.holders[0].record.key)  # the joint key would be known * B
    # The rogue holder can prove possession only of the key it knows, not of the one it publishes.
    honest = new_holder(t.spec, t.hand_id, 1, t.random)
    pop_for_known = holder_from(t.spec, t.hand_id, 1, known, honest.seed, t.random).record
    rogue = KeyRecord(rogue_key, pop_for_known.t, pop_for_known.s, pop_for_known.commitment)
    hand = t.shuffle_all().hand(positions=(), seeds=False)
    caught = rejected_at("key", replace(hand, keys=(hand.keys[0], rogue.encode())))
    assert "proof of possession" in str(caught)


def test_a_key_repeated_from_another_holder_is_caught() -> None:
    hand = table().shuffle_all().hand(positions=(), seeds=False)
    rejected_at("key", replace(hand, keys=(hand.keys[0], hand.keys[0])))


def test_keys_that_cancel_out_are_caught() -> None:
    t = table()
    minus = s_sub(scalar(0), t.holders[0].x)  # holder 1 colludes: Y_1 = -Y_0, joint key 0
    t.holders[1] = holder_from(t.spec, t.hand_id, 1, minus, t.holders[1].seed, t.random)
    with pytest.raises(CodealError, match="joint key is the identity") as caught:
        _ = t.ctx
    assert caught.value.step == "key"


def test_a_dealer_that_plays_the_co_dealer_with_its_own_key_is_caught() -> None:
    t = table()
    dealer = t.holders[0]
    t.holders[1] = holder_from(t.spec, t.hand_id, 1, dealer.x, t.holders[1].seed, t.random)
    with pytest.raises(CodealError, match="same key") as caught:
        _ = t.ctx
    assert caught.value.step == "key"


# A position or card that is not an integer: Python's True is 1 and False is 0, so a reader that
# took ``isinstance(p, int)`` verified a position given as ``false`` as position 0 (the JavaScript
# verifier, where a boolean is no number, rejected it: the two gave different lines).


@pytest.mark.parametrize("flag", [False, True])
def test_a_dealt_position_given_as_a_boolean_is_not_read_as_0_or_1(flag: bool) -> None:
    t = table().shuffle_all()
    hand = t.hand((int(flag),), seeds=True)
    verify_hand(hand)
    dealt = replace(hand.dealt[0], position=flag)
    error = rejected_at("transcript", replace(hand, dealt=(dealt,)))
    assert "dealt positions must be distinct and in 0..35" in str(error)


def test_a_dealt_card_given_as_a_boolean_is_not_read_as_card_0_or_1() -> None:
    t = table("standard").shuffle_all()
    hand = t.hand(range(52), seeds=False)
    low = [(i, d) for i, d in enumerate(hand.dealt) if d.card in (0, 1)]
    assert len(low) == 2
    for i, d in low:
        dealt = list(hand.dealt)
        dealt[i] = replace(d, card=bool(d.card))
        rejected_at("open", replace(hand, dealt=tuple(dealt)))


# Bit 255 of a point's encoding. RFC 9496 Decode rejects any string whose integer is p or more, so
# any with bit 255 set; libsodium before 1.0.19 ignores that bit, and so the reference accepted a
# second encoding of every point (the JavaScript verifier refused it): freshness, which compares
# c1 by bytes, could be dodged, and the identity slipped past the check of its one encoding.


def high_bit(point: Point) -> Point:
    return Point(point[:31] + bytes([point[31] | 0x80]))


def test_a_shuffle_that_does_not_re_encrypt_a_card_hidden_by_bit_255_is_caught() -> None:
    t = table()
    t.shuffle(0)
    psi, rs = t.witness(1)
    rs = (scalar(0), *rs[1:])  # position 0 is not re-encrypted ...
    after = list(shuffle_deck(t.deck, psi, rs, t.ctx.joint_key))
    after[0] = Ciphertext(high_bit(after[0].c1), after[0].c2)  # ... and its c1 sent another way
    t.shuffle(1, psi=psi, rs=rs, after=tuple(after))  # the prover hashes the bytes it sends
    error = rejected_at("encoding", t.hand(seeds=False))
    assert "shuffle record 1 deck position 0 c1: not a canonical ristretto255 encoding" in str(error)


def test_the_identity_with_bit_255_set_is_no_key() -> None:
    t = table()
    hand = t.shuffle_all().hand(seeds=False)
    zero_key = high_bit(Point(bytes(32)))
    w = scalar(5)  # with Y = 0 the proof of possession holds for any T = s * B
    record = KeyRecord(zero_key, mul_base(w), w, t.holders[1].record.commitment)
    error = rejected_at("encoding", replace(hand, keys=(hand.keys[0], record.encode())))
    assert "key record 1 Y: not a canonical ristretto255 encoding" in str(error)
