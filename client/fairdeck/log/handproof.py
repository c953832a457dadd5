"""One-file hand proofs: everything a player needs to check a hand offline, with the log's
public key alone.

A hand proof is one JSON object: the hand's transcript, the cards dealt, and the receipts of its
commit and reveal entries to one signed checkpoint: receipt objects in format 1, C2SP tlog-proof
texts in format 2 (``fairdeck.log.tlog_proof``; docs/hand-proof.md), and format 3 adds the log key
rotation statements that lead to the checkpoint's key. Its ``log_key`` is for display only: a
verifier takes the key from its user, never from the file, and follows only statements that
verify. ``HandProof.verify`` checks in the order of docs/hand-proof.md, "The checks, in order"
(``format``, ``commitment``, ``deck``, ``cards``, ``entries``, ``rotations``, ``checkpoint``,
``inclusion``, ``cosignatures``), and a failure names its step.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairdeck.core import strictjson
from fairdeck.core.errors import VerificationError
from fairdeck.core.transcript import Transcript
from fairdeck.core.verify import verify as verify_transcript
from fairdeck.log import merkle, tlog_proof
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.cosignature import CosignatureError, WitnessPolicy
from fairdeck.log.logentry import CommitEntry, EntryError, RevealEntry, deck_digest, decode
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import InclusionProof, open_signed_checkpoint
from fairdeck.log.rotation import MAX_CHAIN, RotationError, check_chain, followed_keys

TYPE = "fairdeck-hand-proof"
FORMAT = 1
"""The format written by default: the one every verifier reads, those made before format 2 included
(saved or hosted copies of the browser page, pinned @fairdeck/verifier): docs/hand-proof.md,
"Format 1 stays the default"."""
FORMATS = (1, 2, 3)
CODEAL_FORMAT = 4
"""A co-dealt hand's proof (docs/hand-proof.md, "Format 4"), read by ``fairdeck.codeal.handfile``."""
LOGGED_CODEAL_FORMAT = 5
"""A co-dealt hand's proof with its log receipts and seal statements (docs/hand-proof.md, "Format
5"), read by ``fairdeck.codeal.logged_proof``."""
CODEAL_FORMATS = (CODEAL_FORMAT, LOGGED_CODEAL_FORMAT)
ROTATED = 3
"""The format that carries key rotation statements (``key_rotations``): written when the checkpoint's
key was rotated to, so that a player who holds an older key can follow the statements to it."""
MAX_BYTES = 1024 * 1024  # an 8-deck shoe's transcript and two receipts are far below this
STEPS = (
    "format", "commitment", "deck", "cards", "entries", "rotations", "checkpoint", "inclusion", "cosignatures"
)  # fmt: skip
_KEYS = {"type", "format", "transcript", "dealt", "commit", "reveal", "log_key"}
_KEYS_3 = _KEYS | {"key_rotations"}


def _fail(step: str, message: str) -> VerificationError:
    return VerificationError(step, message)


def check_receipts(
    receipts: Sequence[tuple[str, InclusionProof]],
    key_rotations: Sequence[bytes],
    verifier: Verifier | Sequence[Verifier],
) -> Checkpoint:
    """Steps ``rotations``, ``checkpoint`` and ``inclusion`` of a hand proof's named receipts (formats
    1 to 3: commit and reveal; format 5: a co-dealt hand's setup, seals and seeds): the statements
    lead to the last receipt's checkpoint, every receipt names that same signed checkpoint, it
    verifies under a key given or one the statements lead to, and each entry is in its tree."""
    note = receipts[-1][1].signed_checkpoint
    try:
        chain = check_chain(key_rotations, note)
    except RotationError as e:
        raise _fail("rotations", str(e)) from None
    keys = followed_keys([verifier] if isinstance(verifier, Verifier) else verifier, chain)
    if any(r.signed_checkpoint != note for _, r in receipts):
        count = "two" if len(receipts) == 2 else str(len(receipts))
        raise _fail("checkpoint", f"the {count} receipts lead to different checkpoints")
    try:
        checkpoint = open_signed_checkpoint(note, keys)
    except VerificationError as e:
        raise _fail("checkpoint", e.detail) from None
    for name, receipt in receipts:
        if receipt.tree_size != checkpoint.size:
            raise _fail("inclusion", f"the {name} receipt is for tree size {receipt.tree_size}")
        try:
            merkle.verify_inclusion(
                receipt.index,
                checkpoint.size,
                merkle.leaf_hash(receipt.entry),
                receipt.hashes,
                checkpoint.root,
            )
        except merkle.ProofError as e:
            raise _fail("inclusion", f"the {name} entry is not in the signed tree: {e}") from None
    return checkpoint


def read_value(text: str | bytes) -> Any:
    """A hand proof's bytes, read once under strictjson's rules (at most ``MAX_BYTES``): its value,
    numbers as their text; or VerificationError at step ``format``. Every format starts here."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if len(raw) > MAX_BYTES:
        raise _fail("format", f"a hand proof is at most {MAX_BYTES} bytes")
    try:
        return strictjson.loads(raw)
    except strictjson.StrictJSONError as e:
        raise _fail("format", f"not a hand proof: {e}") from None


def format_of(value: Any) -> int | None:
    """The ``format`` of a hand proof's value when it is one (the type right, the format a plain
    whole number), else None: what a verifier dispatches on (4 and 5: a co-dealt hand)."""
    if not isinstance(value, dict) or value.get("type") != TYPE:
        return None
    fmt = value.get("format")
    if not isinstance(fmt, strictjson.Number) or not re.fullmatch(r"0|[1-9][0-9]{0,5}", fmt.text):
        return None
    return int(fmt.text)


@dataclass(frozen=True)
class HandProof:
    transcript: Transcript
    dealt: tuple[str, ...]
    commit: InclusionProof
    reveal: InclusionProof
    log_key: str
    format: int = FORMAT
    key_rotations: tuple[bytes, ...] = ()
    """Format 3: the signed notes of the statements from the log's first key to the checkpoint's."""

    def to_dict(self) -> dict[str, Any]:
        if self.format >= 2:
            commit: Any = tlog_proof.to_text(self.commit)
            reveal: Any = tlog_proof.to_text(self.reveal)
        else:
            commit, reveal = json.loads(self.commit.to_json()), json.loads(self.reveal.to_json())
        d = {
            "type": TYPE,
            "format": self.format,
            "transcript": self.transcript.to_dict(),
            "dealt": list(self.dealt),
            "commit": commit,
            "reveal": reveal,
            "log_key": self.log_key,
        }
        if self.format == ROTATED:
            d["key_rotations"] = [note.decode("utf-8") for note in self.key_rotations]
        return d

    def as_format(self, fmt: int) -> HandProof:
        """The same proof, written in format ``fmt`` (1, 2 or 3; 1 and 2 without the statements)."""
        if fmt not in FORMATS:
            raise ValueError(f"hand proof formats are {FORMATS}, not {fmt}")
        return dataclasses.replace(
            self, format=fmt, key_rotations=self.key_rotations if fmt == ROTATED else ()
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> HandProof:
        """Read strictly (strictjson's rules: no duplicate names, UTF-8, a size limit); step ``format``."""
        return cls.from_value(read_value(text))

    @classmethod
    def from_value(cls, d: Any) -> HandProof:
        """A hand proof of format 1, 2 or 3 from its strict JSON value (``read_value``); step ``format``."""
        if not isinstance(d, dict) or d.get("type") != TYPE:
            raise _fail("format", f'not a hand proof: want an object with "type": "{TYPE}"')
        fmt = d.get("format")
        if not isinstance(fmt, strictjson.Number) or fmt.text not in ("1", "2", "3"):
            shown = fmt.text if isinstance(fmt, strictjson.Number) else repr(fmt)[:20]
            raise _fail("format", f"unknown hand proof format {shown}; this verifier reads 1 to 5")
        names = _KEYS_3 if fmt.text == "3" else _KEYS
        if set(d) != names:
            raise _fail("format", f"a hand proof of format {fmt.text} has exactly the names {sorted(names)}")
        # The parts are read by their own strict readers from the strict value itself, numbers
        # still as their text: a receipt's "index": -0 is not plain digits, here as in a receipt.
        try:
            transcript = Transcript.from_dict(d["transcript"])
        except VerificationError as e:
            raise _fail("format", f"transcript: {e.detail}") from None
        dealt = d["dealt"]
        if not isinstance(dealt, list) or not all(isinstance(c, str) for c in dealt):
            raise _fail("format", "dealt must be a list of card codes")
        if not isinstance(d["log_key"], str):
            raise _fail("format", "log_key must be a string")
        receipts = []
        for name in ("commit", "reveal"):
            try:
                if fmt.text != "1":
                    if not isinstance(d[name], str):
                        raise _fail("format", f"in format {fmt.text}, {name} is a tlog-proof text")
                    receipts.append(tlog_proof.parse(d[name]))
                else:
                    receipts.append(InclusionProof.from_value(d[name]))
            except VerificationError as e:
                raise _fail("format", f"{name}: {e.detail}") from None
        rotations = d.get("key_rotations", [])
        if not isinstance(rotations, list) or not all(isinstance(n, str) for n in rotations):
            raise _fail(
                "format", "key_rotations must be a list of rotation statements, each a signed note's text"
            )
        if len(rotations) > MAX_CHAIN:
            raise _fail("format", f"a hand proof carries at most {MAX_CHAIN} key rotation statements")
        notes = tuple(n.encode("utf-8") for n in rotations)
        return cls(transcript, tuple(dealt), receipts[0], receipts[1], d["log_key"], int(fmt.text), notes)

    def verify(
        self, verifier: Verifier | Sequence[Verifier], policy: WitnessPolicy | None = None
    ) -> Checkpoint:
        """Every check, in the order of docs/hand-proof.md; the checkpoint the entries are in. The
        keys are the user's; the file's statements only add a key that one of them leads to."""
        t = self.transcript
        verify_transcript(t)  # raises at "commitment" or "deck" (and "version" for an unknown one)
        deck = t.codes()
        if len(self.dealt) > len(deck):
            raise _fail("cards", f"{len(self.dealt)} cards dealt from a deck of {len(deck)}")
        for position, (code, want) in enumerate(zip(self.dealt, deck, strict=False)):
            if code != want:
                raise _fail(
                    "cards",
                    f"card {position + 1} dealt was {code[:8]!r}; the re-derived deck has {want} there",
                )
        self._check_entries()
        checkpoint = check_receipts(
            [("commit", self.commit), ("reveal", self.reveal)], self.key_rotations, verifier
        )
        if policy is not None:
            try:
                policy.require(self.reveal.signed_checkpoint)
            except CosignatureError as e:
                raise _fail("cosignatures", str(e)) from None
        return checkpoint

    def _check_entries(self) -> None:
        t = self.transcript
        try:
            commit, reveal = decode(self.commit.entry), decode(self.reveal.entry)
        except EntryError as e:
            raise _fail("entries", f"a log entry does not parse: {e}") from None
        if not isinstance(commit, CommitEntry) or commit.hand_id != t.hand_id:
            raise _fail("entries", "the commit receipt is not of this hand's commitment")
        if not hmac.compare_digest(commit.commitment, t.commitment) or (commit.deck, commit.version) != (
            t.deck,
            t.version,
        ):
            raise _fail("entries", "the logged commitment is not the transcript's")
        if not isinstance(reveal, RevealEntry) or reveal.hand_id != t.hand_id:
            raise _fail("entries", "the reveal receipt is not of this hand's reveal")
        if (
            not hmac.compare_digest(reveal.server_seed, t.server_seed)
            or reveal.client_seeds != t.client_seeds
            or not hmac.compare_digest(reveal.deck_digest, deck_digest(t.cards))
        ):
            raise _fail("entries", "the logged reveal differs from the transcript")
