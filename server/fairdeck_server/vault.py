"""Seeds at rest: unrevealed server seeds are sealed with AES-256-GCM.

The key lives apart from the database: a 0600 key file in the data dir by
default, or a file or environment variable named by the operator. A sealed
seed is bound to its hand (the hand id is the associated data), so a copy of
the database reveals nothing and rows cannot be swapped undetected.

Layout of a sealed seed: ``0x01 || key_id (4 bytes) || nonce (12) || ciphertext+tag``.
The key id lets a later key rotation keep opening old hands.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fairdeck.encoding import lp

_FORMAT = 1
_AAD = b"fairdeck sealed seed v1"
KEY_ENV = "FAIRDECK_SEED_KEY"
"""Environment variable holding a base64 AES-256 key (overrides the key file)."""


class VaultError(Exception):
    """A key that cannot be loaded, or a sealed seed that does not open."""


@dataclass(frozen=True)
class SeedVault:
    """Seals and opens server seeds with one AES-256-GCM key."""

    key: bytes = field(repr=False)
    key_id: bytes = field(init=False)
    _aead: AESGCM = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.key) != 32:
            raise VaultError("seed key must be 32 bytes (AES-256)")
        # Derived once: building AESGCM per seal costs more than the encryption.
        object.__setattr__(self, "key_id", hashlib.sha256(b"fairdeck seed key id" + self.key).digest()[:4])
        object.__setattr__(self, "_aead", AESGCM(self.key))

    def seal(self, hand_id: str, seed: bytes) -> bytes:
        nonce = secrets.token_bytes(12)
        sealed = self._aead.encrypt(nonce, seed, _AAD + lp(hand_id.encode("ascii")))
        return bytes([_FORMAT]) + self.key_id + nonce + sealed

    def open(self, hand_id: str, sealed: bytes) -> bytes:
        if len(sealed) < 1 + 4 + 12 + 16 or sealed[0] != _FORMAT:
            raise VaultError("sealed seed has an unknown format")
        if sealed[1:5] != self.key_id:
            raise VaultError("sealed seed was sealed under another key")
        try:
            return self._aead.decrypt(sealed[5:17], sealed[17:], _AAD + lp(hand_id.encode("ascii")))
        except InvalidTag:
            raise VaultError("sealed seed does not open: wrong key, or the row was altered") from None


def load_or_create_key(path: Path, *, environ: dict[str, str] | None = None) -> SeedVault:
    """The vault from $FAIRDECK_SEED_KEY, else from ``path``, created 0600 if missing."""
    env = os.environ if environ is None else environ
    if KEY_ENV in env:
        return SeedVault(_decode_key(env[KEY_ENV], KEY_ENV))
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise VaultError(f"seed key file {path} is readable by others (mode {mode:o}); chmod 600 it")
        return SeedVault(_decode_key(path.read_text().strip(), str(path)))
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(base64.b64encode(key).decode() + "\n")
        f.flush()
        os.fsync(f.fileno())
    return SeedVault(key)


def _decode_key(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text, validate=True)
    except ValueError:
        raise VaultError(f"seed key in {where} is not base64") from None
    if len(key) != 32:
        raise VaultError(f"seed key in {where} must decode to 32 bytes")
    return key
