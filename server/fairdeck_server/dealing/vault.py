"""Seeds at rest: unrevealed server seeds are sealed with AES-256-GCM, bound to their hand id.

``SeedVault`` seals with the newest key and opens with any key it holds, chosen by the key id in
the sealed seed (``0x01 || key_id (4) || nonce (12) || ciphertext+tag``), so hands sealed before a
rotation still deal and close. The keys, newest first, are a 0600 file apart from the database or
``$FAIRDECK_SEED_KEY``; they are made by ``fairdeck init`` or a fresh data dir's first start
(startup.py), never because a file went missing. No error holds key material. The design:
docs/security.md ("Seed key (seeds at rest)").
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fairdeck.core.encoding import lp

_FORMAT = 1
_AAD = b"fairdeck sealed seed v1"
KEY_ENV = "FAIRDECK_SEED_KEY"
"""Environment variable holding base64 AES-256 keys, newest first, separated by
commas or whitespace (overrides the key file)."""


class VaultError(Exception):
    """A key that cannot be loaded, or a sealed seed that does not open.

    Its message never contains key material (tests/security checks it)."""


def key_id(key: bytes) -> bytes:
    """The 4-byte id a sealed seed carries: public, it names the key without revealing it."""
    return hashlib.sha256(b"fairdeck seed key id" + key).digest()[:4]


@dataclass(frozen=True)
class SeedVault:
    """Seals with ``key``; opens with it or any of the ``retired`` keys."""

    key: bytes = field(repr=False)
    retired: tuple[bytes, ...] = field(default=(), repr=False)
    key_id: bytes = field(init=False)
    _aeads: dict[bytes, AESGCM] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        aeads: dict[bytes, AESGCM] = {}
        for k in (self.key, *self.retired):
            if len(k) != 32:
                raise VaultError("seed key must be 32 bytes (AES-256)")
            kid = key_id(k)
            if kid in aeads:
                raise VaultError(f"two seed keys share the key id {kid.hex()} (a key listed twice?)")
            # Built once: building AESGCM per seal costs more than the encryption.
            aeads[kid] = AESGCM(k)
        object.__setattr__(self, "key_id", key_id(self.key))
        object.__setattr__(self, "_aeads", aeads)

    @property
    def key_ids(self) -> list[str]:
        """Hex ids of every key, the sealing one first."""
        return [kid.hex() for kid in self._aeads]

    def seal(self, hand_id: str, seed: bytes) -> bytes:
        nonce = secrets.token_bytes(12)
        sealed = self._aeads[self.key_id].encrypt(nonce, seed, _AAD + lp(hand_id.encode("ascii")))
        return bytes([_FORMAT]) + self.key_id + nonce + sealed

    def seal_many(self, hand_ids: Sequence[str], seeds: Sequence[bytes]) -> list[bytes]:
        """``seal`` for each (hand id, seed), the nonces drawn in one call."""
        nonces = secrets.token_bytes(12 * len(hand_ids))
        aead = self._aeads[self.key_id]
        head = bytes([_FORMAT]) + self.key_id
        out = []
        for i, (hand_id, seed) in enumerate(zip(hand_ids, seeds, strict=True)):
            nonce = nonces[12 * i : 12 * i + 12]
            out.append(head + nonce + aead.encrypt(nonce, seed, _AAD + lp(hand_id.encode("ascii"))))
        return out

    def open(self, hand_id: str, sealed: bytes) -> bytes:
        if len(sealed) < 1 + 4 + 12 + 16 or sealed[0] != _FORMAT:
            raise VaultError("sealed seed has an unknown format")
        aead = self._aeads.get(sealed[1:5])
        if aead is None:
            raise VaultError(f"sealed seed was sealed under a key not loaded (key id {sealed[1:5].hex()})")
        try:
            return aead.decrypt(sealed[5:17], sealed[17:], _AAD + lp(hand_id.encode("ascii")))
        except InvalidTag:
            raise VaultError("sealed seed does not open: wrong key, or the row was altered") from None


def load_or_create_key(path: Path, *, environ: Mapping[str, str] | None = None) -> SeedVault:
    """The vault from $FAIRDECK_SEED_KEY, else from ``path``, created 0600 if missing.

    For tests and benchmarks that set up keys by hand; the dealer uses ``load_vault``
    and creates a key only through fairdeck_server.run.startup."""
    env = os.environ if environ is None else environ
    if KEY_ENV in env or path.exists():
        return load_vault(path, environ=env)
    return create_key_file(path)


def load_vault(path: Path, *, environ: Mapping[str, str] | None = None) -> SeedVault:
    """The vault from $FAIRDECK_SEED_KEY, else from ``path``; a missing file is a VaultError."""
    env = os.environ if environ is None else environ
    if KEY_ENV in env:
        return _vault(_decode_keys(env[KEY_ENV].replace(",", " "), KEY_ENV))
    if not path.exists():
        raise VaultError(f"no seed key at {path}")
    return _vault(read_key_file(path))


def create_key_file(path: Path) -> SeedVault:
    """A new key written to ``path`` (0600, which must not exist: O_EXCL)."""
    key = secrets.token_bytes(32)
    write_key_file(path, [key], create=True)
    return SeedVault(key)


def read_key_file(path: Path) -> list[bytes]:
    """The keys in a seed key file, newest first; refuses a file others can read."""
    return _decode_keys(read_private_text(path, "seed key file", VaultError), str(path))


def read_private_text(path: Path, what: str, error: type[Exception]) -> str:
    """The text of a key file (the seed key's or the log key's), refused with ``error``
    when others can read it or it cannot be read; ``what`` names the file in the message."""
    try:  # O_NONBLOCK: a FIFO put in the key's place must not hang startup waiting for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise error(f"{what} {path} cannot be read: {e.strerror or e}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # checked before fdopen, which raises on a directory
        os.close(fd)
        raise error(f"{what} {path} is not a regular file; put the key file itself there")
    with os.fdopen(fd, "rb") as f:
        mode = st.st_mode & 0o777
        if mode & 0o077:
            raise error(f"{what} {path} is readable by others (mode {mode:o}); chmod 600 it")
        try:
            return f.read().decode()
        except UnicodeDecodeError:
            raise error(f"{what} {path} is not text: put the key file itself there") from None
        except OSError as e:
            raise error(f"{what} {path} cannot be read: {e.strerror or e}") from None


def write_key_file(path: Path, keys: Sequence[bytes], *, create: bool = False) -> None:
    """Write ``keys`` (newest first), one base64 line each."""
    write_private_file(path, "".join(base64.b64encode(k).decode() + "\n" for k in keys), create=create)


def write_private_file(path: Path, text: str, *, create: bool) -> None:
    """Write a key file: mode 0600 from the first byte, fsynced with its directory.

    ``create``: the file must not exist yet (O_EXCL). Otherwise it is
    replaced atomically (a new file renamed over it), so a crash leaves the
    old keys or the new ones, never half a file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    target = path if create else path.with_name(path.name + ".new")
    if not create and target.exists():
        target.unlink()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if not create:
        os.replace(target, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def rotate_key_file(path: Path) -> tuple[str, list[str]]:
    """Put a new key first in the key file; returns (new key id, all ids).

    The file must exist: a missing one is a VaultError, never a new file (that
    would leave every sealed seed without its key). Takes effect when the
    dealer restarts; until then it seals with the old key.
    """
    if not path.exists():
        raise VaultError(
            f"no seed key at {path} to rotate (restore it from backup; `fairdeck init` makes new keys)"
        )
    old = read_key_file(path)
    key = secrets.token_bytes(32)
    vault = SeedVault(key, tuple(old))  # checks the old keys too before anything is written
    write_key_file(path, [key, *old])
    return vault.key_id.hex(), vault.key_ids


def _vault(keys: list[bytes]) -> SeedVault:
    return SeedVault(keys[0], tuple(keys[1:]))


def _decode_keys(text: str, where: str) -> list[bytes]:
    keys = []
    for number, word in enumerate(text.split(), start=1):
        try:
            key = base64.b64decode(word, validate=True)
        except ValueError:
            raise VaultError(f"seed key {number} in {where} is not base64") from None
        if len(key) != 32:
            raise VaultError(f"seed key {number} in {where} must decode to 32 bytes")
        keys.append(key)
    if not keys:
        raise VaultError(f"no seed key in {where}")
    return keys
