"""A small in-memory C2SP log for witness tests: RFC 9162 tree, signed checkpoints, add-checkpoint bodies,
and hypothesis strategies of mangled add-checkpoint bodies of one log (``body_mutations``)."""

from __future__ import annotations

import base64
from collections.abc import Sequence

from hypothesis import strategies as st

from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.merkle import (
    leaf_hash,
    prove_consistency,
    stored_hash_count,
    stored_hashes_for_append,
    tree_hash,
)
from fairdeck.log.note import Signer


class MemLog:
    """A log of ``origin`` signed by ``signer``, its stored hashes in a list."""

    def __init__(self, origin: str = "example.com/log", seed: bytes = bytes(range(32))) -> None:
        self.origin = origin
        self.signer = Signer.from_seed(origin, seed)
        self.hashes: list[bytes] = []
        self.size = 0

    def _read(self, indexes: Sequence[int]) -> list[bytes]:
        return [self.hashes[i] for i in indexes]

    def append(self, *entries: bytes) -> MemLog:
        for entry in entries:
            assert len(self.hashes) == stored_hash_count(self.size)
            self.hashes += stored_hashes_for_append(self.size, leaf_hash(entry), self._read)
            self.size += 1
        return self

    def grow(self, n: int, tag: bytes = b"e") -> MemLog:
        return self.append(*(tag + b"%d" % (self.size + i) for i in range(n)))

    def root(self, size: int | None = None) -> bytes:
        return tree_hash(self.size if size is None else size, self._read)

    def checkpoint(self, size: int | None = None) -> bytes:
        size = self.size if size is None else size
        return sign_checkpoint(Checkpoint(self.origin, size, self.root(size)), self.signer)

    def proof(self, old: int, new: int | None = None) -> list[bytes]:
        new = self.size if new is None else new
        return [] if old == 0 else prove_consistency(old, new, self._read)

    def body(self, old: int, size: int | None = None, proof: Sequence[bytes] | None = None) -> bytes:
        """An add-checkpoint request body (tlog-witness, "add-checkpoint")."""
        size = self.size if size is None else size
        lines = proof if proof is not None else self.proof(old, size)
        head = f"old {old}\n" + "".join(base64.b64encode(h).decode() + "\n" for h in lines) + "\n"
        return head.encode() + self.checkpoint(size)


FUZZ_LOG = MemLog().grow(20)
FUZZ_BODIES = [FUZZ_LOG.body(0, size=n) for n in (0, 1, 5, 20)] + [FUZZ_LOG.body(5, size=20)]


def body_mutations() -> st.SearchStrategy[bytes]:
    line = st.one_of(
        st.binary(max_size=60),
        st.sampled_from([b"old 0", b"old 5", b"old 20", b"", b"example.com/log", b"20", b"\xe2\x80\x94 x"]),
        st.builds(lambda b: base64.b64encode(b), st.binary(min_size=0, max_size=40)),
    )
    spliced = st.builds(lambda parts: b"\n".join(parts), st.lists(line, max_size=70))
    flipped = st.builds(
        lambda body, at, bit: (
            body[: at % len(body)] + bytes([body[at % len(body)] ^ (1 << bit)]) + body[at % len(body) + 1 :]
        ),
        st.sampled_from(FUZZ_BODIES),
        st.integers(0, 10_000),
        st.integers(0, 7),
    )
    cut = st.builds(
        lambda body, n: body[: n % (len(body) + 1)], st.sampled_from(FUZZ_BODIES), st.integers(0, 10_000)
    )
    joined = st.builds(lambda a, b: a + b, st.sampled_from(FUZZ_BODIES), st.binary(max_size=100))
    return st.one_of(spliced, flipped, cut, joined, st.binary(max_size=400), st.sampled_from(FUZZ_BODIES))
