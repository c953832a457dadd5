"""Byte encodings shared by the commitment, the derivation and the log.

``lp(x)`` is the spec's length prefix: a 4-byte big-endian length, then ``x``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence


def u32(n: int) -> bytes:
    """``n`` as 4 bytes, big-endian."""
    return n.to_bytes(4, "big")


def u64(n: int) -> bytes:
    """``n`` as 8 bytes, big-endian."""
    return n.to_bytes(8, "big")


def pack_cards(cards: Sequence[int]) -> bytes:
    """Card ids as 2-byte big-endian integers, in order (ids are below 65536)."""
    return struct.pack(f">{len(cards)}H", *cards)


def lp(data: bytes) -> bytes:
    """Length-prefixed bytes: ``u32(len(data)) || data``."""
    return len(data).to_bytes(4, "big") + data
