"""Witness cosignatures (https://c2sp.org/tlog-cosignature, ``cosignature/v1``) and witness policies.

A witness cosigns a checkpoint only when it is consistent with every checkpoint of that log it
cosigned before, so a checkpoint that enough independent witnesses cosigned cannot be one side
of a split view. This module signs and verifies Ed25519 cosignatures and checks a policy: a set
of named witness keys and a threshold *k*. The format and the signed message follow the text
(docs/log-format.md, "Cosigned checkpoints"); where the text leaves a choice, docs/witness.md
("Choices", "The code") says which one is taken.

>>> w = Cosigner.from_seed("witness.example/w1", bytes(32))
>>> w.verifier.to_string()
'witness.example/w1+e42b2f2c+BDtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop'
>>> line = w.cosign("example.com/log\\n1\\nbjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=\\n", 1679315147)
>>> parse_line(line, w.verifier).timestamp
1679315147
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fairdeck.log.note import (
    ED25519_KEY_BYTES,
    ED25519_SIG_BYTES,
    SIG_PREFIX,
    NoteError,
    _b64decode,
    _public_from_seed,
    is_valid_key_name,
)


class QuorumRule(Protocol):
    """A tlog-policy quorum (``fairdeck.log.policy.Quorum``): which sets of witnesses meet it."""

    def met(self, signed: AbstractSet[str]) -> bool: ...

    def describe(self) -> str: ...


SIG_COSIGNATURE_V1 = 0x04  # the signature type byte of Ed25519 cosigner keys (tlog-cosignature, "Format")
HEADER = b"cosignature/v1\n"
MAX_TIMESTAMP = 2**63 - 1  # tlog-cosignature, "Format": the timestamp MUST NOT exceed 2^63 - 1
_LINE_BYTES = 4 + 8 + ED25519_SIG_BYTES  # key ID, timestamp, signature


class CosignatureError(NoteError):
    """A cosignature or cosigner key that is malformed, or a cosignature that does not verify."""


class PolicyError(CosignatureError):
    """A checkpoint lacks the cosignatures a witness policy requires; ``result`` says who signed."""

    def __init__(self, result: PolicyResult) -> None:
        super().__init__(result.describe())
        self.result = result


def cosigner_key_id(name: str, public_key: bytes) -> int:
    """``SHA-256(name || 0x0A || 0x04 || public_key)[:4]``, big-endian (tlog-cosignature, "Format")."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([SIG_COSIGNATURE_V1]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def signed_message(checkpoint_text: str, timestamp: int) -> bytes:
    """The bytes a ``cosignature/v1`` signs (tlog-cosignature, "Ed25519 signed message")."""
    _check_timestamp(timestamp)
    if not checkpoint_text.endswith("\n"):
        raise CosignatureError("a checkpoint body ends in a newline")
    return HEADER + b"time %d\n" % timestamp + checkpoint_text.encode("utf-8")


def _check_timestamp(timestamp: int) -> None:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 <= timestamp <= MAX_TIMESTAMP:
        raise CosignatureError(f"a cosignature timestamp is an integer in 0..2**63-1, got {timestamp!r}")


@dataclass(frozen=True, slots=True)
class CosignatureVerifier:
    """A witness's named Ed25519 public key, as a ``cosignature/v1`` verifier."""

    name: str
    key_id: int
    public_key: bytes
    _key: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not is_valid_key_name(self.name):
            raise CosignatureError(f"invalid witness key name {self.name!r}")
        if not isinstance(self.public_key, bytes) or len(self.public_key) != ED25519_KEY_BYTES:
            raise CosignatureError(f"an Ed25519 public key is {ED25519_KEY_BYTES} bytes")
        if self.key_id != cosigner_key_id(self.name, self.public_key):
            raise CosignatureError(f"key ID does not match the name and key of {self.name}")
        try:
            key = Ed25519PublicKey.from_public_bytes(self.public_key)
        except ValueError as e:
            raise CosignatureError(f"invalid Ed25519 public key for {self.name}: {e}") from None
        object.__setattr__(self, "_key", key)

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> CosignatureVerifier:
        if not is_valid_key_name(name):
            raise CosignatureError(f"invalid witness key name {name!r}")
        return cls(name, cosigner_key_id(name, public_key), public_key)

    @classmethod
    def parse(cls, vkey: str) -> CosignatureVerifier:
        """Parse a vkey ``name+hash+base64(0x04 || public key)`` (signed-note, "Verifier keys")."""
        if not isinstance(vkey, str):
            raise CosignatureError("a witness verifier key is a string")
        name, _, rest = vkey.partition("+")
        hash16, _, key64 = rest.partition("+")
        public_key = _key_material(name, hash16, key64, "verifier")
        return cls(name, int(hash16, 16), public_key)

    def to_string(self) -> str:
        key64 = base64.b64encode(bytes([SIG_COSIGNATURE_V1]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id:08x}+{key64}"

    def verify(self, checkpoint_text: str, timestamp: int, signature: bytes) -> bool:
        """Whether ``signature`` is this witness's cosignature of the checkpoint at ``timestamp``."""
        if len(signature) != ED25519_SIG_BYTES:
            return False
        try:
            self._key.verify(signature, signed_message(checkpoint_text, timestamp))
        except InvalidSignature:
            return False
        return True


def _key_material(name: str, hash16: str, key64: str, kind: str) -> bytes:
    """The 32-byte key of a ``name+hash+base64(0x04 || key)`` string, its hash checked."""
    if not is_valid_key_name(name):
        raise CosignatureError(f"malformed witness {kind} key: invalid key name {name!r}")
    if len(hash16) != 8 or any(c not in "0123456789abcdef" for c in hash16):
        raise CosignatureError(f"malformed witness {kind} key: the key hash must be 8 lowercase hex digits")
    raw = _b64decode(key64)
    if not raw:
        raise CosignatureError(f"malformed witness {kind} key: the key is not canonical base64")
    if raw[0] != SIG_COSIGNATURE_V1:
        raise CosignatureError(
            f"witness {kind} key has type {raw[0]:#04x}, want {SIG_COSIGNATURE_V1:#04x} (cosignature/v1)"
        )
    if len(raw) != 1 + ED25519_KEY_BYTES:
        raise CosignatureError(f"malformed witness {kind} key: an Ed25519 key is {ED25519_KEY_BYTES} bytes")
    material = raw[1:]
    public_key = _public_from_seed(material) if kind == "signer" else material
    if int(hash16, 16) != cosigner_key_id(name, public_key):
        raise CosignatureError(f"witness {kind} key hash {hash16} does not match the key")
    return material


@dataclass(frozen=True, slots=True)
class Cosigner:
    """A witness's named Ed25519 private key (its 32-byte seed)."""

    name: str
    seed: bytes = field(repr=False)
    _key: Ed25519PrivateKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not is_valid_key_name(self.name):
            raise CosignatureError(f"invalid witness key name {self.name!r}")
        if not isinstance(self.seed, bytes) or len(self.seed) != ED25519_KEY_BYTES:
            raise CosignatureError(f"an Ed25519 seed is {ED25519_KEY_BYTES} bytes")
        object.__setattr__(self, "_key", Ed25519PrivateKey.from_private_bytes(self.seed))

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> Cosigner:
        return cls(name, seed)

    @classmethod
    def generate(cls, name: str) -> Cosigner:
        """A new random key from the OS CSPRNG."""
        return cls(name, Ed25519PrivateKey.generate().private_bytes_raw())

    @classmethod
    def parse(cls, skey: str) -> Cosigner:
        """Parse ``PRIVATE+KEY+name+hash+base64(0x04 || seed)``."""
        if not isinstance(skey, str) or not skey.startswith("PRIVATE+KEY+"):
            raise CosignatureError("malformed witness signer key: want PRIVATE+KEY+name+hash+key")
        name, _, rest = skey.removeprefix("PRIVATE+KEY+").partition("+")
        hash16, _, key64 = rest.partition("+")
        return cls(name, _key_material(name, hash16, key64, "signer"))

    def to_string(self) -> str:
        """The ``PRIVATE+KEY+...`` form that ``parse`` reads. It is secret."""
        key64 = base64.b64encode(bytes([SIG_COSIGNATURE_V1]) + self.seed).decode("ascii")
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id:08x}+{key64}"

    @property
    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier.from_public_key(self.name, _public_from_seed(self.seed))

    def cosign(self, checkpoint_text: str, timestamp: int) -> str:
        """The note signature line (with its newline) of this witness's cosignature of the checkpoint."""
        signature = self._key.sign(signed_message(checkpoint_text, timestamp))
        raw = self.verifier.key_id.to_bytes(4, "big") + timestamp.to_bytes(8, "big") + signature
        return f"{SIG_PREFIX}{self.name} {base64.b64encode(raw).decode('ascii')}\n"


@dataclass(frozen=True, slots=True)
class Cosignature:
    """One parsed cosignature line: who, when, and the signature bytes."""

    name: str
    key_id: int
    timestamp: int
    signature: bytes


def parse_line(line: str, verifier: CosignatureVerifier | None = None) -> Cosignature:
    """Parse one signature line as a ``cosignature/v1`` (no verification).

    With ``verifier``, the line must carry that witness's name and key ID.
    """
    text = line.removesuffix("\n")
    if not text.startswith(SIG_PREFIX):
        raise CosignatureError("a signature line starts with an em dash and a space")
    name, _, sig64 = text[len(SIG_PREFIX) :].partition(" ")
    if not is_valid_key_name(name):
        raise CosignatureError("signature line has an invalid key name")
    raw = _b64decode(sig64)
    if raw is None or len(raw) != _LINE_BYTES:
        raise CosignatureError(f"a cosignature/v1 line holds {_LINE_BYTES} bytes of canonical base64")
    key_id = int.from_bytes(raw[:4], "big")
    timestamp = int.from_bytes(raw[4:12], "big")
    if timestamp > MAX_TIMESTAMP:
        raise CosignatureError("cosignature timestamp exceeds 2**63-1")
    if verifier is not None and (name, key_id) != (verifier.name, verifier.key_id):
        raise CosignatureError(f"the line is not by {verifier.name}+{verifier.key_id:08x}")
    return Cosignature(name, key_id, timestamp, raw[12:])


def _split_note(note: bytes) -> tuple[str, list[str]]:
    """A signed note's text and its signature lines (without newlines). The note is assumed opened."""
    whole = note.decode("utf-8")
    split = whole.rfind("\n\n")
    if split < 0:
        raise CosignatureError("no blank line between the checkpoint and its signatures")
    return whole[: split + 1], whole[split + 2 :].removesuffix("\n").split("\n")


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """Which witnesses of a policy validly cosigned a checkpoint, and which did not."""

    threshold: int
    signed: tuple[str, ...]
    missing: tuple[str, ...]
    timestamps: Mapping[str, int]
    quorum: QuorumRule | None = None
    """A tlog-policy quorum (fairdeck.log.policy): what ``ok`` means instead of the threshold."""

    @property
    def ok(self) -> bool:
        if self.quorum is not None:
            return self.quorum.met(set(self.signed))
        return len(self.signed) >= self.threshold

    def describe(self) -> str:
        signed = ", ".join(self.signed) or "none"
        missing = ", ".join(self.missing) or "none"
        verdict = "meets" if self.ok else "does not meet"
        if self.quorum is not None:
            return (
                f"checkpoint is cosigned by {len(self.signed)} of the policy's witnesses, which {verdict} "
                f"its quorum {self.quorum.describe()}: signed by {signed}; missing {missing}"
            )
        return (
            f"checkpoint has {len(self.signed)} of the {self.threshold} witness cosignatures required "
            f"({verdict} the policy): signed by {signed}; missing {missing}"
        )


@dataclass(frozen=True, slots=True)
class WitnessPolicy:
    """Named witness keys and a threshold: at least ``threshold`` distinct witnesses must cosign.

    Names are the policy's labels for reports; a cosignature is matched by the witness key's own
    name and key ID, as tlog-witness asks ("ignore signature lines that don't match").
    """

    witnesses: Mapping[str, CosignatureVerifier]
    threshold: int = 0
    quorum: QuorumRule | None = None
    """From a tlog-policy file (fairdeck.log.policy): groups of witnesses instead of one threshold."""

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int):
            raise CosignatureError("the witness threshold is an integer")
        if self.quorum is None and not 1 <= self.threshold <= len(self.witnesses):
            raise CosignatureError(
                f"witness threshold {self.threshold} must be between 1 and the {len(self.witnesses)} "
                "witnesses named"
            )
        keys = [(v.name, v.key_id) for v in self.witnesses.values()]
        if len(set(keys)) != len(keys):
            raise CosignatureError("two witnesses of the policy share one key")

    @classmethod
    def parse(cls, specs: Iterable[str], threshold: int | None = None) -> WitnessPolicy:
        """A policy from ``NAME=VKEY`` strings (``--witness``); the threshold defaults to all of them."""
        witnesses: dict[str, CosignatureVerifier] = {}
        for spec in specs:
            name, sep, vkey = spec.partition("=")
            if not sep or not name:
                raise CosignatureError(f"a witness is NAME=KEY, got {spec[:80]!r}")
            if name in witnesses:
                raise CosignatureError(f"witness {name!r} is named twice")
            witnesses[name] = CosignatureVerifier.parse(vkey)
        return cls(witnesses, len(witnesses) if threshold is None else threshold)

    def check(self, note: bytes) -> PolicyResult:
        """Which witnesses validly cosigned the (already opened) checkpoint note.

        Raises CosignatureError when a line by a known witness key is malformed or does not verify:
        a known key's bad signature makes a note malformed (signed-note, "Signatures").
        """
        text, lines = _split_note(note)
        by_key = {(v.name, v.key_id): label for label, v in self.witnesses.items()}
        timestamps: dict[str, int] = {}
        for line in lines:
            name, _, sig64 = line.removeprefix(SIG_PREFIX).partition(" ")
            raw = _b64decode(sig64)
            if raw is None or len(raw) < 4:
                continue  # not ours to judge: open_note already refused malformed lines
            label = by_key.get((name, int.from_bytes(raw[:4], "big")))
            if label is None or label in timestamps:
                continue  # an unknown key, or a witness's second line: only the first counts
            verifier = self.witnesses[label]
            cosig = parse_line(line, verifier)
            if not verifier.verify(text, cosig.timestamp, cosig.signature):
                raise CosignatureError(f"invalid cosignature by witness {label} ({verifier.to_string()})")
            timestamps[label] = cosig.timestamp
        signed = tuple(label for label in self.witnesses if label in timestamps)
        missing = tuple(label for label in self.witnesses if label not in timestamps)
        return PolicyResult(self.threshold, signed, missing, timestamps, self.quorum)

    def require(self, note: bytes) -> PolicyResult:
        """``check``, raising PolicyError unless at least ``threshold`` witnesses cosigned."""
        result = self.check(note)
        if not result.ok:
            raise PolicyError(result)
        return result


def add_cosignatures(note: bytes, lines: Iterable[str]) -> bytes:
    """The note with each new signature line appended once (a line already present is skipped)."""
    text = note.decode("utf-8")
    present = set(text.split("\n"))
    extra = [line if line.endswith("\n") else line + "\n" for line in lines]
    new = [line for line in dict.fromkeys(extra) if line.removesuffix("\n") not in present]
    return (text + "".join(new)).encode("utf-8")
