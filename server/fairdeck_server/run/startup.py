"""Keys and data are identities: what the dealer checks before it serves.

A log is its signing key and its database; a sealed seed is its seed key and its row. So neither
is made as a side effect of a file gone missing (only a fresh SQLite data dir, or ``init``, gets
new ones), partial state is refused, and once storage is open (``check_store``) the keys must be
the ones it records. One dealer per data dir: a ``flock`` on the directory itself (and on
``DIR/fairdeck.lock``), which no deleted file undoes. A refusal is
a ``StartupRefused`` (or a key module's typed error) naming the file or option and the fix, made
before anything is written. The rules: docs/operations.md ("Keys, data dirs and start-up refusals").
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fairdeck.log import safefiles
from fairdeck.log.checkpoint import CheckpointError, open_checkpoint
from fairdeck.log.rotation import open_rotation
from fairdeck_server.dealing.vault import (
    KEY_ENV,
    SeedVault,
    VaultError,
    create_key_file,
    load_vault,
    write_private_file,
)
from fairdeck_server.publishing.log_signing import LogKeys, load_log_keys, new_log_keys
from fairdeck_server.refusals import RESTORE, StartupRefused

if TYPE_CHECKING:
    from fairdeck_server.run.config import ServerConfig
    from fairdeck_server.storage.base import StoredCheckpoint

DB_NAME = "fairdeck.db"
LOCK_NAME = "fairdeck.lock"
log = logging.getLogger(__name__)
LOG_KEY_META = "log_key"
ROTATION_META = "log_key_rotation/"
"""Prefix of the fairdeck_meta names of rotation statements, one per new key (its key id in hex):
what ``fairdeck audit --data/--db`` reads to follow a rotation."""
"""fairdeck_meta row: the verifier key (public) of the key that signs the log."""

__all__ = ["Identity", "KeySources", "StartupRefused", "check_store", "init", "prepare"]


@dataclass(frozen=True)
class KeySources:
    """Where the keys come from, and how to name each place in a message."""

    data_dir: Path
    log_key: Path
    log_key_explicit: bool
    seed_key: Path | None
    """None: the seed keys come from $FAIRDECK_SEED_KEY."""
    seed_key_explicit: bool

    @classmethod
    def of(
        cls,
        data_dir: Path,
        log_key_file: Path | None,
        seed_key_file: Path | None,
        environ: Mapping[str, str],
    ) -> KeySources:
        seed = None if KEY_ENV in environ else (seed_key_file or data_dir / "seed.key")
        return cls(
            data_dir,
            log_key_file or data_dir / "log.key",
            log_key_file is not None,
            seed,
            seed_key_file is not None,
        )

    @property
    def log_where(self) -> str:
        return f"--log-key-file {self.log_key}" if self.log_key_explicit else f"log key {self.log_key}"

    @property
    def seed_where(self) -> str:
        if self.seed_key is None:
            return f"${KEY_ENV}"
        return f"--seed-key-file {self.seed_key}" if self.seed_key_explicit else f"seed key {self.seed_key}"

    def key_files(self) -> list[tuple[str, Path]]:
        """(how to name it, path) of each key kept in a file."""
        files = [(self.log_where, self.log_key)]
        if self.seed_key is not None:
            files.append((self.seed_where, self.seed_key))
        return files

    def init_command(self) -> str:
        """The `fairdeck init` line that would make these keys."""
        parts = ["fairdeck init", f"--data {self.data_dir}"]
        if self.log_key_explicit:
            parts.append(f"--log-key-file {self.log_key}")
        if self.seed_key_explicit and self.seed_key is not None:
            parts.append(f"--seed-key-file {self.seed_key}")
        return " ".join(parts)


@dataclass
class Identity:
    """The loaded keys, and the data dir lock held for the dealer's life (SQLite only)."""

    vault: SeedVault
    log_keys: LogKeys
    sources: KeySources
    lock: DataDirLock | None = None
    created: bool = False
    """Made now: a fresh data dir."""

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None


class DataDirLock:
    """An exclusive flock on the data dir itself, and on DIR/fairdeck.lock (the holder's pid).

    The directory's lock is the one that excludes: deleting or replacing ``fairdeck.lock`` under
    a live dealer gets nobody past it (a lock on a path's file is lost with the path). The file
    is still locked too, so a dealer of an older fairdeck, which locks only the file, is kept out,
    and its pid names the holder in a refusal. The file stays (removing it would race with the
    next dealer); both locks go with the process, however it ends.
    """

    def __init__(self, fd: int, path: Path, *, inherited: bool = False, file_fd: int = -1) -> None:
        self._fd = fd
        self._file_fd = file_fd
        self.path = path
        self._inherited = inherited

    def fileno(self) -> int:
        """The directory's locked descriptor (what a ``serve --processes`` supervisor passes down)."""
        return self._fd

    @classmethod
    def inherit(cls, fd: int, data_dir: Path) -> DataDirLock:
        """The lock a ``serve --processes`` supervisor holds, from the descriptor it passed down.

        The descriptor must be of this data dir, and the lock must be its own: flock belongs to
        the open file, which the supervisor and its workers share, so taking it again through
        that descriptor succeeds only for them.
        """
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(data_dir))
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            raise StartupRefused(
                f"the data dir lock passed down by the supervisor (descriptor {fd}) is not held: "
                f"{e.strerror or e}; run `fairdeck serve --processes N`, not its workers by hand"
            ) from None
        if not same:
            raise StartupRefused(
                f"descriptor {fd} passed down by the supervisor is not data dir {data_dir}; "
                "run `fairdeck serve --processes N`, not its workers by hand"
            )
        return cls(fd, data_dir / LOCK_NAME, inherited=True)

    @classmethod
    def acquire(cls, data_dir: Path, *, holder: str = "dealer", option: str = "--data") -> DataDirLock:
        path = data_dir / LOCK_NAME
        busy = (
            f"data dir {data_dir} is in use by another {holder} (pid {{pid}} holds it); "
            f"stop that {holder} first, or give this one another {option}"
        )
        try:
            fd = safefiles.lock_directory(data_dir)
        except safefiles.DirectoryBusy:
            raise StartupRefused(busy.format(pid=_holder_pid(data_dir))) from None
        except OSError as e:
            if e.errno in (errno.EROFS, errno.ENOSPC):
                raise os_refusal(e, data_dir) from None
            raise StartupRefused(f"cannot lock data dir {data_dir}: {e.strerror or e}") from None
        try:
            file_fd = safefiles.open_file(data_dir, LOCK_NAME, os.O_RDWR | os.O_CREAT)
            os.fchmod(file_fd, 0o600)
        except safefiles.UnsafeFile as e:
            os.close(fd)
            raise StartupRefused(f"{e}: remove it (the dealer makes its own lock file)") from None
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EROFS, errno.ENOSPC):
                raise os_refusal(e, path) from None
            raise StartupRefused(f"cannot lock data dir {data_dir} ({path}): {e.strerror or e}") from None
        try:
            fcntl.flock(file_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            pid = os.pread(file_fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(file_fd)
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StartupRefused(f"cannot lock data dir {data_dir} ({path}): {e.strerror}") from None
            raise StartupRefused(busy.format(pid=pid)) from None
        os.ftruncate(file_fd, 0)
        os.pwrite(file_fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd, path, file_fd=file_fd)

    def release(self) -> None:
        if self._fd >= 0:
            if not self._inherited:  # a worker's unlock would unlock its whole group
                with contextlib.suppress(OSError):
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
        if self._file_fd >= 0:
            os.close(self._file_fd)
            self._file_fd = -1


def _holder_pid(data_dir: Path) -> str:
    """The pid the lock's holder wrote, as far as it can be read (a deleted file: unknown)."""
    try:
        return (
            safefiles.read_bytes(data_dir, LOCK_NAME, max_bytes=64).decode("ascii", "replace").strip()
            or "unknown"
        )
    except (OSError, ValueError):
        return "unknown"


# -- before storage opens ------------------------------------------------------------------------


def _lock(data_dir: Path, inherited_fd: int | None) -> DataDirLock:
    """The data dir's lock: taken now, or (a ``serve --processes`` worker) the supervisor's."""
    return (
        DataDirLock.acquire(data_dir) if inherited_fd is None else DataDirLock.inherit(inherited_fd, data_dir)
    )


@contextlib.contextmanager
def _refusing() -> Iterator[None]:
    """A seed key that does not load, or a file the OS refuses, as one StartupRefused line."""
    try:
        yield
    except VaultError as e:
        raise StartupRefused(str(e)) from None
    except OSError as e:
        raise os_refusal(e, e.filename) from None


def os_refusal(e: OSError, filename: object) -> StartupRefused:
    """The one line for a file the OS refuses: a read-only or full file system said as such."""
    where = f" {filename}" if filename else ""
    if e.errno == errno.EROFS:
        return StartupRefused(
            f"cannot use{where}: it is on a read-only file system; remount it read-write (check the "
            "disk first: a file system turns read-only after I/O errors); the database is not damaged"
        )
    if e.errno == errno.ENOSPC:
        return StartupRefused(
            f"cannot use{where}: the disk is full; free some space and start again; "
            "the database is not damaged"
        )
    return StartupRefused(
        f"cannot use{where}: {e.strerror or e}; check that the path exists and this user may write it"
    )


def prepare(
    config: ServerConfig, environ: Mapping[str, str] | None = None, *, lock_fd: int | None = None
) -> Identity:
    """Load (or, in a fresh SQLite data dir, make) the keys, and lock the data dir (on PostgreSQL
    only with --codealer: its codeal.db belongs to one process; codeal_claim.py relies on it).

    Refuses, having written nothing, any state that is not whole. ``lock_fd``: a worker of
    ``serve --processes`` shares its supervisor's lock rather than taking one.
    """
    with _refusing():
        return _prepare(config, environ, lock_fd)


def _prepare(config: ServerConfig, environ: Mapping[str, str] | None, lock_fd: int | None) -> Identity:
    env = os.environ if environ is None else environ
    src = KeySources.of(config.data_dir, config.log_key_file, config.seed_key_file, env)
    if config.db is not None:  # PostgreSQL: the keys are shared by replicas and never made here
        for where, path in src.key_files():
            if not path.exists():
                raise StartupRefused(
                    f"{where} does not exist: replicas on PostgreSQL share their keys and serve never "
                    f"creates one; restore it from backup, or make new ones with "
                    f"`fairdeck init --keys-only --log-key-file PATH --seed-key-file PATH`"
                )
        lock = None
        if config.codealer is not None:  # its codeal.db is one process's: one dealer per data dir
            config.data_dir.mkdir(parents=True, exist_ok=True)
            lock = _lock(config.data_dir, lock_fd)
        try:
            return Identity(_load_seed(src, env), load_log_keys(src.log_key, config.log_origin), src, lock)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
    db = config.data_dir / DB_NAME
    has_db = db.is_file() and db.stat().st_size > 0
    present = [(where, path) for where, path in src.key_files() if path.exists()]
    if not has_db:
        if present:
            where, _ = present[0]
            state = "empty" if db.exists() else "missing"
            raise StartupRefused(
                f"database {db} is {state} but its {where} exists: "
                f"{RESTORE.replace('restore it', 'restore the database', 1)} "
                "(a new log under the same key would contradict what that key signed); "
                f"to start a new log instead, move the keys away and run `{src.init_command()}`"
            )
        for where, _ in src.key_files():
            if where.startswith("--"):  # given explicitly and missing: never made by serve
                raise StartupRefused(
                    f"{where} does not exist and serve never creates a key it is given; "
                    f"restore it from backup, or make new keys with `{src.init_command()}`"
                )
        new_log_keys(config.log_origin)  # a bad --log-origin is refused before anything is made
        config.data_dir.mkdir(parents=True, exist_ok=True)
        lock = _lock(config.data_dir, lock_fd)
        try:
            vault, keys = _create(src, config.log_origin, env, make_db=True)
        except BaseException:
            lock.release()
            raise
        return Identity(vault, keys, src, lock, created=True)
    for where, path in src.key_files():
        if not path.exists():
            raise StartupRefused(
                f"{where} is missing but the database {db} exists: restore the key from backup "
                "(a new key could not open its sealed seeds nor sign on from its checkpoints)"
            )
    lock = _lock(config.data_dir, lock_fd)
    try:
        return Identity(_load_seed(src, env), load_log_keys(src.log_key, config.log_origin), src, lock)
    except BaseException:
        lock.release()
        raise


def _load_seed(src: KeySources, env: Mapping[str, str]) -> SeedVault:
    return load_vault(src.seed_key or Path(os.devnull), environ=env)


def _create(
    src: KeySources, origin: str | None, env: Mapping[str, str], *, make_db: bool
) -> tuple[SeedVault, LogKeys]:
    """Make the keys in files (and the SQLite database): all of them, or, on a failure, none."""
    from fairdeck_server.storage.sqlite import create_database

    db = src.data_dir / DB_NAME
    targets = [*src.key_files(), *([("database", db)] if make_db else [])]
    for where, path in targets:
        if path.exists() and (path != db or path.stat().st_size > 0):
            raise StartupRefused(f"{where} already exists; fairdeck init never replaces a key or a database")
    keys = new_log_keys(origin)
    made: list[Path] = []
    try:
        write_private_file(src.log_key, keys.to_text(), create=True)
        made.append(src.log_key)
        if src.seed_key is not None:
            vault = create_key_file(src.seed_key)
            made.append(src.seed_key)
        else:
            vault = _load_seed(src, env)
        if make_db:
            made.append(db)
            create_database(db, {LOG_KEY_META: keys.signer.verifier.to_string()})
    except BaseException:
        for path in made:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    return vault, keys


def init(
    data_dir: Path,
    *,
    log_key_file: Path | None = None,
    seed_key_file: Path | None = None,
    log_origin: str | None = None,
    keys_only: bool = False,
    environ: Mapping[str, str] | None = None,
) -> LogKeys:
    """``fairdeck init``: new keys (and, unless ``keys_only``, a new SQLite database).

    Refuses if any of them exists; returns the log keys (whose verifier key is public).
    """
    with _refusing():
        return _init(data_dir, log_key_file, seed_key_file, log_origin, keys_only, environ)


def _init(
    data_dir: Path,
    log_key_file: Path | None,
    seed_key_file: Path | None,
    log_origin: str | None,
    keys_only: bool,
    environ: Mapping[str, str] | None,
) -> LogKeys:
    env = os.environ if environ is None else environ
    src = KeySources.of(data_dir, log_key_file, seed_key_file, env)
    new_log_keys(log_origin)  # a bad origin is refused before anything is made
    if keys_only:
        return _create(src, log_origin, env, make_db=False)[1]
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = DataDirLock.acquire(data_dir)
    try:
        return _create(src, log_origin, env, make_db=True)[1]
    finally:
        lock.release()


# -- once storage is open ------------------------------------------------------------------------


class IdentityStore(Protocol):
    """What the start-up checks read from an engine (both have it)."""

    async def checkpoint(self, size: int | None = None) -> StoredCheckpoint | None: ...

    async def sealed_seed_samples(self) -> list[tuple[str, bytes]]: ...

    async def get_meta(self, name: str) -> str | None: ...

    async def set_meta(self, name: str, expected: str | None, value: str) -> bool: ...


async def check_store(store: IdentityStore, identity: Identity, where: str) -> None:
    """Refuse keys that are not this store's; record the log key on first use (and after a rotation).

    ``where``: how to name the store in a message (a path or host:port/db).
    """
    keys, src = identity.log_keys, identity.sources
    head = await store.checkpoint()
    if head is not None:
        try:
            open_checkpoint(head.note, keys.verifiers, keys.signer.name)
        except CheckpointError:
            raise StartupRefused(
                f"{src.log_where} does not verify the latest checkpoint of {where} (tree size {head.size}): "
                "it is not this log's key; restore the key file from backup (after `fairdeck rotate-key "
                "log` the file lists the old key as retired, which is fine)"
            ) from None
    current = keys.signer.verifier.to_string()
    retired = {v.to_string() for v in keys.retired}
    for _ in range(3):  # another replica may record or rotate it at the same moment
        recorded = await store.get_meta(LOG_KEY_META)
        if recorded == current:
            break
        if recorded is not None and recorded not in retired:
            raise StartupRefused(
                f"{src.log_where} is not the log key of {where} (it records {_short(recorded)}, this key is "
                f"{_short(current)}): every replica needs the same log key file; after a rotation the "
                "file must list the old key as retired (fairdeck rotate-key log)"
            )
        if await store.set_meta(LOG_KEY_META, recorded, current):
            break
    else:
        raise StartupRefused(f"could not record the log key in {where}: it kept changing; try again")
    for hand_id, sealed in await store.sealed_seed_samples():
        try:
            identity.vault.open(hand_id, sealed)
        except VaultError:
            raise StartupRefused(
                f"{src.seed_where} cannot open the sealed seed of open hand {hand_id} (seed key id "
                f"{sealed[1:5].hex()}): restore the seed key from backup (after `fairdeck rotate-key seed` "
                "the old key stays in the file, after the new one)"
            ) from None
    await publish_rotations(store, keys)  # last: a refused start writes nothing


async def publish_rotations(store: IdentityStore, keys: LogKeys) -> None:
    """Record each rotation statement of the key file in the store, once (auditors read them there),
    and say once when a retired key has none: auditors who hold only that key cannot follow."""
    for note in keys.rotations:
        name = f"{ROTATION_META}{open_rotation(note).new.key_id:08x}"
        if await store.get_meta(name) is None:
            await store.set_meta(name, None, note.decode())
    for old in keys.unvouched():
        log.warning(
            "the log key file lists retired key %s+%08x without a rotation statement (rotated by an "
            "older fairdeck): auditors who hold only that key cannot follow the rotation; give them "
            "the current key",
            old.name,
            old.key_id,
        )


def _short(verifier: str) -> str:
    """A verifier key named by its origin and key id (public either way, but shorter)."""
    parts = verifier.split("+")
    return "+".join(parts[:2]) if len(parts) >= 2 else verifier
