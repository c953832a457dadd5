"""The commitment (spec section 2) and its separation from the derivation (sections 3.2, 8.2)."""

from __future__ import annotations

import hashlib

import pytest

import fairdeck.core.commitment
import fairdeck.core.derivation
from fairdeck import UnknownVersion, commit, derive_deck, open_local, reveal_local, server_seed_length
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp, u32, u64

SEED = bytes(range(45))


def reference_commit(version: str, deck: str, hand_id: str, seed: bytes) -> bytes:
    data = lp(f"{version} commit".encode()) + lp(deck.encode()) + lp(hand_id.encode()) + lp(seed)
    return hashlib.sha256(data).digest()


def test_commitment_bytes_are_exactly_the_spec() -> None:
    assert commit("standard", "h1", SEED) == reference_commit("fairdeck-v1", "standard", "h1", SEED)
    assert lp(b"fairdeck-v1 commit").hex() == "00000012666169726465636b2d763120636f6d6d6974"


def test_known_commitment_of_the_zero_seed() -> None:
    assert commit("standard", "h1", bytes(45)).hex() == (
        hashlib.sha256(
            bytes.fromhex("00000012666169726465636b2d763120636f6d6d6974")
            + bytes.fromhex("000000087374616e64617264")
            + bytes.fromhex("000000026831")
            + bytes.fromhex("0000002d")
            + bytes(45)
        ).hexdigest()
    )
    assert commit("standard", "h1", bytes(45)).hex().startswith("99ae2133721d9112")


def test_commitment_is_32_bytes() -> None:
    assert len(commit("shoe-8", "h", bytes(395))) == 32


def test_commitment_differs_across_deck_hand_id_seed_and_version() -> None:
    base = commit("standard", "h1", SEED)
    flipped = bytes([SEED[0] ^ 1]) + SEED[1:]
    others = {
        "deck": commit("shoe-1", "h1", SEED),  # same ids, same seed length, different spec name
        "hand id": commit("standard", "h2", SEED),
        "seed": commit("standard", "h1", flipped),
        "version": reference_commit("fairdeck-v2", "standard", "h1", SEED),
    }
    for what, other in others.items():
        assert other != base, what
    assert len({base, *others.values()}) == 5


def test_length_prefixes_keep_fields_apart() -> None:
    """Moving a byte from the hand id into the seed changes the commitment."""
    assert commit("standard", "ab", b"c" + SEED[1:]) != commit("standard", "abc", SEED[1:])


def test_unknown_version_is_refused() -> None:
    with pytest.raises(UnknownVersion, match="unknown algorithm version 'fairdeck-v2'"):
        commit("standard", "h1", SEED, version="fairdeck-v2")


def test_commitment_does_not_cover_the_client_seeds() -> None:
    sealed = open_local("standard", "h1", entropy=lambda n: SEED[:n])
    a, b = reveal_local(sealed, ["alice"]), reveal_local(sealed, ["bob"])
    assert a.commitment == b.commitment == commit("standard", "h1", SEED)
    assert a.cards != b.cards


def test_commit_and_stream_domain_tags_differ() -> None:
    plan = fairdeck.core.derivation.plan("fairdeck-v1", "standard")
    assert plan.stream_prefix == lp(b"fairdeck-v1 stream")
    assert plan.stream_prefix != lp(b"fairdeck-v1 commit")


# Regression tests: the deck comes from the seed, never from the published commitment.


def _recording_shake(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    inputs: list[bytes] = []
    real = hashlib.shake_256

    def spy(data: bytes = b"") -> object:
        inputs.append(bytes(data))
        return real(data)

    monkeypatch.setattr(fairdeck.core.derivation, "_shake", spy)
    return inputs


def test_deck_is_not_derived_from_published_commitment(monkeypatch: pytest.MonkeyPatch) -> None:
    deck, hand_id, clients = "standard", "h1", [b"alice"]
    commitment = commit(deck, hand_id, SEED)
    expected = derive_deck(deck, hand_id, SEED, clients)

    inputs = _recording_shake(monkeypatch)
    # Were the derivation to go through the commitment, breaking the commitment hash would change it.
    monkeypatch.setattr(fairdeck.core.commitment, "_sha256", lambda data=b"": hashlib.sha256(b"broken"))
    assert commit(deck, hand_id, SEED) != commitment  # the patch bites
    assert derive_deck(deck, hand_id, SEED, clients) == expected
    assert inputs
    for data in inputs:
        assert commitment not in data
        assert lp(SEED) in data


def test_deck_is_not_a_function_of_the_commitment() -> None:
    """Same commitment, different client seeds: different decks."""
    decks = {derive_deck("standard", "h1", SEED, [seed]) for seed in ("a", "b", "c", "d")}
    assert len(decks) == 4


def test_substituting_the_commitment_for_the_seed_gives_another_deck() -> None:
    commitment = commit("short", "h1", bytes(34))
    padded = commitment + bytes(server_seed_length(DeckSpec.parse("short")) - len(commitment))
    assert derive_deck("short", "h1", padded) != derive_deck("short", "h1", bytes(34))


@pytest.mark.parametrize("deck", ["standard", "shoe-8"])
def test_counter_precedes_the_seed_in_every_stream_block(deck: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec section 3.3: each block is SHAKE-256(lp(tag) || u64(b) || M) and absorbs the whole seed."""
    seed = bytes(server_seed_length(DeckSpec.parse(deck)))
    message = lp(deck.encode()) + lp(b"h1") + lp(seed) + u32(1) + lp(b"alice")
    inputs = _recording_shake(monkeypatch)
    derive_deck(deck, "h1", seed, ["alice"])
    tag = lp(b"fairdeck-v1 stream")
    blocks = [tag + u64(b) + message for b in range(len(inputs))]
    if deck == "shoe-8":
        assert len(inputs) >= 6  # one attempt of 379 bytes needs 6 or 7 blocks
    assert inputs == blocks
