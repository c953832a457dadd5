"""Transparency log checkpoints (https://c2sp.org/tlog-checkpoint).

A checkpoint is the signed head of the log: a signed note (``fairdeck.log.note``) whose text is
the origin (non-empty), the tree size in canonical decimal, the root hash in standard base64,
and optional non-empty extension lines, each ending in a newline. ``Checkpoint.parse`` accepts
only that canonical form, so one checkpoint has one text and one signature covers it
(docs/log-format.md, "Signed checkpoints").

>>> from fairdeck.log.merkle import EMPTY_ROOT
>>> from fairdeck.log.note import Signer
>>> cp = Checkpoint("example.com/fairdeck", 0, EMPTY_ROOT)
>>> print(cp.to_text(), end="")
example.com/fairdeck
0
47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=
>>> signer = Signer.from_seed("example.com/fairdeck", bytes(32))
>>> signed = sign_checkpoint(cp, signer)
>>> open_checkpoint(signed, signer.verifier, "example.com/fairdeck") == cp
True
>>> Checkpoint.parse("example.com/fairdeck\\n01\\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\\n")
Traceback (most recent call last):
    ...
fairdeck.log.checkpoint.CheckpointError: tree size '01' is not a canonical decimal number
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass

from fairdeck.log.merkle import HASH_SIZE, MAX_TREE_SIZE
from fairdeck.log.note import NoteError, Signer, Verifier, open_note, sign_note

_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")
_CONTROL = re.compile(r"[\x00-\x1f]")  # newline included: it ends lines, never sits in one


class CheckpointError(Exception):
    """A checkpoint that is malformed, not signed by the log's key, or for another log."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The log's tree head: its origin, the tree size and the root hash at that size."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line("origin", self.origin)
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise CheckpointError(f"tree size must be an integer, got {type(self.size).__name__}")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise CheckpointError(f"tree size {self.size} is outside 0..2**64-1")
        if not isinstance(self.root, bytes) or len(self.root) != HASH_SIZE:
            raise CheckpointError(f"root hash must be {HASH_SIZE} bytes")
        if not isinstance(self.extensions, tuple):
            raise CheckpointError("extensions must be a tuple of lines")
        for line in self.extensions:
            _check_line("extension line", line)

    def to_text(self) -> str:
        """The note text: origin, size, base64 root, extension lines, each ending in a newline."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode("ascii"), *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Parse a checkpoint's note text; raise CheckpointError unless it is canonical."""
        if not isinstance(text, str):
            raise CheckpointError("checkpoint text must be a string")
        if not text.endswith("\n"):
            raise CheckpointError("checkpoint text must end in a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise CheckpointError(f"checkpoint has {len(lines)} lines, want origin, size and root hash")
        origin, size_text, root_text, *extensions = lines
        for number, line in enumerate(lines, start=1):
            if not line:
                raise CheckpointError(f"checkpoint line {number} is empty")
        if not _DECIMAL.fullmatch(size_text):
            raise CheckpointError(f"tree size {size_text[:24]!r} is not a canonical decimal number")
        size = int(size_text)
        if size > MAX_TREE_SIZE:
            raise CheckpointError(f"tree size {size_text} is beyond 2**64-1")
        try:
            root = base64.b64decode(root_text, validate=True)
        except (binascii.Error, ValueError):
            raise CheckpointError("root hash is not valid base64") from None
        if base64.b64encode(root).decode("ascii") != root_text:
            raise CheckpointError("root hash is not canonical base64")
        if len(root) != HASH_SIZE:
            raise CheckpointError(f"root hash is {len(root)} bytes, want {HASH_SIZE}")
        return cls(origin, size, root, tuple(extensions))


def _check_line(what: str, line: str) -> None:
    if not isinstance(line, str):
        raise CheckpointError(f"{what} must be a string")
    if not line:
        raise CheckpointError(f"{what} must not be empty")
    if (m := _CONTROL.search(line)) is not None:
        raise CheckpointError(f"{what} contains the control character U+{ord(m.group()):04X}")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        raise CheckpointError(f"{what} is not valid Unicode") from None


def sign_checkpoint(checkpoint: Checkpoint, signer: Signer) -> bytes:
    """The signed note of the checkpoint (the key name should be the origin)."""
    try:
        return sign_note(checkpoint.to_text(), signer)
    except NoteError as e:
        raise CheckpointError(f"cannot sign checkpoint: {e}") from e


def open_checkpoint(note: bytes, verifier: Verifier | Iterable[Verifier], origin: str) -> Checkpoint:
    """Verify a signed checkpoint by the log's key (or any of its keys, across a rotation) and parse it.

    Raises CheckpointError (with the NoteError as its cause when the note itself
    fails) unless ``verifier`` signed it, it is canonical, and its origin is ``origin``.
    """
    try:
        opened = open_note(note, verifier)
    except NoteError as e:
        raise CheckpointError(f"checkpoint note: {e}") from e
    checkpoint = Checkpoint.parse(opened.text)
    if checkpoint.origin != origin:
        raise CheckpointError(f"checkpoint is for origin {checkpoint.origin!r}, want {origin!r}")
    return checkpoint
