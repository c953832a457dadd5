"""Small local files a user names (a log key file, a witness policy, a PEM), read with a bound.

Only a regular file is read, and at most ``MAX_BYTES`` of it: a device (``/dev/zero``), a FIFO or a
directory given by mistake is one error naming what it is, never a read without end. The file is
opened without blocking, so a FIFO with no writer does not hang the open either; a reader that
takes a pipe (``--key @<(...)``) says so with ``pipes=True``, and reads it, bounded, to its end.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_BYTES = 1 << 20
"""Far above any key list, policy or certificate chain a user keeps."""


class LocalFileError(OSError):
    """A local file that is not a regular file of at most the size allowed; its message says which."""


def read_local(path: str | Path, limit: int = MAX_BYTES, *, pipes: bool = False) -> bytes:
    """The bytes of the regular file at ``path`` (or of a pipe, with ``pipes``); LocalFileError (an
    OSError) for anything else, or the OSError of the open (no such file, permission)."""
    data = read_local_head(path, limit, pipes=pipes)
    if len(data) > limit:
        raise LocalFileError(f"it is larger than {limit} bytes")
    return data


def read_local_head(path: str | Path, limit: int, *, pipes: bool = False) -> bytes:
    """``read_local``, except that a file larger than ``limit`` is not refused: its first
    ``limit + 1`` bytes come back, for a caller whose own rules say what a file that long is."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise LocalFileError("it is a directory")
        if pipes and stat.S_ISFIFO(mode):
            os.set_blocking(fd, True)
        elif not stat.S_ISREG(mode):
            raise LocalFileError("it is not a regular file (a device, a FIFO or a socket)")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_local_text(path: str | Path, limit: int = MAX_BYTES) -> str:
    """``read_local``, as UTF-8 text; LocalFileError if it is not."""
    try:
        return read_local(path, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise LocalFileError("it is not UTF-8 text") from None
