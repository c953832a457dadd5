"""Requests from the message descriptors alone, and bodies that are not valid
messages at all.

``message(descriptor)`` follows the descriptor, so a field added to a request
is fuzzed without touching this file: integers of every protobuf type at
their edges, strings (unicode, NUL, long) that are never surrogates (a str
with one cannot be encoded), bytes past every field limit, repeated fields of
any length, oneofs with one member or none, enums with values they do not
name, nested messages. ``raw`` makes bytes: random ones, fields encoded by
hand with any number and wire type, and earlier bodies cut or corrupted.
``oversized`` grows a body past the message limit. Draws are the budget:
a value costs hypothesis one or two (a piece and a length, repeated, for a
long one), and a batch of raw bodies one in all.
"""

from __future__ import annotations

import hashlib
import itertools
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


class Genome:
    """Choices read off one hypothesis-drawn byte string, wrapping around at its end.

    One draw for a whole request instead of one per choice: hypothesis' cost is
    per draw (about 0.1 ms here), and a run makes 140,000 requests."""

    def __init__(self, data: bytes) -> None:
        self.data = data or b"\x00"
        self.at = 0

    def number(self, n: int) -> int:
        """0 <= number < n, from the next two bytes."""
        d, i = self.data, self.at
        self.at += 2
        return (d[i % len(d)] << 8 | d[(i + 1) % len(d)]) % n

    def pick(self, options: Sequence[T]) -> T:
        return options[self.number(len(options))]

    def take(self, n: int) -> bytes:
        out = bytes(self.data[(self.at + k) % len(self.data)] for k in range(n))
        self.at += n
        return out


def spread(size: int) -> Callable[[bytes], list[bytes]]:
    """Cuts a draw into pieces of ``size`` bytes, each hashed with a count of the pieces made so
    far. Hypothesis gives a long draw all zeros in about half of the examples and copies spans
    between draws, so unhashed pieces were the same few genomes (a run's 5,008 plausible pieces
    held 817 distinct, 2,480 of them all zeros); hashed, every piece is new."""
    made = itertools.count()

    def pieces(data: bytes) -> list[bytes]:
        return [
            hashlib.shake_128(data[i : i + size] + next(made).to_bytes(8, "little")).digest(size)
            for i in range(0, len(data), size)
        ]

    return pieces


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each ``weight`` times as likely (roughly).

    Not ``st.one_of`` with repeats: it picks among *distinct* branches evenly."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(table.__getitem__)


def repeat(piece: str, size: int) -> str:
    """At least ``size`` UTF-8 bytes of a repeated piece."""
    return piece * (size // len(piece.encode()) + 1)


def long_bytes(sizes: Sequence[int] = LONG_SIZES) -> st.SearchStrategy[bytes]:
    return st.builds(lambda p, n: repeat(p, n).encode()[:n], st.sampled_from(PIECES), st.sampled_from(sizes))


def text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=40),  # hypothesis' default alphabet: no surrogates, NUL included
        st.sampled_from(ODD_TEXT),
        st.builds(repeat, st.sampled_from(PIECES), st.sampled_from(LONG_SIZES)),
    )


def binary() -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=40), st.sampled_from(ODD_BYTES), long_bytes())


def integer(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Any integer of the range, or one of its edges (plain draws seldom reach them)."""
    edges = {lo, lo + 1, 0, 1, 2, hi - 1, hi}
    for bits in (7, 8, 15, 16, 31, 32, 53, 63, 64):
        edges |= {2**bits - 1, 2**bits, -(2**bits)}
    return st.one_of(st.integers(lo, hi), st.sampled_from(sorted(e for e in edges if lo <= e <= hi)))


def scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type == _F.TYPE_STRING:
        return text()
    if field.type == _F.TYPE_BYTES:
        return binary()
    if field.type == _F.TYPE_BOOL:
        return st.booleans()
    if field.type in (_F.TYPE_DOUBLE, _F.TYPE_FLOAT):
        return st.floats(width=32 if field.type == _F.TYPE_FLOAT else 64)
    if field.type == _F.TYPE_ENUM:
        return st.one_of(
            st.sampled_from([v.number for v in field.enum_type.values]), integer(-(2**31), 2**31 - 1)
        )
    if field.type == _F.TYPE_MESSAGE:
        return message(field.message_type)
    return integer(*_INT_RANGES[field.type])


def repeated(field: FieldDescriptor) -> st.SearchStrategy[list[Any]]:
    one = scalar(field)
    # a long list is copies of one value: the length of a long one for the price of a short one
    return weighted((5, st.lists(one, max_size=3)), (1, st.builds(_copies, one, st.sampled_from(LONG_LISTS))))


def _copies(value: Any, n: int) -> list[Any]:
    """``n`` copies of ``value``, fewer if they would pass LONG_LIST_BYTES (oversized
    bodies are made on purpose, and rarely: see ``oversized``)."""
    if isinstance(value, Message):
        size = value.ByteSize()
    else:
        size = len(value) if isinstance(value, str | bytes) else 8
    return [value] * min(n, max(1, LONG_LIST_BYTES // max(size, 1)))


_CACHE: dict[str, st.SearchStrategy[Message]] = {}


def message(descriptor: Descriptor) -> st.SearchStrategy[Message]:
    """Any message of this type, each field set or not."""
    if descriptor.full_name not in _CACHE:
        _CACHE[descriptor.full_name] = st.deferred(lambda: _message(descriptor))
    return _CACHE[descriptor.full_name]


def _message(descriptor: Descriptor) -> st.SearchStrategy[Message]:
    cls = message_factory.GetMessageClass(descriptor)
    parts: list[st.SearchStrategy[tuple[str, Any] | None]] = []
    for field in descriptor.fields:
        if field.containing_oneof is None:
            value = repeated(field) if field.is_repeated else scalar(field)
            parts.append(st.one_of(st.none(), st.tuples(st.just(field.name), value)))
    for oneof in descriptor.oneofs:
        members = [st.tuples(st.just(f.name), scalar(f)) for f in oneof.fields]
        parts.append(st.one_of(st.none(), *members))
    return st.tuples(*parts).map(lambda values: build(cls, values))


def build(cls: type[Message], values: Sequence[tuple[str, Any] | None]) -> Message:
    m = cls()
    for item in values:
        if item is not None:
            assign(m, *item)
    return m


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


RAW = 1 + 48
"""Bytes of a draw behind one raw body: how it is made (and how long, for random bytes), then
its bytes (or the Genome of its choices)."""


def raw(bodies: Callable[[int], bytes], n: int) -> st.SearchStrategy[list[bytes]]:
    """``n`` bodies, from one draw, each random bytes (0 to 48), fields encoded by hand, or an
    earlier body (``bodies(i)``) corrupted."""

    def make(piece: bytes) -> bytes:
        how, data = piece[0] % 4, piece[1:]
        if how == 0:
            return data[: (piece[0] >> 2) % RAW]
        g = Genome(data)
        if how == 1:
            return hand_encoded(g)
        return mutated(bodies(g.number(2**16)), g)

    pieces = spread(RAW)
    return st.binary(min_size=n * RAW, max_size=n * RAW).map(lambda data: [make(p) for p in pieces(data)])


def oversized(body: bytes, number: int, size: int, piece: str) -> bytes:
    """``body`` and one more length-delimited field of ``size`` bytes: for a field
    the request has, a huge value; for the others, a huge unknown field."""
    return body + field_bytes(number, 2, repeat(piece, size).encode()[:size])
