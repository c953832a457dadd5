"""RFC 9162 inclusion and consistency proofs against a naive recursive implementation of the
RFC (merkle_reference.py): exhaustively for small trees, by property for larger ones, with
every tampered proof refused; and the strictness of the verifiers and of the generators'
arguments."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.core.errors import InvalidInput
from fairdeck.log.merkle import (
    EMPTY_ROOT,
    HashReaderError,
    ProofError,
    consistency_proof_length,
    inclusion_proof_length,
    prove_consistency,
    prove_inclusion,
    split_stored_hash_index,
    stored_hash_count,
    stored_hash_index,
    stored_hashes_for_append,
    tree_hash,
    verify_consistency,
    verify_inclusion,
)
from tests.support.merkle_reference import (
    LEAVES,
    STORE,
    CountingReader,
    N,
    flip,
    mth,
    path,
    path_shape,
    read,
    rejects_consistency,
    rejects_inclusion,
    subproof,
    subproof_shape,
)

# --- proofs against the naive reference, exhaustively for small trees ------------------------------------


def _check_inclusion(i: int, n: int) -> None:
    reader = CountingReader(stored_hash_count(n))
    proof = prove_inclusion(i, n, reader)
    assert proof == path(i, LEAVES[:n])
    assert len(proof) == inclusion_proof_length(i, n)
    assert len(reader.calls) <= 1 and sum(map(len, reader.calls)) <= 2 * n.bit_length()
    r, leaf = mth(LEAVES[:n]), LEAVES[i]
    verify_inclusion(i, n, leaf, proof, r)

    assert rejects_inclusion(i, n, flip(leaf), proof, r)
    assert rejects_inclusion(i, n, leaf, proof, flip(r, 255))
    for j in range(len(proof)):
        for bit in (0, 7 * j + 3, 255):
            assert rejects_inclusion(i, n, leaf, [*proof[:j], flip(proof[j], bit), *proof[j + 1 :]], r)
    if proof:
        assert rejects_inclusion(i, n, leaf, proof[1:], r)
        assert rejects_inclusion(i, n, leaf, proof[:-1], r)
    assert rejects_inclusion(i, n, leaf, [*proof, r], r)
    assert rejects_inclusion(i, n, leaf, [r, *proof], r)
    assert rejects_inclusion(i, n, leaf, [*proof, proof[-1] if proof else leaf], r)
    assert rejects_inclusion(i, n, leaf, [*proof, b""], r)
    for i2 in (i - 1, i + 1, i ^ 2):
        if 0 <= i2 < n and i2 != i:
            assert rejects_inclusion(i2, n, leaf, proof, r)
    # A different size is refused unless the proof's shape is identical there,
    # in which case the verifier computes the very same root: the size is bound
    # by the signed checkpoint, not by the proof.
    for n2 in (n - 1, n + 1, 2 * n, n // 2):
        if n2 != n and n2 >= 0:
            same = i < n2 and path_shape(i, n2) == path_shape(i, n)
            assert rejects_inclusion(i, n2, leaf, proof, r) == (not same)


def _check_consistency(m: int, n: int) -> None:
    reader = CountingReader(stored_hash_count(n))
    proof = prove_consistency(m, n, reader)
    want = subproof(m, LEAVES[:n], True) if m < n else []
    assert proof == want
    assert m == n or len(proof) == consistency_proof_length(m, n)
    assert len(reader.calls) <= 1 and sum(map(len, reader.calls)) <= 2 * n.bit_length() + 2
    r1, r2 = mth(LEAVES[:m]), mth(LEAVES[:n])
    verify_consistency(m, n, proof, r1, r2)

    assert rejects_consistency(m, n, proof, flip(r1, 100), r2)
    assert rejects_consistency(m, n, proof, r1, flip(r2, 100))
    if m != n:
        assert rejects_consistency(m, n, proof, r2, r1)
        assert rejects_consistency(m, n, [], r1, r2)
        for j in range(len(proof)):
            for bit in (0, 4, 255):
                assert rejects_consistency(m, n, [*proof[:j], flip(proof[j], bit), *proof[j + 1 :]], r1, r2)
        assert rejects_consistency(m, n, proof[:-1], r1, r2)
        assert rejects_consistency(m, n, proof[1:], r1, r2)
        assert rejects_consistency(m, n, [proof[0], *proof], r1, r2)
    for extra in (r1, r2, b"", LEAVES[0]):
        assert rejects_consistency(m, n, [*proof, extra], r1, r2)
        assert rejects_consistency(m, n, [extra, *proof], r1, r2)
    # Other sizes are refused unless the computation is literally the same one.
    for m2, n2 in ((m - 1, n), (m + 1, n), (m ^ 2, n), (m, n + 1), (m, n - 1), (m, 2 * n), (m, n // 2)):
        if (m2, n2) == (m, n) or m2 < 0 or n2 < 0:
            continue
        same = 0 < m2 <= n2 and m < n and m2 < n2 and subproof_shape(m2, n2) == subproof_shape(m, n)
        assert rejects_consistency(m2, n2, proof, r1, r2) == (not same), (m2, n2)


def test_inclusion_exhaustive_small() -> None:
    for n in range(1, 65):
        for i in range(n):
            _check_inclusion(i, n)


def test_consistency_exhaustive_small() -> None:
    for n in range(1, 65):
        for m in range(1, n + 1):
            _check_consistency(m, n)


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_inclusion_property(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, N))
    i = data.draw(st.integers(0, n - 1))
    _check_inclusion(i, n)
    proof = prove_inclusion(i, n, read)
    if proof:
        j = data.draw(st.integers(0, len(proof) - 1))
        bit = data.draw(st.integers(0, 255))
        assert rejects_inclusion(
            i, n, LEAVES[i], [*proof[:j], flip(proof[j], bit), *proof[j + 1 :]], mth(LEAVES[:n])
        )
    assert rejects_inclusion(i, n, LEAVES[i], proof, flip(mth(LEAVES[:n]), data.draw(st.integers(0, 255))))


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_consistency_property(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, N))
    m = data.draw(st.integers(1, n))
    _check_consistency(m, n)
    proof = prove_consistency(m, n, read)
    r1, r2 = mth(LEAVES[:m]), mth(LEAVES[:n])
    if proof:
        j = data.draw(st.integers(0, len(proof) - 1))
        bit = data.draw(st.integers(0, 255))
        assert rejects_consistency(m, n, [*proof[:j], flip(proof[j], bit), *proof[j + 1 :]], r1, r2)
    assert rejects_consistency(m, n, proof, flip(r1, data.draw(st.integers(0, 255))), r2)
    assert rejects_consistency(m, n, proof, r1, flip(r2, data.draw(st.integers(0, 255))))


def test_proof_lengths_for_huge_trees() -> None:
    """The length formulas agree with the naive recursions on shapes (no hashing needed)."""
    for n in [2**40, 2**40 + 1, 2**63 - 1, 2**64 - 1, 3 * 2**50 + 12345]:
        for i in (0, 1, n // 3, n - 2, n - 1):
            assert inclusion_proof_length(i, n) == len(path_shape(i, n))
        for m in (1, 2, n // 3, n - 1):
            shape = subproof_shape(m, n)
            assert consistency_proof_length(m, n) == len(shape) - (shape[0] == "root1")


# --- strictness of the verifiers and of the generators' arguments ------------------------------------


def test_verify_inclusion_rejects_malformed_input() -> None:
    leaf, r = LEAVES[0], mth(LEAVES[:4])
    proof = path(0, LEAVES[:4])
    cases: list[tuple[object, ...]] = [
        (4, 4, leaf, proof, r),  # index == size
        (0, 0, leaf, [], EMPTY_ROOT),  # nothing is in the empty tree
        (-1, 4, leaf, proof, r),
        (0, 2**64, leaf, proof, r),
        (True, 4, leaf, proof, r),
        (0, 4.0, leaf, proof, r),
        (0, 4, leaf[:31], proof, r),
        (0, 4, leaf + b"\x00", proof, r),
        (0, 4, leaf.hex(), proof, r),
        (0, 4, bytearray(leaf), proof, r),
        (0, 4, leaf, proof, r[:31]),
        (0, 4, leaf, [proof[0], proof[1][:31]], r),
        (0, 4, leaf, [proof[0], None], r),
    ]
    for args in cases:
        with pytest.raises(ProofError):
            verify_inclusion(*args)  # type: ignore[arg-type]
    with pytest.raises(ProofError, match="index 18446744073709551615 is not below"):
        verify_inclusion(2**64 - 1, 4, leaf, proof, r)
    with pytest.raises(ProofError, match="has 3 hashes, want 2"):
        verify_inclusion(0, 4, leaf, [*proof, r], r)
    with pytest.raises(ProofError, match="computed root differs"):
        verify_inclusion(0, 4, leaf, proof, flip(r))
    with pytest.raises(ProofError, match=r"proof\[1\] is 31 bytes"):
        verify_inclusion(0, 4, leaf, [proof[0], proof[1][:31]], r)
    verify_inclusion(0, 1, leaf, [], leaf)
    verify_inclusion(0, 4, leaf, tuple(proof), r)


def test_verify_consistency_rejects_malformed_input() -> None:
    r2, r4 = mth(LEAVES[:2]), mth(LEAVES[:4])
    proof = subproof(2, LEAVES[:4], True)
    with pytest.raises(ProofError, match="size1 4 is larger than size2 2"):
        verify_consistency(4, 2, [], r4, r2)
    with pytest.raises(ProofError, match="size1 is 0"):
        verify_consistency(0, 4, [], EMPTY_ROOT, r4)
    with pytest.raises(ProofError, match="empty tree must be"):
        verify_consistency(0, 0, [], r2, r2)
    verify_consistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT)
    verify_consistency(4, 4, [], r4, r4)
    with pytest.raises(ProofError, match="must be empty"):
        verify_consistency(4, 4, [r4], r4, r4)
    with pytest.raises(ProofError, match="roots differ"):
        verify_consistency(4, 4, [], r4, r2)
    r3, proof3 = mth(LEAVES[:3]), subproof(3, LEAVES[:4], True)
    verify_consistency(3, 4, proof3, r3, r4)
    with pytest.raises(ProofError, match="lead to root1"):
        verify_consistency(3, 4, proof3, flip(r3), r4)
    with pytest.raises(ProofError, match="lead to root2"):  # size1 a power of 2: root1 seeds the proof
        verify_consistency(2, 4, proof, flip(r2), r4)
    with pytest.raises(ProofError, match="root2"):
        verify_consistency(2, 4, proof, r2, flip(r4))
    with pytest.raises(ProofError, match="has 0 hashes, want 1"):
        verify_consistency(2, 4, [], r2, r4)
    for bad in (-1, 2**64, True, None, "2"):
        with pytest.raises(ProofError):
            verify_consistency(bad, 4, proof, r2, r4)  # type: ignore[arg-type]
        with pytest.raises(ProofError):
            verify_consistency(2, bad, proof, r2, r4)  # type: ignore[arg-type]
    with pytest.raises(ProofError, match="root2 is 31 bytes"):
        verify_consistency(2, 4, proof, r2, r4[:31])
    with pytest.raises(ProofError, match=r"proof\[0\] must be bytes"):
        verify_consistency(2, 4, [proof[0].hex()], r2, r4)  # type: ignore[list-item]


def test_generators_reject_bad_arguments() -> None:
    for args in [(0, 0), (5, 5), (-1, 5), (0, -1), (True, 5), (0, 2**64)]:
        with pytest.raises(InvalidInput):
            prove_inclusion(*args, read)
    for args in [(0, 5), (6, 5), (-1, 5), (1, 2**64)]:
        with pytest.raises(InvalidInput):
            prove_consistency(*args, read)
    assert prove_consistency(5, 5, read) == []
    for fn in (stored_hash_count, split_stored_hash_index, lambda x: tree_hash(x, read)):
        with pytest.raises(InvalidInput):
            fn(-1)
    with pytest.raises(InvalidInput):
        stored_hash_index(-1, 0)
    with pytest.raises(InvalidInput):
        stored_hashes_for_append(0, b"short", read)


def test_misbehaving_reader_is_caught() -> None:
    with pytest.raises(HashReaderError, match="returned 1 hashes for 2"):
        tree_hash(3, lambda ix: [STORE[0]])
    with pytest.raises(HashReaderError, match="not a 32-byte hash"):
        tree_hash(3, lambda ix: [b"x"] * len(ix))
    with pytest.raises(HashReaderError):
        stored_hashes_for_append(1, LEAVES[1], lambda ix: [])


def test_size_one_needs_no_reads() -> None:
    def never(indexes: list[int]) -> list[bytes]:
        raise AssertionError("no read expected")

    assert prove_inclusion(0, 1, never) == []
    assert stored_hashes_for_append(0, LEAVES[0], never) == [LEAVES[0]]
    assert stored_hashes_for_append(2, LEAVES[2], never) == [LEAVES[2]]
    assert prove_consistency(7, 7, never) == []
    assert tree_hash(0, never) == EMPTY_ROOT
