"""Offline proof that a hand is in the transparency log (in the spirit of C2SP tlog-proof).

An ``InclusionProof`` holds an entry, its index, an RFC 9162 audit path and
the signed checkpoint it leads to. ``verify`` needs only the log's verifier
key: the checkpoint's signature, the audit path to its root, and, through
``check_hand``, that the entry says what the dealer told the game server (the
commitment seen at open; the seed, seeds and deck revealed at close). A proof
of some other entry is worthless, so the content check is not optional in
``verify_hand``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fairdeck.core import strictjson
from fairdeck.core.errors import VerificationError
from fairdeck.core.transcript import Transcript
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from fairdeck.log.cosignature import CosignatureError, WitnessPolicy
from fairdeck.log.logentry import CommitEntry, EntryError, RevealEntry, deck_digest, decode
from fairdeck.log.note import NoteError, Verifier


class HandView(Protocol):
    """What the entry checks read of a hand; the SDK's ``fairdeck.client.Hand`` is one.

    A protocol rather than the SDK's class, so that checking a receipt offline
    loads neither the SDK nor protobuf (the log imports only the core).
    """

    @property
    def hand_id(self) -> str: ...
    @property
    def deck(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def commitment(self) -> bytes: ...
    @property
    def transcript(self) -> Transcript | None: ...


def _fail(message: str) -> VerificationError:
    return VerificationError("log", message)


def key_list(verifier: Verifier | Sequence[Verifier]) -> list[Verifier]:
    """One key, or a list of keys (the log's keys across rotations), as a non-empty list."""
    keys = [verifier] if isinstance(verifier, Verifier) else list(verifier)
    if not keys:
        raise ValueError("no verifier key given")
    return keys


def open_signed_checkpoint(
    note: bytes,
    verifier: Verifier | Sequence[Verifier],
    origin: str | None = None,
    policy: WitnessPolicy | None = None,
) -> Checkpoint:
    """The checkpoint in a signed note, if it verifies under the log key (any of them: a list holds
    the keys of a rotation, every one used) and, with ``policy``, carries valid cosignatures of at
    least its threshold of witnesses (step ``cosignatures``)."""
    keys = key_list(verifier)
    try:
        checkpoint = open_checkpoint(note, keys, origin or keys[0].name)
    except (CheckpointError, NoteError) as e:
        raise _fail(f"checkpoint does not verify under the log key: {e}") from None
    if policy is not None:
        try:
            policy.require(note)
        except CosignatureError as e:  # PolicyError (too few) or a known witness's bad cosignature
            raise VerificationError("cosignatures", str(e)) from None
    return checkpoint


@dataclass(frozen=True)
class InclusionProof:
    index: int
    tree_size: int
    hashes: tuple[bytes, ...]
    entry: bytes
    signed_checkpoint: bytes

    def verify(
        self,
        verifier: Verifier | Sequence[Verifier],
        origin: str | None = None,
        *,
        policy: WitnessPolicy | None = None,
        parse_entry: bool = True,
    ) -> Checkpoint:
        """Check the receipt as docs/log-format.md ("The receipt") orders it: the signature (and,
        with ``policy``, the witnesses' cosignatures), the tree size, the audit path, then that
        the entry parses (unless ``parse_entry`` is false: a co-dealt entry, types 3 to 7, which
        ``fairdeck.codeal.entries`` reads). Return the checkpoint."""
        cp = open_signed_checkpoint(self.signed_checkpoint, verifier, origin, policy)
        if cp.size != self.tree_size:
            raise _fail(f"proof is for tree size {self.tree_size}, the checkpoint signs {cp.size}")
        try:
            merkle.verify_inclusion(self.index, cp.size, merkle.leaf_hash(self.entry), self.hashes, cp.root)
        except merkle.ProofError as e:
            raise _fail(f"entry {self.index} is not in the signed tree: {e}") from None
        if parse_entry:
            _decode(self.entry)
        return cp

    def to_json(self) -> str:
        return json.dumps(
            {
                "index": self.index,
                "tree_size": self.tree_size,
                "hashes": [base64.b64encode(h).decode() for h in self.hashes],
                "entry": base64.b64encode(self.entry).decode(),
                "signed_checkpoint": self.signed_checkpoint.decode("utf-8"),
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> InclusionProof:
        """Read a receipt's JSON strictly (docs/log-format.md, "The receipt"); raise VerificationError.

        The text rules are the transcript's (strictjson); exactly the five names;
        ``index`` and ``tree_size`` are JSON integers in 0..2**64-1 written as plain
        digits; hashes and entry are canonical standard base64 (RFC 4648 section 4).
        """
        try:
            d = strictjson.loads(text)
        except strictjson.StrictJSONError as e:
            raise _fail(f"malformed inclusion proof: {e}") from None
        return cls.from_value(d)

    @classmethod
    def from_value(cls, d: object) -> InclusionProof:
        """A receipt from a value ``strictjson.loads`` read (numbers kept as their text), as ``from_json``."""
        if not isinstance(d, dict) or set(d) != _RECEIPT_NAMES:
            raise _fail(f"malformed inclusion proof: want an object with exactly {sorted(_RECEIPT_NAMES)}")
        hashes = d["hashes"]
        if not isinstance(hashes, list):
            raise _fail("malformed inclusion proof: hashes must be a list")
        note = d["signed_checkpoint"]
        if not isinstance(note, str):
            raise _fail("malformed inclusion proof: signed_checkpoint must be a string")
        proof = tuple(_base64(h, f"hashes[{i}]") for i, h in enumerate(hashes))
        for i, h in enumerate(proof):
            if len(h) != merkle.HASH_SIZE:
                raise _fail(
                    f"malformed inclusion proof: hashes[{i}] is {len(h)} bytes, want {merkle.HASH_SIZE}"
                )
        return cls(
            index=_uint64(d["index"], "index"),
            tree_size=_uint64(d["tree_size"], "tree_size"),
            hashes=proof,
            entry=_base64(d["entry"], "entry"),
            signed_checkpoint=note.encode("utf-8"),
        )


_RECEIPT_NAMES = {"index", "tree_size", "hashes", "entry", "signed_checkpoint"}
_UINT = re.compile(r"0|[1-9][0-9]{0,19}")


def _uint64(value: object, name: str) -> int:
    if not isinstance(value, strictjson.Number) or not _UINT.fullmatch(value.text):
        raise _fail(f"malformed inclusion proof: {name} must be an integer written in plain digits")
    number = int(value.text)
    if number > merkle.MAX_TREE_SIZE:
        raise _fail(f"malformed inclusion proof: {name} is beyond 2**64-1")
    return number


def _base64(value: object, name: str) -> bytes:
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            pass
        else:
            if base64.b64encode(raw).decode("ascii") == value:
                return raw
    raise _fail(f"malformed inclusion proof: {name} must be canonical standard base64")


def check_commit_entry(entry_bytes: bytes, hand: HandView, commitment: bytes | None = None) -> None:
    """The entry is this hand's commitment, as published at open."""
    entry = _decode(entry_bytes)
    if not isinstance(entry, CommitEntry) or entry.hand_id != hand.hand_id:
        raise _fail(f"log entry is not the commitment of hand {hand.hand_id}")
    expected = hand.commitment if commitment is None else commitment
    if not hmac.compare_digest(entry.commitment, expected) or (entry.deck, entry.version) != (
        hand.deck,
        hand.version,
    ):
        raise _fail("the logged commitment is not the one the dealer published")


def check_reveal_entry(entry_bytes: bytes, hand: HandView) -> None:
    """The entry is this closed hand's reveal, matching its transcript."""
    t = hand.transcript
    if t is None:
        raise _fail("the hand is not closed")
    entry = _decode(entry_bytes)
    if not isinstance(entry, RevealEntry) or entry.hand_id != hand.hand_id:
        raise _fail(f"log entry is not the reveal of hand {hand.hand_id}")
    if (
        not hmac.compare_digest(entry.server_seed, t.server_seed)
        or entry.client_seeds != t.client_seeds
        or not hmac.compare_digest(entry.deck_digest, deck_digest(t.cards))
    ):
        raise _fail("the logged reveal differs from the transcript")


def _decode(data: bytes) -> CommitEntry | RevealEntry:
    try:
        return decode(data)
    except EntryError as e:
        raise _fail(f"log entry does not parse: {e}") from None


def verify_consistency(
    old: Checkpoint,
    new_note: bytes,
    hashes: tuple[bytes, ...],
    verifier: Verifier | Sequence[Verifier],
    policy: WitnessPolicy | None = None,
) -> Checkpoint:
    """The signed ``new_note`` extends ``old``; return the new checkpoint."""
    new = open_signed_checkpoint(new_note, verifier, old.origin, policy)
    if new.size < old.size:
        raise _fail(f"the log shrank from {old.size} to {new.size} entries")
    try:
        merkle.verify_consistency(old.size, new.size, hashes, old.root, new.root)
    except merkle.ProofError as e:
        raise _fail(f"the log at {new.size} does not extend the log at {old.size}: {e}") from None
    return new
