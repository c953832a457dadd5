"""The group layer: RFC 9380 / RFC 9496 vectors, strict decoding of points and scalars."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairdeck.codeal import group
from fairdeck.codeal.errors import CodealError

QUUX = b"QUUX-V01-CS02-with-expander-SHA512-256"

# RFC 9380 appendix K.3, expand_message_xmd(SHA-512).
XMD = [
    (b"", 0x20, "6b9a7312411d92f921c6f68ca0b6380730a1a4d982c507211a90964c394179ba"),
    (b"abc", 0x20, "0da749f12fbe5483eb066a5f595055679b976e93abe9be6f0f6318bce7aca8dc"),
    (
        b"",
        0x80,
        "41b037d1734a5f8df225dd8c7de38f851efdb45c372887be655212d07251b921b052b62eaed99b46f72f2ef4cc96bfaf"
        "254ebbbec091e1a3b9e4fb5e5b619d2e0c5414800a1d882b62bb5cd1778f098b8eb6cb399d5d9d18f5d5842cf5d13d7e"
        "b00a7cff859b605da678b318bd0e65ebff70bec88c753b159a805d2c89c55961",
    ),
]


@pytest.mark.parametrize("msg, length, expected", XMD)
def test_expand_message_xmd_matches_rfc_9380(msg: bytes, length: int, expected: str) -> None:
    assert group.expand_message_xmd(msg, QUUX, length).hex() == expected


def test_the_one_way_map_matches_rfc_9496_a3() -> None:
    uniform = bytes.fromhex(
        "5d1be09e3d0c82fc538112490e35701979d99e06ca3e2b5b54bffe8b4dc772c1"
        "4d98b696a1bbfb5ca32c436cc61c16563790306c79eaca7705668b47dffe5bb6"
    )
    import pysodium

    assert pysodium.crypto_core_ristretto255_from_hash(uniform).hex() == (
        "3066f82a1a747d45120d1740f14358531a8f04bbffe6a819f86dfe50f44a0a46"
    )


def test_the_base_point_is_rfc_9496s() -> None:
    assert group.BASE.hex() == "e2f2ae0a6abc4e71a884a961c500515f58e30b6aa582dd8db6a65945e08d2d76"


# RFC 9496 appendix A.2: encodings that MUST be rejected (non-canonical field elements,
# negative s, and strings that decode to no point).
BAD_ENCODINGS = [
    "00ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "f3ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "01ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "26948d35ca62e643e26a83177332e6b6afeb9d08e4268b650f1f5bbd8d81d371",
    "f87055be5d3f69fba08aeb8ee5df8c82bd4ca4e6c7d89eb8d22fc9a8bc3d6b3e",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
]


@pytest.mark.parametrize("hexed", BAD_ENCODINGS)
def test_non_canonical_and_invalid_encodings_are_rejected(hexed: str) -> None:
    with pytest.raises(CodealError) as caught:
        group.decode_point(bytes.fromhex(hexed), "point")
    assert caught.value.step == "encoding"


def test_the_identity_is_rejected() -> None:
    with pytest.raises(CodealError, match="identity"):
        group.decode_point(bytes(32), "point")


@pytest.mark.parametrize("data", [b"", bytes(31), bytes(33), "00" * 32, None])
def test_wrong_lengths_and_types_are_rejected(data: object) -> None:
    with pytest.raises(CodealError):
        group.decode_point(data, "point")
    with pytest.raises(CodealError):
        group.decode_scalar(data, "scalar")


@given(st.integers(min_value=group.L, max_value=2**256 - 1))
def test_a_scalar_not_below_l_is_rejected(value: int) -> None:
    with pytest.raises(CodealError, match="not reduced"):
        group.decode_scalar(value.to_bytes(32, "little"), "scalar")


@given(st.integers(min_value=0, max_value=group.L - 1))
def test_every_scalar_below_l_decodes(value: int) -> None:
    assert group.decode_scalar(value.to_bytes(32, "little"), "s") == value.to_bytes(32, "little")


@given(st.integers(min_value=1, max_value=group.L - 1), st.integers(min_value=1, max_value=group.L - 1))
def test_scalar_multiplication_is_consistent(a: int, b: int) -> None:
    sa, sb = group.scalar(a), group.scalar(b)
    assert group.mul(sa, group.mul_base(sb)) == group.mul_base(group.s_mul(sa, sb))
    assert group.add(group.mul_base(sa), group.mul_base(sb)) == group.mul_base(group.s_add(sa, sb))
    assert group.decode_point(group.mul_base(sa), "p") == group.mul_base(sa)


def test_zero_and_the_identity_multiply_to_the_identity() -> None:
    assert group.mul(group.ZERO, group.BASE) == group.IDENTITY
    assert group.mul(group.scalar(5), group.IDENTITY) == group.IDENTITY
    assert group.mul_base(group.ZERO) == group.IDENTITY
    assert group.mul_base(group.scalar(group.L)) == group.IDENTITY


@pytest.mark.parametrize(
    "point", [group.BASE, group.hash_to_point(b"x", b"dst"), bytes(32)], ids=["B", "hashed", "identity"]
)
def test_a_point_with_bit_255_set_is_not_canonical(point: bytes) -> None:
    """RFC 9496 Decode: the integer of the 32 bytes must be below p, so bit 255 is never set
    (libsodium 1.0.18's own check misses it; a second encoding of every point got through)."""
    with pytest.raises(CodealError) as caught:
        group.decode_point(point[:31] + bytes([point[31] | 0x80]), "P")
    assert str(caught.value).endswith("P: not a canonical ristretto255 encoding")
