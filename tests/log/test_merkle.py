"""RFC 9162 Merkle trees: published vectors, a reference tree, and the stored-hash layout
checked against a naive recursive implementation of the RFC (merkle_reference.py). The
proofs and the verifiers' strictness are in test_merkle_proofs.py."""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.core.errors import InvalidInput
from fairdeck.log.merkle import (
    EMPTY_ROOT,
    ProofError,
    frontier_subtrees,
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
from tests.support.merkle_reference import COUNTS, LEAVES, STORE, CountingReader, N, mth, sha256

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "merkle"


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
        verify_consistency(1, 1, [], sha256(r1), sha256(r1))  # the same case with real hashes holds
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
    assert tree_hash(0, lambda ix: []) == root([]) == EMPTY_ROOT == sha256(b"")
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
    assert leaf_hash(b"") == sha256(b"\x00")
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert node_hash(a, b) == sha256(b"\x01" + a + b) != node_hash(b, a)
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
