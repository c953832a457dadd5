"""Requests from the message descriptors alone, and bodies that are not valid
messages at all.

``message(descriptor)`` follows the descriptor, so a field added to a request
is fuzzed without touching this file: integers of every protobuf type at
their edges, strings (unicode, NUL, long) that are never surrogates (a str
with one cannot be encoded), bytes past every field limit, repeated fields of
any length, oneofs with one member or none, enums with values they do not
name, nested messages. ``raw`` makes bytes: random ones, fields encoded by
hand with any number and wire type, and earlier bodies cut or corrupted.
``oversized`` grows a body past the message limit. Hypothesis draws are the
budget (0.1 to 0.3 ms each): all of these make their choices from a ``Genome``,
a stream seeded by one draw, so a whole batch of bodies costs one.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import struct
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

MAX_MESSAGE_BYTES = 512 * 1024  # the largest request the dealer reads (its max_request_bytes)
LONG_SIZES = (65, 257, 300, 1025, 4097, 65_537)
"""Lengths of long values: past every field limit of the API, well inside the message limit."""
OVERSIZE = (MAX_MESSAGE_BYTES - 64, MAX_MESSAGE_BYTES + 1, MAX_MESSAGE_BYTES + 4096)
"""Field lengths that take a whole body to around the message limit."""
LONG_LISTS = (63, 64, 65, 257, 1001)
LONG_LIST_BYTES = 256 * 1024

_F = FieldDescriptor
_INT_RANGES = {
    _F.TYPE_INT32: (-(2**31), 2**31 - 1),
    _F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    _F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    _F.TYPE_ENUM: (-(2**31), 2**31 - 1),
    _F.TYPE_INT64: (-(2**63), 2**63 - 1),
    _F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    _F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    _F.TYPE_UINT32: (0, 2**32 - 1),
    _F.TYPE_FIXED32: (0, 2**32 - 1),
    _F.TYPE_UINT64: (0, 2**64 - 1),
    _F.TYPE_FIXED64: (0, 2**64 - 1),
}

ODD_TEXT = (
    "",
    "\x00",
    "standard\x00",
    "\x00standard",
    " ",
    "\n",
    "\t\r\n",
    "\u200b",  # zero-width space
    "\u202e",  # right-to-left override
    "\ufeff",  # byte-order mark
    "\uffff",
    "\U0010ffff",
    "e\u0301",  # NFD é
    "\u00e9",
    "\u2126",  # ohm sign: NFC turns it into omega
    "\U0001f0a1",  # playing card ace of spades
    "²",  # a digit to str.isdigit, not to int()
    "١٢٣",  # Arabic-Indic digits
    "Ⅻ",
    "-1",
    "0",
    "18446744073709551616",
    "%s%n%x",
    "../../etc/passwd",
    "' OR 1=1 --",
    "a" * 64,
    "a" * 65,
)
ODD_BYTES = (b"", b"\x00", b"\xff" * 8, b"\x80", b"\xc3\x28", b"\xed\xa0\x80", bytes(range(256)))
PIECES = ("a", "0", "\x00", "\u00e9", "e\u0301", "\U0001f0a1", "\u202e", "ab\n")


T = TypeVar("T")
SEED = 16  # bytes of the hypothesis draw behind a Genome


class Genome:
    """Choices from one seeded stream (``random.Random``): many batches of bodies from one
    hypothesis draw. Hypothesis' cost is per draw (0.1 to 0.3 ms, and a message of its own
    strategies is a dozen draws or more) and per example (1 ms); a run makes 90,000 bodies."""

    def __init__(self, seed: bytes) -> None:
        self._random = random.Random(seed)

    def number(self, n: int) -> int:
        """0 <= number < n."""
        return self._random.randrange(n)

    def pick(self, options: Sequence[T]) -> T:
        return options[self._random.randrange(len(options))]

    def take(self, n: int) -> bytes:
        return self._random.randbytes(n)


def genomes() -> st.SearchStrategy[Genome]:
    """A Genome an example, seeded with the draw and a count of the genomes made so far:
    hypothesis gives a draw all zeros in about half of the examples and copies spans between
    draws, so uncounted the streams would repeat (a run's 5,008 plausible pieces once held 817
    distinct); counted, every one is new. Deterministic under ``derandomize`` and ``seed``."""
    made = itertools.count()
    return st.binary(min_size=SEED, max_size=SEED).map(lambda d: Genome(d + next(made).to_bytes(8, "little")))


def repeat(piece: str, size: int) -> str:
    """At least ``size`` UTF-8 bytes of a repeated piece."""
    return piece * (size // len(piece.encode()) + 1)


def long_bytes(g: Genome, sizes: Sequence[int] = LONG_SIZES) -> bytes:
    n = g.pick(sizes)
    return repeat(g.pick(PIECES), n).encode()[:n]


def _char(g: Genome) -> str:
    """Any code point but a surrogate (a str with one cannot be encoded), mostly ASCII."""
    how = g.number(4)
    c = g.number(128) if how < 2 else g.number(0x10000) if how == 2 else g.number(0x110000)
    return chr(c) if not 0xD800 <= c < 0xE000 else "\ufffd"


def text(g: Genome) -> str:
    how = g.number(3)
    if how == 0:  # short and random: 0 to 40 characters, NUL included
        return "".join(_char(g) for _ in range(g.number(41) if g.number(2) else g.number(4)))
    if how == 1:
        return g.pick(ODD_TEXT)
    return repeat(g.pick(PIECES), g.pick(LONG_SIZES))


def binary(g: Genome) -> bytes:
    how = g.number(3)
    if how == 0:
        return g.take(g.number(41) if g.number(2) else g.number(4))
    return g.pick(ODD_BYTES) if how == 1 else long_bytes(g)


@functools.cache
def _edges(lo: int, hi: int) -> tuple[int, ...]:
    edges = {lo, lo + 1, 0, 1, 2, hi - 1, hi}
    for bits in (7, 8, 15, 16, 31, 32, 53, 63, 64):
        edges |= {2**bits - 1, 2**bits, -(2**bits)}
    return tuple(sorted(e for e in edges if lo <= e <= hi))


def integer(g: Genome, lo: int, hi: int) -> int:
    """Any integer of the range: one of its edges (plain draws seldom reach them), a small one,
    or one of any bit length."""
    how = g.number(4)
    if how < 2:
        return g.pick(_edges(lo, hi))
    n = g.number(256) - 128 if how == 2 else g.number(2 ** (1 + g.number(64)))
    if lo < 0 and how == 3 and g.number(2):
        n = -n
    return n if lo <= n <= hi else lo + n % (hi - lo + 1)


FLOATS = (0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308)


def _float(g: Genome, width: int) -> float:
    if g.number(2):
        return g.pick(FLOATS)
    raw = g.take(width // 8)
    return float(struct.unpack("<f" if width == 32 else "<d", raw)[0])


Maker = Callable[[Genome], Any]


def scalar(field: FieldDescriptor) -> Maker:
    t = field.type
    if t == _F.TYPE_STRING:
        return text
    if t == _F.TYPE_BYTES:
        return binary
    if t == _F.TYPE_BOOL:
        return lambda g: bool(g.number(2))
    if t in (_F.TYPE_DOUBLE, _F.TYPE_FLOAT):
        width = 32 if t == _F.TYPE_FLOAT else 64
        return lambda g: _float(g, width)
    if t == _F.TYPE_ENUM:
        named = tuple(v.number for v in field.enum_type.values)
        return lambda g: g.pick(named) if g.number(2) else integer(g, -(2**31), 2**31 - 1)
    if t == _F.TYPE_MESSAGE:
        return message(field.message_type)
    lo, hi = _INT_RANGES[t]
    return lambda g: integer(g, lo, hi)


def repeated(field: FieldDescriptor) -> Maker:
    one = scalar(field)

    def make(g: Genome) -> list[Any]:
        # a long list is copies of one value: the length of a long one for the price of a short one
        if g.number(6):
            return [one(g) for _ in range(g.number(4))]
        return _copies(one(g), g.pick(LONG_LISTS))

    return make


def _copies(value: Any, n: int) -> list[Any]:
    """``n`` copies of ``value``, fewer if they would pass LONG_LIST_BYTES (oversized
    bodies are made on purpose, and rarely: see ``oversized``)."""
    if isinstance(value, Message):
        size = value.ByteSize()
    else:
        size = len(value) if isinstance(value, str | bytes) else 8
    return [value] * min(n, max(1, LONG_LIST_BYTES // max(size, 1)))


_CACHE: dict[str, Maker] = {}


def message(descriptor: Descriptor) -> Callable[[Genome], Message]:
    """Any message of this type, each field set or not (half of the time), each oneof with
    one member or none. The plan is made on the first call, so nested types may recur."""
    name = descriptor.full_name
    if name not in _CACHE:
        plan: list[tuple[tuple[str, Maker], ...]] = []

        def make(g: Genome) -> Message:
            if not plan:
                plan.extend(_plan(descriptor))
            m = cls()
            for choices in plan:
                i = g.number(len(choices) + 1)
                if i:
                    field, value = choices[i - 1]
                    assign(m, field, value(g))
            return m

        cls = message_factory.GetMessageClass(descriptor)
        _CACHE[name] = make
    return _CACHE[name]


def _plan(descriptor: Descriptor) -> list[tuple[tuple[str, Maker], ...]]:
    """For each field outside a oneof, and each oneof: the (name, maker) to choose from."""
    plan = [
        ((f.name, repeated(f) if f.is_repeated else scalar(f)),)
        for f in descriptor.fields
        if f.containing_oneof is None
    ]
    plan += [tuple((f.name, scalar(f)) for f in oneof.fields) for oneof in descriptor.oneofs]
    return plan or [()]


def assign(m: Message, name: str, value: Any) -> None:
    field = m.DESCRIPTOR.fields_by_name[name]
    target = getattr(m, name)
    if field.is_repeated:
        if field.type == _F.TYPE_MESSAGE:
            for item in value:
                target.add().CopyFrom(item)
        else:
            target.extend(value)
    elif field.type == _F.TYPE_MESSAGE:
        target.CopyFrom(value)
    else:
        setattr(m, name, value)


# -- bodies that are not (necessarily) messages --------------------------------------------------


def varint(n: int) -> bytes:
    n &= 2**64 - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_bytes(number: int, wire_type: int, payload: bytes) -> bytes:
    """One field as protobuf encodes it, or as it must not (wire types 3, 4, 6, 7)."""
    tag = varint((number << 3) | wire_type)
    if wire_type == 0:
        return tag + varint(int.from_bytes(payload[:10], "little"))
    if wire_type == 1:
        return tag + payload[:8].ljust(8, b"\x00")
    if wire_type == 2:
        return tag + varint(len(payload)) + payload
    if wire_type == 5:
        return tag + payload[:4].ljust(4, b"\x00")
    return tag + payload


def hand_encoded(g: Genome) -> bytes:
    """One to three fields encoded by hand: known and unknown numbers, every wire type, any payload."""
    numbers = (1, 1, 2, 2, 3, 4, 5, 6, 0, 7, 100, 2**29 - 1, 2**29, 2**32 - 1)
    return b"".join(
        field_bytes(g.pick(numbers), g.number(8), g.take(g.number(17))) for _ in range(1 + g.number(3))
    )


MUTATIONS: dict[str, Callable[[bytes, int, bytes], bytes]] = {
    "truncate": lambda b, i, _: b[: i % (len(b) + 1)],
    "drop first": lambda b, i, _: b[1:],
    "flip byte": lambda b, i, p: _at(b, i, lambda x: x ^ (p[0] or 0xFF)),
    "set high bit": lambda b, i, _: _at(b, i, lambda x: x | 0x80),
    "insert": lambda b, i, p: b[: i % (len(b) + 1)] + p + b[i % (len(b) + 1) :],
    "append": lambda b, _, p: b + p,
    "double": lambda b, _, __: b + b,
    "length past the end": lambda b, i, _: b + b"\x0a" + varint(2**31 + i % 1000) + b"x",
    "eleven-byte varint": lambda b, _, __: b + b"\x10" + b"\xff" * 10 + b"\x01",
    "unclosed group": lambda b, _, __: b + b"\x0b",
}
MUTATION_NAMES = sorted(MUTATIONS)


def _at(body: bytes, i: int, change: Callable[[int], int]) -> bytes:
    if not body:
        return body
    i %= len(body)
    return body[:i] + bytes([change(body[i]) & 0xFF]) + body[i + 1 :]


def mutated(body: bytes, g: Genome) -> bytes:
    """``body`` cut, corrupted or extended."""
    return MUTATIONS[g.pick(MUTATION_NAMES)](body, g.number(2**16), g.take(1 + g.number(8)))


RAW = 48
"""The most bytes of a raw body of random bytes."""


def raw(bodies: Callable[[int], bytes], g: Genome) -> bytes:
    """Random bytes (0 to RAW), fields encoded by hand, or an earlier body (``bodies(i)``) corrupted."""
    how = g.number(4)
    if how == 0:
        return g.take(g.number(RAW + 1))
    if how == 1:
        return hand_encoded(g)
    return mutated(bodies(g.number(2**16)), g)


def oversized(body: bytes, number: int, size: int, piece: str) -> bytes:
    """``body`` and one more length-delimited field of ``size`` bytes: for a field
    the request has, a huge value; for the others, a huge unknown field."""
    return body + field_bytes(number, 2, repeat(piece, size).encode()[:size])
