"""A small in-memory C2SP log for witness tests: RFC 9162 tree, signed checkpoints, add-checkpoint bodies."""

from __future__ import annotations

import base64
from collections.abc import Sequence

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
