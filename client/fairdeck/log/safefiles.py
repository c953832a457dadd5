"""Files in directories we did not make (a collection handed to a lab, a tiles or data directory).

Invariants: below the directory given (``root``, the one path trusted as typed), no symbolic link
is followed and nothing but a regular file is read or written: each component is opened with
``O_NOFOLLOW`` relative to its parent's descriptor, so a link or a FIFO planted anywhere is an
``UnsafeFile`` naming it, never a write outside ``root`` nor a read that blocks. Sizes are checked
on the open descriptor before reading. A replaced file is written under a fresh temporary name
(``O_EXCL | O_NOFOLLOW``), fsynced, renamed over its name (which replaces a link, never its
target) and its directory fsynced. ``lock_directory`` is exclusion that no deleted file undoes: an
``flock`` on the directory itself. Used by the client and the server alike (stdlib only).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeFile(OSError):
    """A path below a hostile directory that is not what it must be (a link, a FIFO, a device,
    a directory where a file belongs, too large); ``str()`` is one line naming it."""

    def __init__(self, path: Path | str, why: str) -> None:
        super().__init__(errno.EINVAL, why, str(path))
        self.why = why

    def __str__(self) -> str:
        return f"{self.filename} {self.why}"


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISFIFO(mode):
        return "is a FIFO"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    return "is a regular file" if stat.S_ISREG(mode) else "is of another kind"


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"not a relative path inside a directory: {rel!r}")
    return parts


def _refused(path: Path, e: OSError, want: str = "a regular file") -> OSError:
    """An ``O_NOFOLLOW`` refusal as an UnsafeFile naming what is there; other errors as they are."""
    if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR):
        try:
            return UnsafeFile(path, f"{_kind(os.lstat(path).st_mode)}, not {want}")
        except OSError:
            pass
    e.filename = str(path)
    return e


def open_dir(root: Path, rel: str = "", *, create: bool = False) -> int:
    """A descriptor of directory ``root/rel``, no link followed below ``root``; made when ``create``."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    path = root
    try:
        for part in [p for p in rel.split("/") if p not in ("", ".")]:
            if part == "..":
                raise ValueError(f"not a relative path inside a directory: {rel!r}")
            path = path / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                raise _refused(path, e, "a directory") from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(root: Path, rel: str, flags: int = os.O_RDONLY, *, max_bytes: int | None = None) -> int:
    """A descriptor of the regular file ``root/rel`` (``flags`` as ``os.open``'s; ``O_CREAT``
    makes it, with ``O_EXCL`` only if new); UnsafeFile if it is anything else or, with
    ``max_bytes``, larger. A FIFO is found out without blocking (``O_NONBLOCK`` at open)."""
    parent, _, name = rel.rpartition("/")
    _parts(rel)
    dir_fd = open_dir(root, parent, create=bool(flags & os.O_CREAT))
    path = root / rel
    try:
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
        except OSError as e:
            raise _refused(path, e) from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(path, _kind(st.st_mode) + ", not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise UnsafeFile(path, f"is {st.st_size:,} bytes, more than the {max_bytes:,} it may hold")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def lstat(root: Path, rel: str) -> os.stat_result | None:
    """``lstat`` of ``root/rel`` through no link; None when it does not exist."""
    parent, _, name = rel.rpartition("/")
    try:
        dir_fd = open_dir(root, parent)
    except FileNotFoundError:
        return None
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    finally:
        os.close(dir_fd)


def read_bytes(root: Path, rel: str, *, max_bytes: int) -> bytes:
    """The bytes of the regular file ``root/rel``, of at most ``max_bytes`` (checked first)."""
    fd = open_file(root, rel, max_bytes=max_bytes)
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while read
        raise UnsafeFile(root / rel, f"holds more than the {max_bytes:,} bytes it may")
    return data


@contextlib.contextmanager
def replacing(root: Path, rel: str, *, mode: int = 0o644) -> Iterator[BinaryIO]:
    """A new file to write, which replaces ``root/rel`` atomically and durably when the block ends
    without an error (module docstring); removed, and nothing replaced, otherwise."""
    parent, _, name = rel.rpartition("/")
    _parts(rel)
    dir_fd = open_dir(root, parent, create=True)
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        with os.fdopen(os.open(tmp, flags, mode, dir_fd=dir_fd), "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        try:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as e:
            raise _refused(root / rel, e) from None
        os.fsync(dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    finally:
        os.close(dir_fd)


def write_replacing(root: Path, rel: str, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``root/rel`` by ``data`` atomically and durably (module docstring)."""
    with replacing(root, rel, mode=mode) as f:
        f.write(data)


def create_new(root: Path, rel: str, data: bytes) -> bool:
    """Create ``root/rel`` holding ``data`` unless something is there (False then): written under
    a temporary name, fsynced, then linked into place, which never replaces nor follows a link.
    The caller fsyncs the directory (several files are made durable at once)."""
    parent, _, name = rel.rpartition("/")
    _parts(rel)
    dir_fd = open_dir(root, parent, create=True)
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)  # also after a failed write (a full disk): no half file
        os.close(dir_fd)


def write_path(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """``write_replacing`` of one file named by its whole path (its directory trusted as typed)."""
    write_replacing(path.parent, path.name, data, mode=mode)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class DirectoryBusy(Exception):
    """Another process holds the directory's lock."""


def lock_directory(directory: Path) -> int:
    """An exclusive ``flock`` on ``directory`` itself, not taken from any other process: its
    descriptor (close it, or end, to let go). No file can be deleted or replaced to get past it;
    renaming or deleting the directory leaves nothing of the data to share. DirectoryBusy when
    another process holds it."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise DirectoryBusy(str(directory)) from None
        raise
    return fd
