"""A small log for the vectors: entries of a fixed text, their stored hashes as
fairdeck.log.merkle lays them out, roots and add-checkpoint request bodies (tlog-witness);
and base64 as the log's files write it. The witness and hand-proof vectors use it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.note import Signer


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Tree:
    """A log of entries b"witness vector entry N", its stored hashes as merkle lays them out."""

    def __init__(self, size: int, tag: bytes = b"witness vector entry") -> None:
        self.hashes: list[bytes] = []
        for n in range(size):
            leaf = merkle.leaf_hash(tag + b" %d" % n)
            self.hashes += merkle.stored_hashes_for_append(n, leaf, self.read)

    def read(self, indexes: Sequence[int]) -> list[bytes]:
        return [self.hashes[i] for i in indexes]

    def root(self, size: int) -> bytes:
        return merkle.tree_hash(size, self.read)

    def body(self, old: int, size: int, signer: Signer, proof: Sequence[bytes] | None = None) -> bytes:
        """An add-checkpoint request body (tlog-witness, "add-checkpoint")."""
        if proof is None:
            proof = [] if old in (0, size) else merkle.prove_consistency(old, size, self.read)
        head = f"old {old}\n" + "".join(b64(h) + "\n" for h in proof) + "\n"
        return head.encode() + sign_checkpoint(Checkpoint(signer.name, size, self.root(size)), signer)
