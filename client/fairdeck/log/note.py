"""Signed notes (https://c2sp.org/signed-note) with Ed25519 keys.

A note is text ending in a newline, a blank line, then one ``— name base64(key ID || signature)``
line per signature (docs/log-format.md, "Signed checkpoints"). Keys are written as Go's
``golang.org/x/mod/sumdb/note`` writes them, and ``open_note`` verifies as Go's ``note.Open``
does, with stricter parsing: a bad signature by a known key rejects the note, and at least one
known key must have signed it (docs/log-format.md, "Keys and notes in code").

>>> signer = Signer.from_seed("example.com/log", bytes(32))
>>> signer.verifier.to_string()
'example.com/log+1dde4531+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop'
>>> msg = sign_note("hello, world\\n", signer)
>>> print(msg.decode(), end="")
hello, world
<BLANKLINE>
— example.com/log Hd5FMZIrixwY3232udgxOH7G+E8NU8t5JnRmE8zpE+X5E52NY/fgnL5KOjD0SJlFxnoYBY7S+GkW0IzKkNMIInwRjgo=
>>> open_note(msg, [signer.verifier]).text
'hello, world\\n'
>>> open_note(msg.replace(b"hello", b"HELLO"), [signer.verifier])
Traceback (most recent call last):
    ...
fairdeck.log.note.InvalidSignatureError: invalid signature by known key example.com/log+1dde4531
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SIG_ED25519 = 0x01  # the signature type byte of Ed25519 keys
ED25519_KEY_BYTES = 32
ED25519_SIG_BYTES = 64
MAX_SIGNATURES = 100  # as Go; the spec asks verifiers to accept at least 16
MAX_NOTE_BYTES = 128 * 1024  # room for 16 post-quantum signatures of ~5 kB each
SIG_PREFIX = "\u2014 "  # em dash, space

_HASH16 = re.compile(r"[0-9a-f]{8}")
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")


class NoteError(Exception):
    """A note, or a note key, that is malformed or does not verify."""


class MalformedNoteError(NoteError):
    """The message is not a well-formed signed note."""


class InvalidSignatureError(NoteError):
    """A known key's signature on the note does not verify."""

    def __init__(self, name: str, key_id: int) -> None:
        super().__init__(f"invalid signature by known key {name}+{key_id:08x}")
        self.name = name
        self.key_id = key_id


class UnverifiedNoteError(NoteError):
    """The note is well formed but no known key signed it; ``note`` holds what was parsed."""

    def __init__(self, note: Note) -> None:
        keys = ", ".join(f"{s.name}+{s.key_id:08x}" for s in note.unverified_sigs)
        super().__init__(f"note has no signature by a known key (signed by: {keys or 'nobody'})")
        self.note = note


# --- keys ------------------------------------------------------------------------------------------


def is_valid_key_name(name: str) -> bool:
    """A key name is non-empty UTF-8 with no Unicode space and no ``+``."""
    if not isinstance(name, str) or not name or "+" in name or any(c.isspace() for c in name):
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return False
    return _CONTROL.search(name) is None


def key_id(name: str, public_key: bytes) -> int:
    """The key ID of an Ed25519 key: ``SHA-256(name || 0x0A || 0x01 || public_key)[:4]``, big-endian."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([SIG_ED25519]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True, slots=True)
class Verifier:
    """A named Ed25519 public key that checks note signatures."""

    name: str
    key_id: int
    public_key: bytes
    _key: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not is_valid_key_name(self.name):
            raise NoteError(f"invalid key name {self.name!r}")
        if not isinstance(self.public_key, bytes) or len(self.public_key) != ED25519_KEY_BYTES:
            raise NoteError(f"an Ed25519 public key is {ED25519_KEY_BYTES} bytes")
        if self.key_id != key_id(self.name, self.public_key):
            raise NoteError(f"key ID does not match the name and key of {self.name}")
        try:
            key = Ed25519PublicKey.from_public_bytes(self.public_key)
        except ValueError as e:
            raise NoteError(f"invalid Ed25519 public key for {self.name}: {e}") from None
        object.__setattr__(self, "_key", key)

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> Verifier:
        """The verifier for a raw 32-byte Ed25519 public key."""
        if not is_valid_key_name(name):
            raise NoteError(f"invalid key name {name!r}")
        return cls(name, key_id(name, public_key), public_key)

    @classmethod
    def parse(cls, vkey: str) -> Verifier:
        """Parse ``name+hash+base64(0x01 || public key)``; raise NoteError."""
        if not isinstance(vkey, str):
            raise NoteError("a verifier key is a string")
        name, _, rest = vkey.partition("+")
        hash16, _, key64 = rest.partition("+")
        return cls._from_parts(name, hash16, key64, "verifier")

    @classmethod
    def _from_parts(cls, name: str, hash16: str, key64: str, kind: str) -> Verifier:
        if not is_valid_key_name(name):
            raise NoteError(f"malformed {kind} key: invalid key name {name!r}")
        if not _HASH16.fullmatch(hash16):
            raise NoteError(f"malformed {kind} key: the key hash must be 8 lowercase hex digits")
        raw = _b64decode(key64)
        if raw is None or not raw:
            raise NoteError(f"malformed {kind} key: the key is not canonical base64")
        if raw[0] != SIG_ED25519:
            raise NoteError(f"unsupported {kind} key type {raw[0]:#04x}: only Ed25519 (0x01)")
        if len(raw) != 1 + ED25519_KEY_BYTES:
            raise NoteError(f"malformed {kind} key: an Ed25519 key is {ED25519_KEY_BYTES} bytes")
        public_key = raw[1:]
        if kind == "signer":
            public_key = _public_from_seed(public_key)
        if int(hash16, 16) != key_id(name, public_key):
            raise NoteError(f"{kind} key hash {hash16} does not match the key")
        return cls(name, int(hash16, 16), public_key)

    def to_string(self) -> str:
        """The ``name+hash+base64`` form that ``parse`` reads."""
        key64 = base64.b64encode(bytes([SIG_ED25519]) + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{key64}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` (64 bytes, without the key ID) is this key's signature of ``message``."""
        if len(signature) != ED25519_SIG_BYTES:
            return False
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True, slots=True)
class Signer:
    """A named Ed25519 private key (its 32-byte seed) that signs notes."""

    name: str
    key_id: int
    seed: bytes = field(repr=False)
    _key: Ed25519PrivateKey = field(init=False, repr=False, compare=False)
    _verifier: Verifier = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not is_valid_key_name(self.name):
            raise NoteError(f"invalid key name {self.name!r}")
        if not isinstance(self.seed, bytes) or len(self.seed) != ED25519_KEY_BYTES:
            raise NoteError(f"an Ed25519 seed is {ED25519_KEY_BYTES} bytes")
        key = Ed25519PrivateKey.from_private_bytes(self.seed)
        public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        if self.key_id != key_id(self.name, public):
            raise NoteError(f"key ID does not match the name and key of {self.name}")
        object.__setattr__(self, "_key", key)
        # Made once: the dealer answers GetPublicKey from it, and deriving the public key
        # again on every call was a third of that call's CPU.
        object.__setattr__(self, "_verifier", Verifier(self.name, self.key_id, public))

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> Signer:
        """The signer for a 32-byte Ed25519 seed."""
        if not is_valid_key_name(name):
            raise NoteError(f"invalid key name {name!r}")
        if not isinstance(seed, bytes) or len(seed) != ED25519_KEY_BYTES:
            raise NoteError(f"an Ed25519 seed is {ED25519_KEY_BYTES} bytes")
        return cls(name, key_id(name, _public_from_seed(seed)), seed)

    @classmethod
    def generate(cls, name: str) -> Signer:
        """A new random key."""
        return cls.from_seed(name, secrets.token_bytes(ED25519_KEY_BYTES))

    @classmethod
    def parse(cls, skey: str) -> Signer:
        """Parse ``PRIVATE+KEY+name+hash+base64(0x01 || seed)``; raise NoteError."""
        if not isinstance(skey, str) or not skey.startswith("PRIVATE+KEY+"):
            raise NoteError("malformed signer key: want PRIVATE+KEY+name+hash+key")
        name, _, rest = skey.removeprefix("PRIVATE+KEY+").partition("+")
        hash16, _, key64 = rest.partition("+")
        verifier = Verifier._from_parts(name, hash16, key64, "signer")
        raw = _b64decode(key64)
        assert raw is not None  # checked by _from_parts
        return cls(name, verifier.key_id, raw[1:])

    def to_string(self) -> str:
        """The ``PRIVATE+KEY+...`` form that ``parse`` reads. It is secret."""
        key64 = base64.b64encode(bytes([SIG_ED25519]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id:08x}+{key64}"

    @property
    def verifier(self) -> Verifier:
        """The matching public key."""
        return self._verifier

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return self._key.sign(message)


def generate_key(name: str) -> tuple[str, str]:
    """A new key pair as strings: ``(signer key, verifier key)``. Keep the first secret."""
    signer = Signer.generate(name)
    return signer.to_string(), signer.verifier.to_string()


def _public_from_seed(seed: bytes) -> bytes:
    return (
        Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    )


def _b64decode(text: str) -> bytes | None:
    """Standard base64 with padding, canonical only (re-encodes to ``text``); None if not."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


# --- notes -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Signature:
    """One signature line: the key name and ID, and the base64 as it appeared."""

    name: str
    key_id: int
    base64: str


@dataclass(frozen=True, slots=True)
class Note:
    """An opened note: its text and which signatures verified."""

    text: str
    sigs: tuple[Signature, ...]
    unverified_sigs: tuple[Signature, ...] = ()


def sign_note(text: str, *signers: Signer) -> bytes:
    """The signed note of ``text`` (which must end in a newline) by each signer, in order."""
    _check_text(text)
    if not signers:
        raise NoteError("sign_note needs at least one signer")
    if len(signers) > MAX_SIGNATURES:
        raise NoteError(f"more than {MAX_SIGNATURES} signers")
    if len({(s.name, s.key_id) for s in signers}) != len(signers):
        raise NoteError("the same key is listed twice")
    body = text.encode("utf-8")
    lines = []
    for s in signers:
        sig = base64.b64encode(s.key_id.to_bytes(4, "big") + s.sign(body)).decode("ascii")
        lines.append(f"{SIG_PREFIX}{s.name} {sig}\n")
    msg = body + b"\n" + "".join(lines).encode("utf-8")
    if len(msg) > MAX_NOTE_BYTES:
        raise NoteError(f"the signed note would exceed {MAX_NOTE_BYTES} bytes")
    return msg


def _check_text(text: str) -> None:
    if not isinstance(text, str):
        raise NoteError("note text must be a string")
    if not text.endswith("\n"):
        raise NoteError("note text must end in a newline")
    if (m := _CONTROL.search(text)) is not None:
        raise NoteError(f"note text contains the control character U+{ord(m.group()):04X}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NoteError("note text is not valid Unicode") from None


def open_note(msg: bytes, verifiers: Verifier | Iterable[Verifier]) -> Note:
    """Parse a signed note and verify it with the known keys.

    Raises MalformedNoteError if it is not a well-formed note,
    InvalidSignatureError if a known key's signature does not verify,
    UnverifiedNoteError if no known key signed it, NoteError if two
    different known keys share a name and key ID.
    """
    known: dict[tuple[str, int], set[Verifier]] = {}
    for v in [verifiers] if isinstance(verifiers, Verifier) else verifiers:
        if not isinstance(v, Verifier):
            raise TypeError(f"verifiers must be Verifier objects, got {type(v).__name__}")
        known.setdefault((v.name, v.key_id), set()).add(v)

    if not isinstance(msg, bytes):
        raise MalformedNoteError("a note is bytes")
    if len(msg) > MAX_NOTE_BYTES:
        raise MalformedNoteError(f"note is larger than {MAX_NOTE_BYTES} bytes")
    try:
        whole = msg.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedNoteError("note is not valid UTF-8") from None
    if (m := _CONTROL.search(whole)) is not None:
        raise MalformedNoteError(f"note contains the control character U+{ord(m.group()):04X}")
    split = whole.rfind("\n\n")
    if split < 0:
        raise MalformedNoteError("no blank line between the text and the signatures")
    text, block = whole[: split + 1], whole[split + 2 :]
    if not block:
        raise MalformedNoteError("note has no signature lines")
    if not block.endswith("\n"):
        raise MalformedNoteError("the last signature line does not end in a newline")
    body = text.encode("utf-8")

    verified: list[Signature] = []
    unverified: list[Signature] = []
    seen: set[tuple[str, int]] = set()
    seen_unverified: set[str] = set()
    for number, line in enumerate(block[:-1].split("\n"), start=1):
        if number > MAX_SIGNATURES:
            raise MalformedNoteError(f"note has more than {MAX_SIGNATURES} signatures")
        if not line.startswith(SIG_PREFIX):
            raise MalformedNoteError(f"signature line {number} does not start with an em dash and a space")
        name, _, sig64 = line[len(SIG_PREFIX) :].partition(" ")
        if not is_valid_key_name(name):
            raise MalformedNoteError(f"signature line {number} has an invalid key name")
        raw = _b64decode(sig64)
        if raw is None:
            raise MalformedNoteError(f"signature line {number} is not canonical base64")
        if len(raw) < 5:
            raise MalformedNoteError(f"signature line {number} is too short")
        kid = int.from_bytes(raw[:4], "big")
        signature = Signature(name, kid, sig64)
        candidates = known.get((name, kid))
        if candidates is None:
            # Unknown key (even one sharing a name or an ID with a known key): ignored, kept once.
            if line not in seen_unverified:
                seen_unverified.add(line)
                unverified.append(signature)
            continue
        if len(candidates) > 1:
            raise NoteError(f"ambiguous key {name}+{kid:08x}: two known keys share that name and ID")
        if (name, kid) in seen:
            continue  # as Go: only a known key's first signature counts
        seen.add((name, kid))
        (verifier,) = candidates
        if not verifier.verify(body, raw[4:]):
            raise InvalidSignatureError(name, kid)
        verified.append(signature)

    note = Note(text, tuple(verified), tuple(unverified))
    if not verified:
        raise UnverifiedNoteError(note)
    return note
