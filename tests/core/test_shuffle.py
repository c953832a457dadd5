"""The stream (spec section 3.2), the uniform index (section 4) and the shuffle (section 5)."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.core.derivation import BLOCK_BYTES, Stream
from fairdeck.core.encoding import lp, u64
from fairdeck.core.shuffle import (
    durstenfeld_reference,
    factorial,
    index_bits,
    shuffle_by_index,
    shuffler,
    uniform_index,
)

SIZES = range(61)


def digits_to_index(digits: list[int], n: int) -> int:
    """Section 5's formula: r = d_{n-1} + n * (d_{n-2} + (n-1) * (... + 3 * d_1))."""
    r = 0
    for i, d in zip(range(1, n), reversed(digits), strict=True):  # innermost (i = 1) first
        r = r * (i + 1) + d
    return r


# Section 5: the shuffle


@pytest.mark.parametrize("n", SIZES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_shuffle_by_index_equals_durstenfeld_reference(n: int, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, math.factorial(n) - 1), label="index")
    items = list(range(100, 100 + n))
    assert shuffle_by_index(items, index) == durstenfeld_reference(items, index)


@pytest.mark.parametrize("n", SIZES)
def test_shuffle_by_index_equals_reference_at_the_ends_of_the_range(n: int) -> None:
    items = [f"c{i}" for i in range(n)]
    for index in {0, 1 % math.factorial(n), math.factorial(n) - 1, math.factorial(n) // 2}:
        assert shuffle_by_index(items, index) == durstenfeld_reference(items, index)


@pytest.mark.parametrize("n", [52, 54, 36, 104, 416])
def test_shuffle_by_index_does_not_depend_on_the_item_type(n: int) -> None:
    index = math.factorial(n) * 2 // 3
    as_ints = shuffle_by_index(list(range(n)), index)
    as_strings = shuffle_by_index([str(i) for i in range(n)], index)
    assert [str(i) for i in as_ints] == list(as_strings)
    assert sorted(as_ints) == list(range(n))


@pytest.mark.parametrize("n", range(7))
def test_every_index_gives_a_distinct_permutation(n: int) -> None:
    """For small n, the map [0, n!) -> orders is a bijection (spec section 8.1)."""
    items = list(range(n))
    orders = [shuffle_by_index(items, r) for r in range(math.factorial(n))]
    assert set(orders) == set(itertools.permutations(items))
    assert len(set(orders)) == math.factorial(n)


@pytest.mark.parametrize("n", range(1, 8))
def test_index_is_the_mixed_radix_number_of_the_swap_digits(n: int) -> None:
    for r in range(math.factorial(n)):
        digits, rest = [], r
        for i in range(n - 1, 0, -1):
            rest, j = divmod(rest, i + 1)
            digits.append(j)
        assert rest == 0
        assert digits_to_index(digits, n) == r


def test_index_n_factorial_minus_one_is_the_identity() -> None:
    """Every digit d_i = i means "swap position i with itself"."""
    for n in (1, 2, 5, 52):
        items = list(range(n))
        assert shuffle_by_index(items, math.factorial(n) - 1) == tuple(items)


def test_doc_example_index_3() -> None:
    # i = 2: j = 3 mod 3 = 0, swap -> c b a; i = 1: j = 1 mod 2 = 1, no-op.
    assert durstenfeld_reference(["a", "b", "c"], 3) == ("c", "b", "a")
    assert shuffle_by_index(["a", "b", "c"], 0) == ("b", "c", "a")


@pytest.mark.parametrize("shuffle", [shuffle_by_index, durstenfeld_reference])
@pytest.mark.parametrize(("n", "index"), [(3, -1), (3, 6), (52, math.factorial(52)), (0, 1)])
def test_index_out_of_range_is_rejected(shuffle: Callable[..., object], n: int, index: int) -> None:
    with pytest.raises(ValueError, match=r"index must be in \[0, n!\)"):
        shuffle(list(range(n)), index)


def test_shuffle_does_not_modify_its_input() -> None:
    items = list(range(52))
    shuffle_by_index(items, 12345)
    durstenfeld_reference(items, 12345)
    assert items == list(range(52))


# Section 4: the uniform index


@pytest.mark.parametrize("n", [*range(61), 104, 156, 208, 260, 312, 364, 416])
def test_shuffler_constants(n: int) -> None:
    s = shuffler(n)
    bits = index_bits(n)
    assert bits == (math.factorial(n) - 1).bit_length()
    if n >= 1:
        # B = ceil(log2(n!)) exactly, and acceptance n!/2^B is above 1/2
        assert 2 ** (bits - 1) < math.factorial(n) <= 2**bits
    assert s.limit == factorial(n) == math.factorial(n)
    assert s.mask == 2**bits - 1
    assert s.width == math.ceil(bits / 8)


class Reader:
    """A fake stream that serves fixed chunks and records how much was asked."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)
        self.asked: list[int] = []

    def __call__(self, n: int) -> bytes:
        self.asked.append(n)
        chunk = self.chunks.pop(0)
        assert len(chunk) == n
        return chunk


def _bytes(value: int, n: int) -> bytes:
    return value.to_bytes(shuffler(n).width, "big")


@pytest.mark.parametrize("n", [3, 5, 13, 36, 52, 54, 104, 416])
def test_uniform_index_accepts_below_n_factorial_and_rejects_from_it(n: int) -> None:
    limit, bits, width = math.factorial(n), index_bits(n), shuffler(n).width
    accept = Reader(_bytes(limit - 1, n))
    assert uniform_index(n, accept) == limit - 1
    assert accept.asked == [width]

    reject_then_one = Reader(_bytes(limit, n), _bytes(1, n))
    assert uniform_index(n, reject_then_one) == 1
    assert reject_then_one.asked == [width, width]

    reject_twice = Reader(_bytes(2**bits - 1, n), _bytes(limit, n), _bytes(0, n))
    assert uniform_index(n, reject_twice) == 0
    assert reject_twice.asked == [width] * 3


@pytest.mark.parametrize("n", [3, 36, 52, 54, 416])
def test_uniform_index_keeps_only_the_low_b_bits(n: int) -> None:
    limit, bits, width = math.factorial(n), index_bits(n), shuffler(n).width
    top = (2 ** (8 * width) - 1) ^ (2**bits - 1)  # every bit above B set
    if top:
        assert uniform_index(n, Reader((top | 5).to_bytes(width, "big"))) == 5
        assert uniform_index(n, Reader((top | (limit - 1)).to_bytes(width, "big"))) == limit - 1
        # above B the bits are ignored, so top | limit is still rejected
        reader = Reader((top | limit).to_bytes(width, "big"), _bytes(1, n))
        assert uniform_index(n, reader) == 1


@pytest.mark.parametrize("n", [3, 5, 36, 52, 54, 104])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_uniform_index_rejects_exactly_the_values_from_n_factorial(n: int, data: st.DataObject) -> None:
    width, bits, limit = shuffler(n).width, index_bits(n), math.factorial(n)
    # Bias half the draws to the interesting region around n! and 2^B.
    raw = data.draw(
        st.one_of(
            st.integers(0, 2 ** (8 * width) - 1),
            st.integers(max(0, limit - 1000), min(2**bits - 1, limit + 1000)),
        ),
        label="raw",
    )
    reader = Reader(raw.to_bytes(width, "big"), _bytes(0, n))
    result = uniform_index(n, reader)
    if raw % 2**bits < limit:
        assert (result, len(reader.asked)) == (raw % 2**bits, 1)
    else:
        assert (result, len(reader.asked)) == (0, 2)


# Section 3.2: the stream


def _block(prefix: bytes, b: int, message: bytes) -> bytes:
    return hashlib.shake_256(prefix + u64(b) + message).digest(64)


def test_stream_is_shake256_in_counter_mode_with_64_byte_blocks() -> None:
    prefix, message = lp(b"fairdeck-v1 stream"), b"\x00\x00\x00\x03abc"
    expected = b"".join(_block(prefix, b, message) for b in range(5))
    assert BLOCK_BYTES == 64
    assert Stream(prefix, message).read(320) == expected


def test_stream_blocks_are_not_one_long_shake_output() -> None:
    prefix, message = lp(b"fairdeck-v1 stream"), b"m"
    stream = Stream(prefix, message).read(128)
    long_output = hashlib.shake_256(prefix + u64(0) + message).digest(128)
    assert stream[:64] == long_output[:64]
    assert stream[64:] != long_output[64:]


@given(sizes=st.lists(st.integers(0, 150), max_size=8), message=st.binary(max_size=200))
def test_stream_reads_are_consecutive_and_straddle_blocks(sizes: list[int], message: bytes) -> None:
    prefix = lp(b"fairdeck-v1 stream")
    total = sum(sizes)
    blocks = -(-total // 64)
    expected = b"".join(_block(prefix, b, message) for b in range(blocks))[:total]
    stream = Stream(prefix, message)
    assert b"".join(stream.read(size) for size in sizes) == expected


def test_stream_continues_from_a_given_first_block() -> None:
    prefix, message = lp(b"fairdeck-v1 stream"), b"msg"
    first = _block(prefix, 0, message)
    assert Stream(prefix, message, first).read(200) == Stream(prefix, message).read(200)
