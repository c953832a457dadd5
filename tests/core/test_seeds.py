"""Seeds and hand ids (spec section 3.1) and the seed sizing rule (section 3.3)."""

from __future__ import annotations

import math
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairdeck import (
    MAX_CLIENT_SEED_BYTES,
    MAX_CLIENT_SEEDS,
    MAX_HAND_ID_LENGTH,
    SPEC_NAMES,
    DeckSpec,
    InvalidInput,
    SeedError,
    normalize_client_seed,
    server_seed_length,
)
from fairdeck.core import seeds as seeds_module
from fairdeck.core.seeds import (
    MAX_CLIENT_SEED_CHARS,
    MAX_CLIENT_SEED_WIRE_BYTES,
    MAX_NFD_EXPANSION,
    check_hand_id,
    check_server_seed,
    new_server_seed,
    normalize_client_seeds,
)
from fairdeck.v1 import dealer_pb2 as pb

# Section 3.1's table: deck -> server seed bytes.
SEED_BYTES = {
    "standard": 45,
    "jokers": 46,
    "short": 34,
    "shoe-1": 45,
    "shoe-2": 85,
    "shoe-3": 131,
    "shoe-4": 180,
    "shoe-5": 231,
    "shoe-6": 284,
    "shoe-7": 339,
    "shoe-8": 395,
}


def test_limits() -> None:
    assert (MAX_CLIENT_SEEDS, MAX_CLIENT_SEED_BYTES, MAX_HAND_ID_LENGTH) == (64, 256, 64)


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_server_seed_length_table(name: str) -> None:
    assert server_seed_length(DeckSpec.parse(name)) == SEED_BYTES[name]


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_server_seed_has_at_least_log2_n_factorial_plus_128_bits(name: str) -> None:
    spec = DeckSpec.parse(name)
    bits = 8 * server_seed_length(spec)
    assert bits >= math.log2(spec.permutations) + 128
    assert bits - 8 < (spec.permutations - 1).bit_length() + 128  # and no byte more than needed


def test_a_32_bit_seed_reaches_only_about_12_cards_worth_of_orders() -> None:
    """The spec's cautionary example (section 3.3)."""
    assert math.factorial(12) <= 2**32 < math.factorial(13)
    assert math.ceil(math.log2(math.factorial(52))) == 226


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_new_server_seed_draws_the_right_length_from_the_entropy_source(name: str) -> None:
    spec = DeckSpec.parse(name)
    asked: list[int] = []

    def entropy(n: int) -> bytes:
        asked.append(n)
        return bytes(n)

    seed = new_server_seed(spec, entropy)
    assert asked == [SEED_BYTES[name]]
    assert len(seed) == SEED_BYTES[name]


def test_new_server_seed_refuses_a_short_entropy_source() -> None:
    with pytest.raises(SeedError, match="entropy source returned 44 bytes, wanted 45"):
        new_server_seed(DeckSpec.parse("standard"), lambda n: bytes(n - 1))


def test_new_server_seed_uses_secrets_by_default() -> None:
    spec = DeckSpec.parse("standard")
    assert new_server_seed(spec) != new_server_seed(spec)


@pytest.mark.parametrize("seed", [bytes(44), bytes(46), b"", bytearray(45), "00" * 45, None])
def test_check_server_seed_rejects_wrong_lengths_and_types(seed: object) -> None:
    with pytest.raises(SeedError, match="must be 45 bytes"):
        check_server_seed(DeckSpec.parse("standard"), seed)  # type: ignore[arg-type]


def test_check_server_seed_accepts_the_exact_length() -> None:
    check_server_seed(DeckSpec.parse("standard"), bytes(45))


# Client seeds


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice", b"alice"),
        ("e\u0301", b"\xc3\xa9"),
        ("\u00e9", b"\xc3\xa9"),
        ("\u212b", "\u00c5".encode()),
        ("\u1100\u1161", "\uac00".encode()),
        ("Cafe\u0301", "Caf\u00e9".encode()),
        ("\U0001f0a1", "\U0001f0a1".encode()),
    ],
)
def test_text_client_seeds_are_nfc_then_utf8(text: str, expected: bytes) -> None:
    assert normalize_client_seed(text) == expected


def test_binary_client_seeds_are_used_as_they_are() -> None:
    raw = b"e\xcc\x81\xff\x00"
    assert normalize_client_seed(raw) == raw


def test_client_seed_length_bounds_apply_to_the_bytes_after_nfc() -> None:
    assert normalize_client_seed("x" * 256) == b"x" * 256
    assert len(normalize_client_seed("\u00e9" * 128)) == 256
    with pytest.raises(SeedError, match=r"1\.\.256 bytes, got 258"):
        normalize_client_seed("\u00e9" * 129)
    # 256 characters, but 512 bytes of UTF-8: too long
    with pytest.raises(SeedError, match="got 512"):
        normalize_client_seed("\u00e9" * 256)
    # 384 characters that NFC composes to 128 two-byte characters: fits
    assert len(normalize_client_seed("e\u0301" * 128)) == 256


@pytest.mark.parametrize("seed", ["", b"", b"x" * 257, "x" * 257])
def test_client_seed_length_out_of_bounds(seed: str | bytes) -> None:
    with pytest.raises(SeedError, match=r"client seed must be 1\.\.256 bytes"):
        normalize_client_seed(seed)


def test_lone_surrogate_is_rejected() -> None:
    with pytest.raises(SeedError, match="lone surrogate"):
        normalize_client_seed("a\ud800")


@pytest.mark.parametrize("seed", [None, 1, bytearray(b"x"), ["x"]])
def test_client_seed_of_wrong_type_is_rejected(seed: object) -> None:
    with pytest.raises(SeedError, match="must be str or bytes"):
        normalize_client_seed(seed)  # type: ignore[arg-type]


def test_client_seeds_keep_their_order_and_duplicates() -> None:
    assert normalize_client_seeds(["b", "a", "b", b"\x00"]) == (b"b", b"a", b"b", b"\x00")
    assert normalize_client_seeds([]) == ()


def test_at_most_64_client_seeds() -> None:
    assert len(normalize_client_seeds(["x"] * 64)) == 64
    with pytest.raises(SeedError, match="at most 64 client seeds, got 65"):
        normalize_client_seeds(["x"] * 65)


def test_the_failing_client_seed_is_named_by_its_position() -> None:
    with pytest.raises(SeedError, match=r"client_seeds\[2\]"):
        normalize_client_seeds(["a", "b", ""])


@given(st.text(min_size=1, max_size=30))
def test_normalization_is_idempotent(text: str) -> None:
    once = normalize_client_seed(text)
    assert normalize_client_seed(once.decode("utf-8")) == once


# Hand ids


@pytest.mark.parametrize("hand_id", ["h1", "a", "Az09._:-", "x" * 64, "table-7:hand.42_x"])
def test_valid_hand_ids(hand_id: str) -> None:
    check_hand_id(hand_id)


@pytest.mark.parametrize(
    "hand_id",
    [
        "",
        "x" * 65,
        "hand 1",
        "hand/1",
        "h\u00e4nd",
        "h\n",
        "h1\n",
        "\uff48",
        "h\u0661",
        "h+1",
        None,
        1,
        b"h1",
    ],
)
def test_invalid_hand_ids(hand_id: object) -> None:
    with pytest.raises(SeedError, match=r"hand id must be 1\.\.64 characters"):
        check_hand_id(hand_id)  # type: ignore[arg-type]


def test_seed_error_is_invalid_input() -> None:
    assert issubclass(SeedError, InvalidInput)


# -- text seeds were NFC-normalised before their size was checked ------------------------------


def test_no_code_point_decomposes_to_more_than_the_bound_the_pre_check_relies_on() -> None:
    # The proof in normalize_client_seed needs D = MAX_NFD_EXPANSION to hold for the running
    # Unicode database; a new Unicode version with a longer decomposition fails here first.
    longest = max(
        len(unicodedata.normalize("NFD", chr(c))) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
    )
    assert longest <= MAX_NFD_EXPANSION
    assert MAX_CLIENT_SEED_CHARS == MAX_CLIENT_SEED_BYTES * MAX_NFD_EXPANSION


def _spec_rule_accepts(text: str) -> bool:
    """The spec's rule, straight from section 3.1: NFC, UTF-8, then 1..256 bytes."""
    try:
        return 1 <= len(unicodedata.normalize("NFC", text).encode("utf-8")) <= MAX_CLIENT_SEED_BYTES
    except UnicodeEncodeError:
        return False


# Pieces that NFC shrinks the most: each decomposed form composes back into one code point.
_SHRINKING = [unicodedata.normalize("NFD", c) for c in ("\u1f82", "\ud4db", "\u01d5", "\u00e9", "\u1e69")] + [
    "a",
    "\u0301",
    "\u1100",
    "\u1161",
    "\u11a8",
    "\U0001d160",
]


@given(st.lists(st.sampled_from(_SHRINKING), min_size=200, max_size=600), st.text(max_size=40))
def test_the_raw_length_pre_check_never_refuses_what_the_spec_accepts(pieces: list[str], tail: str) -> None:
    text = "".join(pieces) + tail
    try:
        normalize_client_seed(text)
        accepted = True
    except SeedError:
        accepted = False
    assert accepted == _spec_rule_accepts(text)
    if len(text) > MAX_CLIENT_SEED_CHARS:
        assert not _spec_rule_accepts(text)


def test_the_pre_check_accepts_the_longest_text_that_composes_to_256_bytes() -> None:
    # 256 code points of 1 byte each after NFC cannot come from more than 256 raw code points of
    # ASCII, but composed forms can: 85 x U+1F82 decomposed is 340 code points, 255 bytes after NFC.
    text = unicodedata.normalize("NFD", "\u1f82") * 85
    assert len(text) == 340 and normalize_client_seed(text) == "\u1f82".encode() * 85


def test_a_huge_text_seed_is_refused_without_being_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    normalize = unicodedata.normalize

    def no_normalising(form: str, text: str) -> str:
        if len(text) > MAX_CLIENT_SEED_CHARS:
            raise AssertionError(f"normalised {len(text)} characters before checking the size")
        return normalize(form, text)  # type: ignore[arg-type]

    monkeypatch.setattr(seeds_module.unicodedata, "normalize", no_normalising)
    for text in ("\u00e9" * (4 * 1024 * 1024), "x" * (MAX_CLIENT_SEED_CHARS + 1)):
        with pytest.raises(SeedError, match=r"client seed must be 1\.\.256 bytes"):
            normalize_client_seed(text)
    with pytest.raises(SeedError, match=r"client_seeds\[1\]: client seed must be 1\.\.256 bytes"):
        normalize_client_seeds(["ok", "e\u0301" * (4 * 1024 * 1024)])


def test_the_wire_size_bound_covers_every_text_the_pre_check_accepts() -> None:
    # The longest text the pre-check lets through, in the widest UTF-8, fits the wire bound.
    widest = "\U0010ffff" * MAX_CLIENT_SEED_CHARS
    seed = pb.ClientSeed(text=widest)
    assert seed.ByteSize() <= MAX_CLIENT_SEED_WIRE_BYTES
    assert pb.ClientSeed(text=widest + "x").ByteSize() > MAX_CLIENT_SEED_WIRE_BYTES
