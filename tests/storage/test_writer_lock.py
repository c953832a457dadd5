"""The writers' lock of ``serve --processes N`` waits a bounded time, and hands the lock over the
moment it is free. Two WriterLocks on one file are two open files, so they exclude each other as
two processes do (flock belongs to the open file)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from fairdeck_server.storage.sqlite.writer_lock import WriterLock
from tests.support.speed import scaled
from tests.support.waits import hold_silent, pace, wait_for


def make(path: Path, timeout: float) -> WriterLock:
    lock = WriterLock(path, timeout)
    lock.open()
    return lock


@pytest.mark.serial
def test_a_busy_lock_is_given_up_after_the_timeout_and_taken_when_free(tmp_path: Path) -> None:
    path = tmp_path / "writer.lock"
    holder, waiter = make(path, 5.0), make(path, 0.3)
    try:
        assert holder.acquire()
        assert holder.holder() == os.getpid() and holder.held_for() >= 0
        began = time.monotonic()
        assert not waiter.acquire()  # held: the wait ends, it does not hang
        assert 0.25 < time.monotonic() - began < 0.3 + scaled(2.7)  # the timeout; the rest, work
        assert waiter.held_for() == 0
        # The waiter's helper still waits; once the holder lets go it takes the lock and, since
        # nobody wants it any more, lets it go at once: the holder can have it again.
        holder.release()
        wait_for("the waiter's helper to take the lock and let it go", lambda: not waiter._pending)
        assert holder.acquire()
        # A waiter that is still waiting when the holder lets go gets the lock at once.
        got: list[float] = []

        def wait() -> None:
            waiter.timeout = 10.0
            ok = waiter.acquire()
            got.append(time.monotonic() if ok else -1)

        thread = threading.Thread(target=wait)
        thread.start()
        wait_for("the waiter to wait for the lock", lambda: waiter._wanted and waiter._pending)
        released = time.monotonic()
        holder.release()
        thread.join(timeout=10)
        assert got and got[0] > 0 and got[0] - released < scaled(1.0, under=5.0)  # not its 10 s timeout
        assert waiter.held_for() > 0
        holder.timeout = 0.2
        assert not holder.acquire()  # the waiter holds it now
        waiter.release()
        assert holder.acquire()
        holder.release()
    finally:
        holder.close()
        waiter.close()


def test_many_rounds_never_grant_the_lock_to_two_at_once(tmp_path: Path) -> None:
    """Three writers taking turns, with waits that time out now and then: never two inside."""
    path = tmp_path / "writer.lock"
    locks = [make(path, 0.02) for _ in range(3)]
    inside = 0
    count = threading.Lock()  # guards the counter only, never the flock
    overlaps = []
    entries = [0, 0, 0]
    stop = time.monotonic() + 2.0

    def run(i: int) -> None:
        nonlocal inside
        while time.monotonic() < stop:
            if not locks[i].acquire():
                continue
            with count:
                inside += 1
                if inside > 1:
                    overlaps.append(i)
            entries[i] += 1
            hold_silent(0.005)  # inside: a writer's transaction
            with count:
                inside -= 1
            locks[i].release()
            # Work between transactions: without it the thread that let go takes the lock back
            # before the others' helpers wake (on a loaded machine one thread had 272 turns, the
            # others 1 and 0).
            pace(0.005)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for lock in locks:
        lock.close()
    assert overlaps == []
    assert all(n > 5 for n in entries), entries


def test_writers_on_a_shared_descriptor_exclude_each_other_after_the_file_is_deleted(tmp_path: Path) -> None:
    """Locks made on the group's inherited descriptor lock its file, not its name: deleted (and a
    new file made by the name), they still exclude each other."""
    path = tmp_path / "writer.lock"
    shared = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    path.unlink()
    path.write_text("")  # someone else's file by the name now
    first, second = WriterLock(path, 0.2, shared_fd=shared), WriterLock(path, 0.2, shared_fd=shared)
    first.open()
    second.open()
    try:
        assert first.acquire()
        assert not second.acquire()
        first.release()
        assert second.acquire()
        second.release()
    finally:
        first.close()
        second.close()
        os.close(shared)
