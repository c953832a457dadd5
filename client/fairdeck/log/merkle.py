"""RFC 9162 Merkle trees for the transparency log: hashes, proofs, storage layout.

Hashing is RFC 9162 section 2.1.1, the same tree as RFC 6962 (``leaf_hash``, ``node_hash``,
``root``; the empty tree is ``EMPTY_ROOT``). ``verify_inclusion`` and ``verify_consistency`` are
RFC 9162 sections 2.1.3.2 and 2.1.4.2, strict (32-byte hashes, uint64 sizes, exact proof
lengths, constant-time compares), and return None or raise ``ProofError`` naming the check that
failed. Storage keeps Go sumdb's append-only array of complete-subtree hashes, so any root or
proof reads about ``2*log2(n)`` stored hashes in one ``read_hashes`` batch (docs/log-format.md,
"Stored hashes").

>>> leaves = [leaf_hash(bytes([i])) for i in range(5)]
>>> store = []
>>> read = lambda indexes: [store[i] for i in indexes]
>>> for n, h in enumerate(leaves):
...     store += stored_hashes_for_append(n, h, read)
>>> len(store) == stored_hash_count(5)
True
>>> tree_hash(5, read) == root(leaves)
True
>>> proof = prove_inclusion(3, 5, read)
>>> verify_inclusion(3, 5, leaves[3], proof, root(leaves))
>>> verify_consistency(2, 5, prove_consistency(2, 5, read), root(leaves[:2]), root(leaves))
>>> verify_inclusion(3, 5, leaves[2], proof, root(leaves))
Traceback (most recent call last):
    ...
fairdeck.log.merkle.ProofError: inclusion proof does not lead to the root: computed root differs
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Sequence

from fairdeck.core.errors import InvalidInput

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
MAX_TREE_SIZE = 2**64 - 1  # tree sizes and leaf indexes are uint64 (RFC 9162 section 4)

HashReader = Callable[[list[int]], Sequence[bytes]]
"""Reads stored hashes by index, in the order asked, in one batch."""

_sha256 = hashlib.sha256


class ProofError(Exception):
    """An inclusion or consistency proof that does not verify; the message names the check."""


class HashReaderError(RuntimeError):
    """``read_hashes`` broke its contract (wrong count, or a value that is not a 32-byte hash)."""


# --- hashing -------------------------------------------------------------------------------------


def leaf_hash(entry: bytes) -> bytes:
    """``SHA-256(0x00 || entry)``, the hash of a log entry."""
    return _sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``, the hash of an interior node."""
    _arg_hash("left", left)
    _arg_hash("right", right)
    return _node(left, right)


def _node(left: bytes, right: bytes) -> bytes:
    return _sha256(b"\x01" + left + right).digest()


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """The Merkle Tree Hash of a list of leaf hashes (``EMPTY_ROOT`` for none)."""
    stack: list[bytes] = []
    for i, h in enumerate(leaf_hashes):
        _arg_hash(f"leaf_hashes[{i}]", h)
        stack.append(h)
        for _ in range(_trailing_zeros(i + 1)):  # leaf i completes this many subtrees
            right = stack.pop()
            stack[-1] = _node(stack[-1], right)
    return _fold(stack) if stack else EMPTY_ROOT


def _fold(hashes: Sequence[bytes]) -> bytes:
    """Hash complete subtrees of decreasing size, left to right, into their tree."""
    h = hashes[-1]
    for left in reversed(hashes[:-1]):
        h = _node(left, h)
    return h


# --- stored-hash layout (Go sumdb tlog) -------------------------------------------------------------


def stored_hash_index(level: int, n: int) -> int:
    """Index in the hash array of the subtree of 2**level leaves from leaf ``n * 2**level``."""
    _arg_int("level", level)
    _arg_int("n", n)
    # Level L's n-th hash is written right after level L+1's (2n+1)-th, so walk
    # down to the leaf that completes the subtree; leaf m is at m + m/2 + m/4 + ...
    m = ((n + 1) << level) - 1
    return 2 * m - m.bit_count() + level


def frontier_subtrees(size: int) -> list[tuple[int, int]]:
    """(level, stored hash index) of the complete subtrees a tree of ``size`` leaves
    ends in, largest first: one per set bit of ``size``. Their hashes are all an
    append needs, and they fold into the root."""
    _arg_int("size", size)
    subtrees, start = [], 0
    for level in reversed(range(size.bit_length())):
        if size >> level & 1:
            subtrees.append((level, stored_hash_index(level, start >> level)))
            start += 1 << level
    return subtrees


def split_stored_hash_index(index: int) -> tuple[int, int]:
    """The ``(level, n)`` stored at ``index``; the inverse of ``stored_hash_index``."""
    _arg_int("index", index)
    # stored_hash_index(0, n) < 2n + 1, so the leaf written last before index is >= index // 2.
    n = index // 2
    index_n = stored_hash_index(0, n)
    while True:
        nxt = index_n + 1 + _trailing_zeros(n + 1)  # leaf n writes 1 + trailing_ones(n) hashes
        if nxt > index:
            break
        n += 1
        index_n = nxt
    level = index - index_n
    return level, n >> level


def stored_hash_count(n: int) -> int:
    """How many hashes the array holds once leaves ``0..n-1`` are appended."""
    _arg_int("n", n)
    if n == 0:
        return 0
    return stored_hash_index(0, n - 1) + 1 + _trailing_zeros(n)


def stored_hashes_for_append(n: int, leaf_hash: bytes, read_hashes: HashReader) -> list[bytes]:
    """The hashes to append when leaf ``n``, with hash ``leaf_hash``, joins a log of n leaves.

    They go at indexes ``stored_hash_index(0, n)`` onwards, which is the current
    end of the array, ``stored_hash_count(n)``: the leaf hash, then the hash of
    every subtree the leaf completes. Reads at most log2(n) earlier hashes.
    """
    _arg_int("n", n)
    _arg_hash("leaf_hash", leaf_hash)
    m = _trailing_zeros(n + 1)
    # The left sibling at each completed level, in increasing index order.
    lefts = _read(read_hashes, [stored_hash_index(i, (n >> i) - 1) for i in reversed(range(m))])
    out = [leaf_hash]
    h = leaf_hash
    for i in range(m):
        h = _node(lefts[m - 1 - i], h)
        out.append(h)
    return out


def tree_hash(size: int, read_hashes: HashReader) -> bytes:
    """The root of the tree of the first ``size`` leaves, from at most 1 + log2(size) reads."""
    _arg_size("size", size)
    if size == 0:
        return EMPTY_ROOT
    (h,) = _subtree_hashes([(0, size)], read_hashes)
    return h


def prove_inclusion(index: int, size: int, read_hashes: HashReader) -> list[bytes]:
    """The RFC 9162 inclusion proof (audit path) of leaf ``index`` in the tree of ``size`` leaves."""
    _arg_size("size", size)
    _arg_int("index", index)
    if index >= size:
        raise InvalidInput(f"leaf index {index} is not below the tree size {size}")
    # PATH(m, D[lo:hi]): walk down from the root, noting the subtree not taken;
    # the proof lists them bottom-up.
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo = lo + k
    ranges.reverse()
    return _subtree_hashes(ranges, read_hashes)


def prove_consistency(size1: int, size2: int, read_hashes: HashReader) -> list[bytes]:
    """The RFC 9162 consistency proof between tree sizes ``0 < size1 <= size2``.

    Equal sizes give the empty proof. A proof from size 0 does not exist (RFC 9162
    defines them for 0 < size1 < size2), so ``size1 == 0`` is refused.
    """
    _arg_size("size1", size1)
    _arg_size("size2", size2)
    if size1 == 0:
        raise InvalidInput("no consistency proof from the empty tree: every tree extends it")
    if size1 > size2:
        raise InvalidInput(f"size1 {size1} is larger than size2 {size2}")
    # SUBPROOF(m, D[lo:hi], b), top-down, b true while the subtree starts at leaf 0.
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, size2
    while size1 != hi:
        k = _split(hi - lo)
        if size1 <= lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo = lo + k
    if lo != 0:  # SUBPROOF(m, D[m], false) = {MTH(D[m])}
        ranges.append((lo, hi))
    ranges.reverse()
    return _subtree_hashes(ranges, read_hashes)


def _subtree_hashes(ranges: Sequence[tuple[int, int]], read_hashes: HashReader) -> list[bytes]:
    """The hash of each subtree ``[lo, hi)`` of an RFC 9162 tree, with one batched read."""
    parts = [_complete_subtrees(lo, hi) for lo, hi in ranges]
    hashes = _read(read_hashes, [i for part in parts for i in part])
    out: list[bytes] = []
    at = 0
    for part in parts:
        out.append(_fold(hashes[at : at + len(part)]))
        at += len(part)
    return out


def _complete_subtrees(lo: int, hi: int) -> list[int]:
    """Stored-hash indexes of the complete subtrees covering ``[lo, hi)``, largest first."""
    indexes = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        k = 1 << level
        if lo & (k - 1):  # the recursion only ever asks for aligned ranges
            raise AssertionError(f"unaligned subtree [{lo}, {hi})")
        indexes.append(stored_hash_index(level, lo >> level))
        lo += k
    return indexes


def _read(read_hashes: HashReader, indexes: list[int]) -> list[bytes]:
    if not indexes:
        return []
    hashes = list(read_hashes(list(indexes)))
    if len(hashes) != len(indexes):
        raise HashReaderError(f"read_hashes returned {len(hashes)} hashes for {len(indexes)} indexes")
    for i, h in zip(indexes, hashes, strict=True):
        if not isinstance(h, bytes) or len(h) != HASH_SIZE:
            raise HashReaderError(f"stored hash {i} is not a {HASH_SIZE}-byte hash")
    return hashes


# --- verification (RFC 9162 sections 2.1.3.2 and 2.1.4.2) -----------------------------------------


def verify_inclusion(index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves whose hash is ``root``."""
    _proof_int("index", index)
    _proof_int("size", size)
    if index >= size:
        raise ProofError(f"leaf index {index} is not below the tree size {size}")
    _proof_hash("leaf hash", leaf_hash)
    _proof_hash("root", root)
    want = inclusion_proof_length(index, size)
    if len(proof) != want:
        raise ProofError(
            f"inclusion proof has {len(proof)} hashes, want {want} for leaf {index} of a tree of {size}"
        )
    for i, p in enumerate(proof):
        _proof_hash(f"proof[{i}]", p)

    # RFC 9162 section 2.1.3.2, step by step.
    fn, sn = index, size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:
            raise ProofError("inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is too short")
    if not hmac.compare_digest(r, root):
        raise ProofError("inclusion proof does not lead to the root: computed root differs")


def verify_consistency(size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes) -> None:
    """Check that the tree of ``size2`` leaves and hash ``root2`` extends the one of ``size1``, ``root1``.

    Equal sizes need an empty proof and equal roots (and a size-0 root must be
    ``EMPTY_ROOT``). ``size1 == 0 < size2`` is refused: RFC 9162 has no proof
    for it, every tree extends the empty one, so a client with no earlier
    checkpoint has nothing to check.
    """
    _proof_int("size1", size1)
    _proof_int("size2", size2)
    if size1 > size2:
        raise ProofError(f"size1 {size1} is larger than size2 {size2}")
    _proof_hash("root1", root1)
    _proof_hash("root2", root2)
    if size1 == size2:
        if len(proof) != 0:
            raise ProofError(f"sizes are equal, so the proof must be empty; it has {len(proof)} hashes")
        if size1 == 0 and not hmac.compare_digest(root1, EMPTY_ROOT):
            raise ProofError("the root of the empty tree must be SHA-256 of the empty string")
        if not hmac.compare_digest(root1, root2):
            raise ProofError("sizes are equal but the roots differ")
        return
    if size1 == 0:
        raise ProofError("size1 is 0: there is no consistency proof from the empty tree")
    want = consistency_proof_length(size1, size2)
    if len(proof) != want:
        raise ProofError(
            f"consistency proof has {len(proof)} hashes, want {want} for sizes {size1} to {size2}"
        )
    for i, p in enumerate(proof):
        _proof_hash(f"proof[{i}]", p)

    # RFC 9162 section 2.1.4.2, step by step.
    path = list(proof)
    if not path:  # step 1
        raise ProofError("consistency proof is empty")
    if size1 & (size1 - 1) == 0:  # step 2: first is an exact power of 2
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1  # step 3
    while fn & 1:  # step 4
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]  # step 5
    for c in path[1:]:  # step 6
        if sn == 0:
            raise ProofError("consistency proof is too long")
        if fn & 1 or fn == sn:
            fr = _node(c, fr)
            sr = _node(c, sr)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            sr = _node(sr, c)
        fn >>= 1
        sn >>= 1
    # step 7
    if sn != 0:
        raise ProofError("consistency proof is too short")
    first_ok = hmac.compare_digest(fr, root1)
    second_ok = hmac.compare_digest(sr, root2)
    if not first_ok:
        raise ProofError("consistency proof does not lead to root1: computed first root differs")
    if not second_ok:
        raise ProofError("consistency proof does not lead to root2: computed second root differs")


def inclusion_proof_length(index: int, size: int) -> int:
    """The number of hashes in the inclusion proof of leaf ``index`` in a tree of ``size`` (index < size)."""
    inner = (index ^ (size - 1)).bit_length()  # levels where the paths to index and size-1 differ
    return inner + (index >> inner).bit_count()  # plus the left siblings on the right border


def consistency_proof_length(size1: int, size2: int) -> int:
    """The number of hashes in the consistency proof between sizes ``0 < size1 < size2``."""
    shift = _trailing_zeros(size1)
    inner = ((size1 - 1) ^ (size2 - 1)).bit_length() - shift
    border = ((size1 - 1) >> (inner + shift)).bit_count()
    seed = 0 if size1 == 1 << shift else 1  # the old tree's last complete subtree, unless it is root1
    return seed + inner + border


# --- helpers -------------------------------------------------------------------------------------


def _trailing_zeros(x: int) -> int:
    return (x & -x).bit_length() - 1


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _arg_int(name: str, value: int) -> None:
    if not _is_int(value) or value < 0:
        raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}")


def _arg_size(name: str, value: int) -> None:
    _arg_int(name, value)
    if value > MAX_TREE_SIZE:
        raise InvalidInput(f"{name} {value} is beyond the uint64 range")


def _arg_hash(name: str, value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        raise InvalidInput(f"{name} must be {HASH_SIZE} bytes")


def _proof_int(name: str, value: int) -> None:
    if not _is_int(value) or not 0 <= value <= MAX_TREE_SIZE:
        raise ProofError(f"{name} must be an integer in 0..2**64-1, got {value!r}")


def _proof_hash(name: str, value: bytes) -> None:
    if not isinstance(value, bytes):
        raise ProofError(f"{name} must be bytes, got {type(value).__name__}")
    if len(value) != HASH_SIZE:
        raise ProofError(f"{name} is {len(value)} bytes, want {HASH_SIZE}")
