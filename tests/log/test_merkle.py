"""RFC 9162 Merkle trees: published vectors, a reference tree, the stored-hash
layout, and properties against a naive recursive implementation of the RFC."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.core.errors import InvalidInput
from fairdeck.log.merkle import (
    EMPTY_ROOT,
    HashReaderError,
    ProofError,
    consistency_proof_length,
    frontier_subtrees,
    inclusion_proof_length,
    leaf_hash,
    node_hash,
    prove_consistency,
    prove_inclusion,
    root,
    split_stored_hash_index,
    stored_hash_count,
    stored_hash_index,
    stored_hashes_for_append,
    tree_hash,
    verify_consistency,
    verify_inclusion,
)

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "merkle"


# --- a naive, recursive RFC 9162 section 2.1 reference --------------------------------------------


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """Largest power of two smaller than n, by counting up."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: Sequence[bytes]) -> bytes:
    if not leaves:
        return _h(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = _k(len(leaves))
    return _h(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def path(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    if len(leaves) == 1:
        return []
    k = _k(len(leaves))
    if m < k:
        return [*path(m, leaves[:k]), mth(leaves[k:])]
    return [*path(m - k, leaves[k:]), mth(leaves[:k])]


def subproof(m: int, leaves: Sequence[bytes], b: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if b else [mth(leaves)]
    k = _k(n)
    if m <= k:
        return [*subproof(m, leaves[:k], b), mth(leaves[k:])]
    return [*subproof(m - k, leaves[k:], False), mth(leaves[:k])]


def path_shape(m: int, n: int) -> list[bool]:
    """Bottom-up: is the proof hash at this step the right sibling? (Defines the computation.)"""
    if n == 1:
        return []
    k = _k(n)
    return [*path_shape(m, k), True] if m < k else [*path_shape(m - k, n - k), False]


def subproof_shape(m: int, n: int, b: bool = True) -> list[str]:
    """Bottom-up roles of consistency proof hashes: seed, R (new tree only), L (both trees)."""
    if m == n:
        return ["root1"] if b else ["seed"]
    k = _k(n)
    if m <= k:
        return [*subproof_shape(m, k, b), "R"]
    return [*subproof_shape(m - k, n - k, False), "L"]


# --- one log of N leaves, built the way the server builds it ------------------------------------------

N = 300
LEAVES = [leaf_hash(b"entry %d" % i) for i in range(N)]
STORE: list[bytes] = []
COUNTS: list[int] = []  # len(STORE) after each append


def read(indexes: list[int]) -> list[bytes]:
    return [STORE[i] for i in indexes]


for _n, _leaf in enumerate(LEAVES):
    STORE += stored_hashes_for_append(_n, _leaf, read)
    COUNTS.append(len(STORE))


class CountingReader:
    def __init__(self, limit: int) -> None:
        self.calls: list[list[int]] = []
        self.limit = limit

    def __call__(self, indexes: list[int]) -> list[bytes]:
        self.calls.append(list(indexes))
        assert all(0 <= i < self.limit for i in indexes), "read beyond the tree asked for"
        return [STORE[i] for i in indexes]


def flip(h: bytes, bit: int = 0) -> bytes:
    b = bytearray(h)
    b[bit // 8 % len(b)] ^= 1 << (bit % 8)
    return bytes(b)


def rejects_inclusion(i: int, n: int, leaf: bytes, proof: Sequence[bytes], r: bytes) -> bool:
    try:
        verify_inclusion(i, n, leaf, proof, r)
    except ProofError:
        return True
    return False


def rejects_consistency(m: int, n: int, proof: Sequence[bytes], r1: bytes, r2: bytes) -> bool:
    try:
        verify_consistency(m, n, proof, r1, r2)
    except ProofError:
        return True
    return False


# --- published vectors (transparency-dev/merkle testdata) ------------------------------------------------


def _vector_files(kind: str) -> list[Path]:
    return sorted((VECTORS / kind).rglob("*.json"))


def _ids(files: list[Path]) -> list[str]:
    return [str(f.relative_to(VECTORS)) for f in files]


INCLUSION_FILES = _vector_files("inclusion")
CONSISTENCY_FILES = _vector_files("consistency")

# wantErr is false but a root is 12 bytes ("don't care 2"): transparency-dev does not
# check hash lengths; this verifier does, so it must refuse it for that reason alone.
LENGTH_STRICT = {"consistency/additional/sizes-are-equal-one-and-proof-is-empty.json"}


def b64(s: str) -> bytes:
    return base64.b64decode(s, validate=True)


def test_vectors_are_all_there() -> None:
    assert len(INCLUSION_FILES) == 98
    assert len(CONSISTENCY_FILES) == 98
    assert (VECTORS / "LICENSE").read_text().lstrip().startswith("Apache License")
    happy = [f for f in INCLUSION_FILES + CONSISTENCY_FILES if f.name == "happy-path.json"]
    assert len(happy) == 10


@pytest.mark.parametrize("file", INCLUSION_FILES, ids=_ids(INCLUSION_FILES))
def test_inclusion_vector(file: Path) -> None:
    case = json.loads(file.read_text())
    try:
        leaf, r = b64(case["leafHash"]), b64(case["root"])
        proof = [b64(p) for p in case["proof"] or []]
    except binascii.Error:
        assert case["wantErr"]
        return
    if case["wantErr"]:
        with pytest.raises(ProofError):
            verify_inclusion(case["leafIdx"], case["treeSize"], leaf, proof, r)
    else:
        verify_inclusion(case["leafIdx"], case["treeSize"], leaf, proof, r)


@pytest.mark.parametrize("file", CONSISTENCY_FILES, ids=_ids(CONSISTENCY_FILES))
def test_consistency_vector(file: Path) -> None:
    case = json.loads(file.read_text())
    try:
        r1, r2 = b64(case["root1"]), b64(case["root2"])
        proof = [b64(p) for p in case["proof"] or []]
    except binascii.Error:
        assert case["wantErr"]
        return
    args = (case["size1"], case["size2"], proof, r1, r2)
    if str(file.relative_to(VECTORS)) in LENGTH_STRICT:
        assert not case["wantErr"] and len(r1) != 32
        with pytest.raises(ProofError, match="12 bytes, want 32"):
            verify_consistency(*args)
        verify_consistency(1, 1, [], _h(r1), _h(r1))  # the same case with real hashes holds
    elif case["wantErr"]:
        with pytest.raises(ProofError):
            verify_consistency(*args)
    else:
        verify_consistency(*args)


# --- the RFC 6962 reference tree (transparency-dev/merkle proof/verify_test.go) ------------------------

REF_LEAVES = [bytes.fromhex(x) for x in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657")]
REF_LEAVES.append(bytes.fromhex("606162636465666768696a6b6c6d6e6f"))
REF_ROOTS = [
    bytes.fromhex(x)
    for x in (
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    )
]
REF_INCLUSION = {  # (index, size): proof
    (0, 8): ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    (5, 8): ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    (1, 5): ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"],
}  # fmt: skip
REF_CONSISTENCY = {  # (size1, size2): proof
    (1, 8): ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    (6, 8): ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
    (2, 5): ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"],
    (6, 7): ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
             "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
    (1, 1): [],
}  # fmt: skip


def _ref_store() -> list[bytes]:
    store: list[bytes] = []
    for n, data in enumerate(REF_LEAVES):
        store += stored_hashes_for_append(n, leaf_hash(data), lambda ix: [store[i] for i in ix])
    return store


def test_reference_tree_roots() -> None:
    store = _ref_store()
    hashes = [leaf_hash(d) for d in REF_LEAVES]
    assert tree_hash(0, lambda ix: []) == root([]) == EMPTY_ROOT == _h(b"")
    for n in range(1, 9):
        assert tree_hash(n, lambda ix: [store[i] for i in ix]) == REF_ROOTS[n - 1]
        assert root(hashes[:n]) == REF_ROOTS[n - 1]


@pytest.mark.parametrize(("index", "size"), sorted(REF_INCLUSION))
def test_reference_tree_inclusion(index: int, size: int) -> None:
    store = _ref_store()
    want = [bytes.fromhex(x) for x in REF_INCLUSION[index, size]]
    assert prove_inclusion(index, size, lambda ix: [store[i] for i in ix]) == want
    verify_inclusion(index, size, leaf_hash(REF_LEAVES[index]), want, REF_ROOTS[size - 1])


@pytest.mark.parametrize(("size1", "size2"), sorted(REF_CONSISTENCY))
def test_reference_tree_consistency(size1: int, size2: int) -> None:
    store = _ref_store()
    want = [bytes.fromhex(x) for x in REF_CONSISTENCY[size1, size2]]
    assert prove_consistency(size1, size2, lambda ix: [store[i] for i in ix]) == want
    verify_consistency(size1, size2, want, REF_ROOTS[size1 - 1], REF_ROOTS[size2 - 1])


def test_hash_primitives() -> None:
    assert leaf_hash(b"") == _h(b"\x00")
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert node_hash(a, b) == _h(b"\x01" + a + b) != node_hash(b, a)
    with pytest.raises(InvalidInput):
        node_hash(a, b[:31])
    with pytest.raises(InvalidInput):
        root([a, b"short"])


# --- the stored-hash layout ------------------------------------------------------------------------------


def test_layout_table() -> None:
    table = [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3), (1, 1), (2, 0), (0, 4), (0, 5), (1, 2), (0, 6)]
    assert [split_stored_hash_index(i) for i in range(len(table))] == table
    assert [stored_hash_index(level, n) for level, n in table] == list(range(len(table)))
    assert [stored_hash_count(n) for n in range(9)] == [0, 1, 3, 4, 7, 8, 10, 11, 15]


def test_layout_is_a_bijection_on_small_indexes() -> None:
    for index in range(5000):
        level, n = split_stored_hash_index(index)
        assert stored_hash_index(level, n) == index


@given(level=st.integers(0, 70), n=st.integers(0, 2**70))
@settings(max_examples=300, deadline=None)
def test_layout_round_trip_large(level: int, n: int) -> None:
    assert split_stored_hash_index(stored_hash_index(level, n)) == (level, n)


def test_frontier_subtrees_cover_the_tree_and_fold_into_its_root() -> None:
    """The right edge both engines keep: complete subtrees, largest first, that
    cover leaves 0..size-1 in order, and whose stored hashes fold into the root."""
    assert frontier_subtrees(0) == []
    for size in range(1, N + 1):
        subtrees = frontier_subtrees(size)
        levels = [level for level, _ in subtrees]
        assert levels == sorted(levels, reverse=True) and sum(1 << lv for lv in levels) == size
        start = 0
        for level, index in subtrees:
            assert split_stored_hash_index(index) == (level, start >> level)
            start += 1 << level
        h = STORE[subtrees[-1][1]]
        for _, index in reversed(subtrees[:-1]):
            h = node_hash(STORE[index], h)
        assert h == root(LEAVES[:size])


def test_appends_fill_the_layout() -> None:
    """After each append the array is exactly stored_hash_count long, and every
    stored hash is the naive MTH of the complete subtree the layout names."""
    assert [stored_hash_count(n + 1) for n in range(N)] == COUNTS
    for n in range(N):
        assert stored_hash_index(0, n) == (COUNTS[n - 1] if n else 0)
        assert STORE[stored_hash_index(0, n)] == LEAVES[n]
    written_by = 0
    for index, h in enumerate(STORE):
        while COUNTS[written_by] <= index:
            written_by += 1
        level, k = split_stored_hash_index(index)
        lo, hi = k << level, (k + 1) << level
        assert hi == written_by + 1, "a subtree hash is written by the leaf that completes it"
        assert h == mth(LEAVES[lo:hi])


def test_tree_hash_every_size() -> None:
    for n in range(N + 1):
        reader = CountingReader(stored_hash_count(n))
        assert tree_hash(n, reader) == mth(LEAVES[:n]) == root(LEAVES[:n])
        assert len(reader.calls) == (1 if n else 0)
        assert not reader.calls or len(reader.calls[0]) <= n.bit_length()


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
