"""ristretto255 (RFC 9496): strict encodings, scalars mod L, hash-to-point, through libsodium only.

Every group and scalar operation is one libsodium call (the ``pysodium`` binding); this module adds
no field or point arithmetic of its own. Points are their canonical 32-byte encodings and scalars
32 bytes little-endian below L, as plain ``bytes``: equal values have equal bytes. ``decode_point``
and ``decode_scalar`` are the only way a value from outside becomes a Point or a Scalar: they
reject non-canonical encodings and, for points, the identity (docs/codealing-spec.md section 2).

>>> expand_message_xmd(b"abc", b"QUUX-V01-CS02-with-expander-SHA512-256", 32).hex()[:16]
'0da749f12fbe5483'
>>> p = hash_to_point(b"abc", b"fairdeck-codeal-v1-card-ristretto255_XMD:SHA-512_R255MAP_RO_")
>>> p.hex()[:16]
'0ce66e08a5cf4056'
>>> mul(scalar(2), p) == add(p, p)
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import NewType

from fairdeck.codeal.errors import CodealError

try:
    import pysodium as _sodium

    if not _sodium.sodium_version_check(1, 0, 18):
        raise ImportError("libsodium is older than 1.0.18")
except (ImportError, OSError, AttributeError, ValueError) as error:  # pragma: no cover - install-time
    raise ImportError(
        f"fairdeck.codeal needs libsodium 1.0.18 or newer ({error}): install it "
        "(Debian/Ubuntu: apt-get install libsodium23; macOS: brew install libsodium)"
    ) from error

Point = NewType("Point", bytes)
"""A canonical ristretto255 encoding (32 bytes)."""
Scalar = NewType("Scalar", bytes)
"""An integer below L, 32 bytes little-endian."""
Random = Callable[[int], bytes]
"""A source of uniformly random bytes (``os.urandom`` in production, a fixed stream in tests)."""

L = 2**252 + 27742317777372353535851937790883648493
"""The prime order of ristretto255."""
POINT_BYTES = 32
SCALAR_BYTES = 32
IDENTITY = Point(bytes(32))
ZERO = Scalar(bytes(32))

_add = _sodium.crypto_core_ristretto255_add
_sub = _sodium.crypto_core_ristretto255_sub
_mul = _sodium.crypto_scalarmult_ristretto255
_mul_base = _sodium.crypto_scalarmult_ristretto255_base
_valid = _sodium.crypto_core_ristretto255_is_valid_point


def scalar(n: int) -> Scalar:
    """The scalar ``n mod L`` of a small public constant (an index, a count)."""
    return Scalar((n % L).to_bytes(32, "little"))


BASE = Point(_mul_base(scalar(1)))
"""The RFC 9496 generator B."""


def decode_point(data: object, what: str) -> Point:
    """``data`` as a Point: exactly 32 bytes, canonical, a group element, not the identity."""
    if not isinstance(data, bytes) or len(data) != POINT_BYTES:
        raise CodealError("encoding", f"{what}: a point is 32 bytes")
    # RFC 9496 Decode rejects an integer of p or more, so bit 255; libsodium 1.0.18 ignores that
    # bit and would let a second encoding of every point (the identity too) through.
    if data[31] & 0x80 or not _valid(data):
        raise CodealError("encoding", f"{what}: not a canonical ristretto255 encoding")
    if data == IDENTITY:
        raise CodealError("encoding", f"{what}: the identity is not allowed here")
    return Point(data)


def decode_scalar(data: object, what: str) -> Scalar:
    """``data`` as a Scalar: exactly 32 bytes, little-endian, below L (zero allowed)."""
    if not isinstance(data, bytes) or len(data) != SCALAR_BYTES:
        raise CodealError("encoding", f"{what}: a scalar is 32 bytes")
    if int.from_bytes(data, "little") >= L:
        raise CodealError("encoding", f"{what}: scalar not reduced below L")
    return Scalar(data)


def add(p: Point, q: Point) -> Point:
    return Point(_add(p, q))


def sub(p: Point, q: Point) -> Point:
    return Point(_sub(p, q))


def mul(s: Scalar, p: Point) -> Point:
    """``s * p``; libsodium refuses a zero product, which here is the identity."""
    if s == ZERO or p == IDENTITY:
        return IDENTITY
    return Point(_mul(s, p))


def mul_base(s: Scalar) -> Point:
    """``s * B``."""
    if s == ZERO:
        return IDENTITY
    return Point(_mul_base(s))


def msm(scalars: Sequence[Scalar], points: Sequence[Point]) -> Point:
    """The sum of ``scalars[i] * points[i]`` (one libsodium multiplication per term)."""
    if len(scalars) != len(points):
        raise ValueError("msm: lengths differ")
    total = IDENTITY
    for s, p in zip(scalars, points, strict=True):
        total = add(total, mul(s, p))
    return total


def s_add(a: Scalar, b: Scalar) -> Scalar:
    return Scalar(_sodium.crypto_core_ristretto255_scalar_add(a, b))


def s_sub(a: Scalar, b: Scalar) -> Scalar:
    return Scalar(_sodium.crypto_core_ristretto255_scalar_sub(a, b))


def s_mul(a: Scalar, b: Scalar) -> Scalar:
    return Scalar(_sodium.crypto_core_ristretto255_scalar_mul(a, b))


def s_neg(a: Scalar) -> Scalar:
    return Scalar(_sodium.crypto_core_ristretto255_scalar_negate(a))


def s_sum(values: Sequence[Scalar]) -> Scalar:
    total = ZERO
    for v in values:
        total = s_add(total, v)
    return total


def reduce_wide(data: bytes) -> Scalar:
    """64 bytes, read little-endian, reduced mod L (RFC 9496 section 4.4, libsodium's reduce)."""
    if len(data) != 64:
        raise ValueError("reduce_wide takes 64 bytes")
    return Scalar(_sodium.crypto_core_ristretto255_scalar_reduce(data))


def random_scalar(random: Random) -> Scalar:
    """A uniform scalar: 64 random bytes reduced mod L (bias below 2^-250)."""
    return reduce_wide(random(64))


def expand_message_xmd(msg: bytes, dst: bytes, length: int) -> bytes:
    """RFC 9380 section 5.3.1 with SHA-512 (b_in_bytes 64, s_in_bytes 128)."""
    if len(dst) > 255 or length > 255 * 64 or length > 65535:
        raise ValueError("expand_message_xmd: DST or length too long")
    ell = -(-length // 64)
    dst_prime = dst + bytes([len(dst)])
    b0 = hashlib.sha512(bytes(128) + msg + length.to_bytes(2, "big") + b"\x00" + dst_prime).digest()
    blocks = [hashlib.sha512(b0 + b"\x01" + dst_prime).digest()]
    for i in range(2, ell + 1):
        mixed = bytes(x ^ y for x, y in zip(b0, blocks[-1], strict=True))
        blocks.append(hashlib.sha512(mixed + bytes([i]) + dst_prime).digest())
    return b"".join(blocks)[:length]


def hash_to_point(msg: bytes, dst: bytes) -> Point:
    """RFC 9380 hash_to_ristretto255: expand_message_xmd(SHA-512) to 64 bytes, then RFC 9496's map."""
    return Point(_sodium.crypto_core_ristretto255_from_hash(expand_message_xmd(msg, dst, 64)))
