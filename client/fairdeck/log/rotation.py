"""Log key rotation statements: the old key vouches for the new one (docs/log-format.md, "Key rotation").

A statement is a C2SP signed note whose text is four lines::

    fairdeck log key rotation v1
    <origin>
    <old verifier key>
    <new verifier key>

signed by the old key and by the new key; it never parses as a checkpoint, nor the reverse.
``follow`` takes the keys a verifier trusts and any statements, and returns the keys they lead to,
old to new only. A hand proof carries the chain to its checkpoint's key (``chain_to``), checked
strictly (``check_chain``) before its keys are followed (``followed_keys``).

>>> from fairdeck.log.note import Signer
>>> old, new = Signer.generate("example.log"), Signer.generate("example.log")
>>> note = sign_rotation(old, new)
>>> keys, followed = follow([old.verifier], [note])
>>> keys == [old.verifier, new.verifier], followed[0].new == new.verifier
(True, True)
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fairdeck.log.note import NoteError, Signer, Verifier, open_note, sign_note

HEADER = "fairdeck log key rotation v1"
"""The statement's first line."""
ROTATIONS_FILE = "key-rotations"
"""The file beside a tiled log's ``checkpoint`` that holds its statements (``rotations_file``)."""


class RotationError(NoteError):
    """A note that claims to be a rotation statement and is not a valid one."""


@dataclass(frozen=True)
class Rotation:
    """A verified statement: ``old`` names ``new`` as the log's signing key from now on."""

    old: Verifier
    new: Verifier
    note: bytes

    def describe(self) -> str:
        return f"{_short(self.old)} -> {_short(self.new)}"


def rotation_text(old: Verifier, new: Verifier) -> str:
    return f"{HEADER}\n{old.name}\n{old.to_string()}\n{new.to_string()}\n"


def sign_rotation(old: Signer, new: Signer) -> bytes:
    """The statement that ``old`` hands the log over to ``new``, signed by both (old first)."""
    if old.name != new.name:
        raise RotationError("a rotation keeps the log's origin: both keys need the same name")
    if old.key_id == new.key_id:
        raise RotationError("a rotation needs a new key")
    return sign_note(rotation_text(old.verifier, new.verifier), old, new)


def is_rotation(note: bytes) -> bool:
    """Whether ``note`` claims to be a rotation statement (its first line is the header)."""
    return note.startswith(HEADER.encode() + b"\n")


def open_rotation(note: bytes) -> Rotation:
    """Parse and verify a statement: four lines as above, the origin the keys' name, two different
    keys, a valid signature by each. Raise RotationError."""
    text = note.decode("utf-8", "replace")
    lines = text[: text.find("\n\n") + 1].split("\n")
    if len(lines) != 5 or lines[0] != HEADER or lines[4] != "":
        raise RotationError("a rotation statement is four lines: header, origin, old key, new key")
    try:
        old, new = Verifier.parse(lines[2]), Verifier.parse(lines[3])
    except NoteError as e:
        raise RotationError(f"rotation statement: {e}") from None
    if not old.name == new.name == lines[1]:
        raise RotationError("rotation statement: both keys must be named for the origin line")
    if old.key_id == new.key_id:
        raise RotationError("rotation statement: the new key is the old key")
    for key, which in ((old, "old"), (new, "new")):
        try:
            opened = open_note(note, key)
        except NoteError as e:
            raise RotationError(f"rotation statement is not signed by the {which} key: {e}") from None
        if opened.text != rotation_text(old, new):
            raise RotationError("rotation statement: the signed text is not the statement")
    return Rotation(old, new, note)


def follow(trusted: Sequence[Verifier], notes: Iterable[bytes]) -> tuple[list[Verifier], list[Rotation]]:
    """The trusted keys, then every key a chain of valid statements leads to from them, in the
    order followed; and the statements followed. Statements that do not verify, or that start
    from a key not trusted, are left out (``open_rotation`` says why)."""
    keys = list(trusted)
    pending = []
    for note in notes:
        try:
            pending.append(open_rotation(note))
        except RotationError:
            continue
    followed: list[Rotation] = []
    moved = True
    while moved:
        moved = False
        for r in pending:
            if r.old in keys and r.new not in keys:
                keys.append(r.new)
                followed.append(r)
                moved = True
    return keys, followed


MAX_CHAIN = 64
"""The most statements a hand proof carries (docs/hand-proof.md, format 3): far more rotations than
a log makes, and a bound on what a verifier checks (two signatures each)."""


def _signs(key: Verifier, note: bytes) -> bool:
    try:
        open_note(note, key)
    except NoteError:
        return False
    return True


def chain_to(notes: Iterable[bytes], signed: bytes) -> list[Rotation]:
    """The valid statements that lead, one after the other, from the log's first key to the key
    that signed the note ``signed`` (a checkpoint), oldest first; empty when no valid statement
    names that key as the new one. At most the newest ``MAX_CHAIN``."""
    valid = []
    for note in notes:
        try:
            valid.append(open_rotation(note))
        except RotationError:
            continue
    current = next((r.new for r in valid if _signs(r.new, signed)), None)
    chain: list[Rotation] = []
    seen = {current}
    while current is not None:
        before = next((r for r in valid if r.new == current and r.old not in seen), None)
        if before is None:
            break
        chain.insert(0, before)
        seen.add(before.old)
        current = before.old
    return chain[-MAX_CHAIN:]


def check_chain(notes: Sequence[bytes], signed: bytes) -> list[Rotation]:
    """A hand proof's statements (docs/hand-proof.md, step ``rotations``): each a valid statement,
    each handing over from the key the one before handed over to, and the last one's new key a
    signer of the note ``signed``. Raise RotationError naming the statement that fails."""
    n = len(notes)
    chain: list[Rotation] = []
    for i, note in enumerate(notes, start=1):
        try:
            r = open_rotation(note)
        except RotationError as e:
            raise RotationError(f"key rotation statement {i} of {n}: {e}") from None
        if chain and r.old != chain[-1].new:
            raise RotationError(
                f"key rotation statement {i} of {n} does not follow statement {i - 1}: it hands over "
                f"from {_short(r.old)}, not from {_short(chain[-1].new)}"
            )
        chain.append(r)
    if chain:
        try:
            open_note(signed, chain[-1].new)
        except NoteError as e:
            raise RotationError(
                f"the key rotation statements lead to {_short(chain[-1].new)}, and the checkpoint "
                f"does not verify under it: {e}"
            ) from None
    return chain


def followed_keys(trusted: Sequence[Verifier], chain: Sequence[Rotation]) -> list[Verifier]:
    """The keys trusted, then each new key of ``chain`` (checked by ``check_chain``) from the first
    statement whose old key is trusted on: statements are followed from old to new only."""
    keys = list(trusted)
    for r in chain:
        if r.old in keys and r.new not in keys:
            keys.append(r.new)
    return keys


def reached_from(
    trusted: Sequence[Verifier], chain: Sequence[Rotation]
) -> dict[Verifier, tuple[Verifier, int]]:
    """For each key ``followed_keys`` adds: the trusted key it was reached from, and how many
    statements led there (what a verifier says when such a key signed)."""
    via: dict[Verifier, tuple[Verifier, int]] = {}
    keys = list(trusted)
    for r in chain:
        if r.old in keys and r.new not in keys:
            keys.append(r.new)
            via[r.new] = (r.old, 1) if r.old in trusted else (via[r.old][0], via[r.old][1] + 1)
    return via


def rotations_file(notes: Iterable[bytes]) -> bytes:
    """Statements as a text file: each one's note in standard base64, one per line."""
    return b"".join(base64.b64encode(note) + b"\n" for note in notes)


def read_rotations_file(data: bytes) -> list[bytes]:
    """The notes of ``rotations_file``; lines that are not base64 are skipped (``follow`` ignores
    anything that is not a valid statement anyway)."""
    out = []
    for line in data.splitlines():
        try:
            out.append(base64.b64decode(line.strip(), validate=True))
        except binascii.Error:
            continue
    return out


def _short(v: Verifier) -> str:
    return f"{v.name}+{v.key_id:08x}"
