"""The lies of the lying-server tests (test_lying_server.py): what an honest client knows
about a real log (``Scene``), what it asks (``OPS``), and each lie the proxy can tell
(``LIES``), with the check that must catch it and the operations it must break.

Some lies are made with the log's REAL signing key (a dishonest dealer rather than a man in
the middle): every signature and audit path then verifies, and only the content check of
``verify_hand`` can catch them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairdeck.client.models import Hand
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.logentry import CommitEntry, RevealEntry, decode
from fairdeck.log.note import Signer
from fairdeck.v1 import audit_pb2 as pb
from tests.support.logs import sign_tree
from tests.support.lying_proxy import Forward, LieFn


@dataclass
class Scene:
    """A real dealer's log and what an honest client knows about it."""

    data_dir: Path
    signer: Signer
    """The log's real key: the lies marked "key holder" use it."""
    vkey: str
    closed: Hand
    """A hand opened and closed; its reveal is not the last entry."""
    opened_commitment: bytes
    still_open: Hand
    old: Checkpoint
    """A checkpoint the client saw earlier (for consistency)."""
    older_note: bytes
    """A signed checkpoint of an even smaller tree."""
    head_size: int


# -- what the client is asked --------------------------------------------------------------------------

Op = Callable[[Any, Scene], Any]
"""Calls one method of an AuditClient or AsyncAuditClient (returning an awaitable for the latter)."""

OPS: dict[str, Op] = {
    "verify_hand": lambda log, s: log.verify_hand(s.closed, commitment=s.opened_commitment),
    "verify_open_hand": lambda log, s: log.verify_hand(s.still_open),
    "inclusion_proof": lambda log, s: log.inclusion_proof(s.closed.reveal_receipt.index),  # type: ignore[union-attr]
    "inclusion_by_hand": lambda log, s: log.inclusion_proof(hand_id=s.closed.hand_id, reveal=True),
    "consistency": lambda log, s: log.consistency(s.old),
    "checkpoint": lambda log, s: log.checkpoint(),
}
PROOF_OPS = ("verify_hand", "verify_open_hand", "inclusion_proof", "inclusion_by_hand")

# -- the lies ------------------------------------------------------------------------------------------------

Alter = Callable[[Scene, Any, Any], None]
"""Changes a response in place, given the scene and the request."""


def on(methods: tuple[str, ...], alter: Alter, scene: Scene) -> LieFn:
    async def lie(method: str, request: Any, forward: Forward) -> Any:
        response = await forward(request)
        if method in methods:
            alter(scene, request, response)
        return response

    return lie


def _flip_bit(data: bytes, at: int = 0) -> bytes:
    b = bytearray(data)
    b[at] ^= 0x01
    return bytes(b)


def _note_lines(note: bytes) -> list[str]:
    return note.decode().split("\n")


def _with_line(note: bytes, number: int, new: str) -> bytes:
    lines = _note_lines(note)
    lines[number] = new
    return "\n".join(lines).encode()


def alter_root_line(s: Scene, req: Any, r: Any) -> None:
    root = base64.b64decode(_note_lines(r.signed_checkpoint)[2])
    r.signed_checkpoint = _with_line(r.signed_checkpoint, 2, base64.b64encode(_flip_bit(root, 31)).decode())


def alter_size_line(s: Scene, req: Any, r: Any) -> None:
    size = int(_note_lines(r.signed_checkpoint)[1])
    r.signed_checkpoint = _with_line(r.signed_checkpoint, 1, str(size + 1))


def alter_signature(s: Scene, req: Any, r: Any) -> None:
    lines = _note_lines(r.signed_checkpoint)
    prefix, _, sig64 = lines[4].rpartition(" ")
    sig = _flip_bit(base64.b64decode(sig64), 10)  # past the 4-byte key id: the Ed25519 signature
    r.signed_checkpoint = _with_line(r.signed_checkpoint, 4, f"{prefix} {base64.b64encode(sig).decode()}")


def sign_by_impostor(s: Scene, req: Any, r: Any) -> None:
    """Same origin, another key: what a man in the middle can sign."""
    lines = _note_lines(r.signed_checkpoint)
    impostor = Signer.from_seed(s.signer.name, bytes(32))
    r.signed_checkpoint = sign_tree(impostor, int(lines[1]), base64.b64decode(lines[2]))


def flip_proof_hash(s: Scene, req: Any, r: Any) -> None:
    r.hashes[len(r.hashes) // 2] = _flip_bit(r.hashes[len(r.hashes) // 2], 5)


def drop_proof_hash(s: Scene, req: Any, r: Any) -> None:
    del r.hashes[-1]


def extra_proof_hash(s: Scene, req: Any, r: Any) -> None:
    r.hashes.append(bytes(32))


def short_proof_hash(s: Scene, req: Any, r: Any) -> None:
    r.hashes[0] = r.hashes[0][:31]


def wrong_tree_size_field(s: Scene, req: Any, r: Any) -> None:
    r.tree_size += 1


def old_checkpoint_for_proof(s: Scene, req: Any, r: Any) -> None:
    """The proof of the head, with an older (valid) signed checkpoint."""
    r.signed_checkpoint = s.older_note


def old_checkpoint_and_size_for_proof(s: Scene, req: Any, r: Any) -> None:
    """An older (valid) signed checkpoint and its size, with the head's proof."""
    r.signed_checkpoint = s.older_note
    r.tree_size = 20


def alter_entry_commitment(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, CommitEntry):
        changed = CommitEntry(e.time_ms, e.hand_id, e.version, e.deck, _flip_bit(e.commitment, 7))
        r.entry = changed.encode()
    else:
        r.entry = _flip_bit(r.entry, len(r.entry) - 1)  # the deck digest's last byte


def older_checkpoint_for_consistency(s: Scene, req: Any, r: Any) -> None:
    """A valid, older head: the log seems to have shrunk below what the client saw."""
    r.signed_checkpoint = s.older_note
    r.second_tree_size = 20


# Lies made with the log's REAL key: signatures and paths verify, contents do not.


def _root_from_path(index: int, size: int, leaf: bytes, proof: list[bytes]) -> bytes:
    """The root an inclusion proof leads to (RFC 9162 section 2.1.3.2)."""
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if fn & 1 or fn == sn:
            r = merkle.node_hash(p, r)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            r = merkle.node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return r


def _resign_for_entry(s: Scene, r: Any, entry: bytes) -> None:
    """Replace the entry and sign, with the real key, the root its path now leads to."""
    r.entry = entry
    root = _root_from_path(r.index, r.tree_size, merkle.leaf_hash(entry), list(r.hashes))
    r.signed_checkpoint = sign_tree(s.signer, r.tree_size, root)


def key_holder_other_commitment(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, CommitEntry):
        other = CommitEntry(e.time_ms, e.hand_id, e.version, e.deck, _flip_bit(e.commitment, 7))
        _resign_for_entry(s, r, other.encode())


def key_holder_other_deck(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, RevealEntry):
        other = RevealEntry(e.time_ms, e.hand_id, e.outcome, e.server_seed, e.client_seeds, bytes(32))
        _resign_for_entry(s, r, other.encode())


def key_holder_other_seed(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, RevealEntry):
        seed = bytes(reversed(e.server_seed))
        _resign_for_entry(
            s, r, RevealEntry(e.time_ms, e.hand_id, e.outcome, seed, e.client_seeds, e.deck_digest).encode()
        )


def key_holder_other_client_seeds(s: Scene, req: Any, r: Any) -> None:
    e = decode(r.entry)
    if isinstance(e, RevealEntry):
        seeds = (*e.client_seeds, b"extra seat")
        _resign_for_entry(
            s, r, RevealEntry(e.time_ms, e.hand_id, e.outcome, e.server_seed, seeds, e.deck_digest).encode()
        )


def key_holder_fork(s: Scene, req: Any, r: Any) -> None:
    """A different head signed with the real key: the log forked after what the client saw."""
    lines = _note_lines(r.signed_checkpoint)
    r.signed_checkpoint = sign_tree(s.signer, int(lines[1]), _flip_bit(base64.b64decode(lines[2]), 0))


def other_entry(scene_index: Callable[[Scene], int], *, admit_index: bool) -> Callable[[Scene], LieFn]:
    """Answer a proof request with the (valid, signed) proof of another entry;
    ``admit_index``: say which entry it is (else claim it is the one asked for)."""

    def make(s: Scene) -> LieFn:
        async def lie(method: str, request: Any, forward: Forward) -> Any:
            if method != "GetInclusionProof":
                return await forward(request)
            asked = request.index
            other = pb.GetInclusionProofRequest(index=scene_index(s), kind=request.kind)
            response = await forward(other)
            if not admit_index and request.WhichOneof("entry") == "index":
                response.index = asked
            return response

        return lie

    return make


def consistency_for_other_size(s: Scene) -> LieFn:
    async def lie(method: str, request: Any, forward: Forward) -> Any:
        if method == "GetConsistencyProof":
            request.first_tree_size -= 1  # a valid proof, from the wrong old tree
        return await forward(request)

    return lie


@dataclass(frozen=True)
class Lie:
    says: str
    """What the VerificationError must say: the check that caught the lie."""
    make: Callable[[Scene], LieFn]
    breaks: tuple[str, ...]
    """The operations that must raise VerificationError under this lie."""


NOTE_METHODS = ("GetCheckpoint", "GetInclusionProof", "GetConsistencyProof")
ALL_OPS = tuple(OPS)


def _on(methods: tuple[str, ...], alter: Alter) -> Callable[[Scene], LieFn]:
    return lambda s: on(methods, alter, s)


ENTRY_OF_ANOTHER_HAND = other_entry(lambda s: s.closed.commit_receipt.index - 1, admit_index=True)

LIES: dict[str, Lie] = {
    # proof hashes
    "flip a proof hash bit": Lie(
        "is not in the signed tree: inclusion proof does not lead to the root",
        _on(("GetInclusionProof",), flip_proof_hash),
        PROOF_OPS,
    ),
    "drop a proof hash": Lie(
        "inclusion proof has 4 hashes, want 5", _on(("GetInclusionProof",), drop_proof_hash), PROOF_OPS
    ),
    "add a proof hash": Lie(
        "inclusion proof has 6 hashes, want 5", _on(("GetInclusionProof",), extra_proof_hash), PROOF_OPS
    ),
    "short proof hash": Lie("proof[0] is 31 bytes", _on(("GetInclusionProof",), short_proof_hash), PROOF_OPS),
    "flip a consistency hash bit": Lie(
        "the log at 42 does not extend the log at 34",
        _on(("GetConsistencyProof",), flip_proof_hash),
        ("consistency",),
    ),
    "drop a consistency hash": Lie(
        "the log at 42 does not extend the log at 34",
        _on(("GetConsistencyProof",), drop_proof_hash),
        ("consistency",),
    ),
    "consistency from another size": Lie(
        "the log at 42 does not extend the log at 34", consistency_for_other_size, ("consistency",)
    ),
    # the signed checkpoint
    "checkpoint root": Lie("invalid signature by known key", _on(NOTE_METHODS, alter_root_line), ALL_OPS),
    "checkpoint size": Lie("invalid signature by known key", _on(NOTE_METHODS, alter_size_line), ALL_OPS),
    "checkpoint signature": Lie(
        "invalid signature by known key", _on(NOTE_METHODS, alter_signature), ALL_OPS
    ),
    "checkpoint by another key": Lie(
        "no signature by a known key", _on(NOTE_METHODS, sign_by_impostor), ALL_OPS
    ),
    "proof tree size field": Lie(
        "proof is for tree size 43, the checkpoint signs 42",
        _on(("GetInclusionProof",), wrong_tree_size_field),
        PROOF_OPS,
    ),
    "old checkpoint with the proof": Lie(
        "proof is for tree size 42, the checkpoint signs 20",
        _on(("GetInclusionProof",), old_checkpoint_for_proof),
        PROOF_OPS,
    ),
    "old checkpoint and size with the proof": Lie(
        "is not below the tree size 20",
        _on(("GetInclusionProof",), old_checkpoint_and_size_for_proof),
        PROOF_OPS,
    ),
    "old checkpoint for consistency": Lie(
        "the log shrank from 34 to 20 entries",
        _on(("GetConsistencyProof",), older_checkpoint_for_consistency),
        ("consistency",),
    ),
    # another entry
    "proof of another index, admitted": Lie(
        "the proof is for entry 33",
        ENTRY_OF_ANOTHER_HAND,
        ("verify_hand", "verify_open_hand", "inclusion_proof"),
    ),
    "proof of another index, claimed as asked": Lie(
        "is not in the signed tree",
        other_entry(lambda s: s.closed.commit_receipt.index - 1, admit_index=False),
        ("verify_hand", "verify_open_hand", "inclusion_proof"),
    ),
    "entry bytes altered": Lie(
        "is not in the signed tree", _on(("GetInclusionProof",), alter_entry_commitment), PROOF_OPS
    ),
    # the dealer itself, with its real key
    "key holder: other commitment": Lie(
        "the logged commitment is not the one the dealer published",
        _on(("GetInclusionProof",), key_holder_other_commitment),
        ("verify_hand", "verify_open_hand"),
    ),
    "key holder: other deck digest": Lie(
        "the logged reveal differs from the transcript",
        _on(("GetInclusionProof",), key_holder_other_deck),
        ("verify_hand",),
    ),
    "key holder: other seed": Lie(
        "the logged reveal differs from the transcript",
        _on(("GetInclusionProof",), key_holder_other_seed),
        ("verify_hand",),
    ),
    "key holder: other client seeds": Lie(
        "the logged reveal differs from the transcript",
        _on(("GetInclusionProof",), key_holder_other_client_seeds),
        ("verify_hand",),
    ),
    "key holder: forked head": Lie(
        "the log at 42 does not extend the log at 34",
        _on(("GetConsistencyProof",), key_holder_fork),
        ("consistency",),
    ),
}
