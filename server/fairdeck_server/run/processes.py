"""``serve --processes N``: one dealer on several cores, as N serving processes on one port.

``supervise`` runs the start-up checks once and holds the data dir's lock for the group, then
starts N workers, each a whole ``fairdeck serve`` that binds the port with SO_REUSEPORT, inherits
the lock's descriptor and writes the one SQLite database (its write lock is the serial section).
Signals go to every worker; if one dies, the others are stopped and the supervisor exits 1 with
one line; if the supervisor dies, the workers see their lifeline pipe end and drain. Per-tenant
caps count across the workers (group_counts.py); rates, health and metrics are per worker;
witnesses are refused; with ``--tiles`` worker 0 writes the tiles (log_lease.py). A worker that
hangs stops its heartbeat (app.py), and one the kernel shows stopped (SIGSTOP, a debugger) makes
no progress by definition; the supervisor kills either and starts another, in one line. Silence
is counted only while the supervisor itself runs: a pause of the whole group (a container pause,
Ctrl-Z) replaces no one. The design: docs/scaling.md
("Several processes on one SQLite file").
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fairdeck.log.audit import LogUnreadable
from fairdeck.log.tiles import TileError
from fairdeck_server.addresses import probe_listen, split_host_port
from fairdeck_server.policy import group_counts
from fairdeck_server.publishing.tile_publishing import complete_before_start, tiles_refusal
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.run.startup import prepare
from fairdeck_server.storage import WRITER_LOCK_NAME, open_writer_lock

if TYPE_CHECKING:
    from fairdeck_server.run.config import ServerConfig

WORKER_ENV = "FAIRDECK_WORKER"
"""``INDEX/COUNT`` of a worker process; absent in the supervisor and in a plain dealer."""
LISTEN_ENV = "FAIRDECK_WORKER_LISTEN"
"""The address every worker binds (the supervisor resolved port 0 to one port for all)."""
LOCK_ENV = "FAIRDECK_WORKER_LOCK_FD"
"""The descriptor of the data dir's lock file, locked by the supervisor."""
LIFELINE_ENV = "FAIRDECK_WORKER_LIFELINE_FD"
"""The read end of a pipe whose write end only the supervisor holds: end of file when it dies."""
COUNTS_ENV = "FAIRDECK_WORKER_COUNTS_FD"
"""The descriptor of the per-tenant counts the workers share (group_counts.py): caps per group."""
WRITER_LOCK_ENV = "FAIRDECK_WORKER_WRITER_LOCK_FD"
"""The descriptor of the writers' lock file (SQLite), opened once here: a worker locks that file,
whatever its path names by then (storage/sqlite/writer_lock.py)."""
HEARTBEAT_ENV = "FAIRDECK_WORKER_HEARTBEAT_FD"
"""The write end of the pipe a worker beats on (its supervisor reads the other end)."""
START_TIMEOUT = 60.0
LOOK_S = 0.1
"""How often the supervisor looks at its workers."""
STOPPED_S = 0.3
"""A worker the kernel shows stopped (state T or t) at every look for this long is replaced
without waiting for worker_timeout (at most that): it holds its connections, and maybe the
writers' lock, and cannot move until someone continues it."""
STOPPED_LOOKS = 3
"""Looks in a row that must all see it stopped: a profiler's pause of a millisecond never counts."""
KILL_WAIT_S = 5.0
"""How long the supervisor waits for a worker it killed to exit. SIGKILL ends any process the
kernel lets run, but one in uninterruptible sleep (state D: I/O to a dead disk or network file
system) exits only when that I/O returns, maybe never; an unbounded wait there left the whole
group unsupervised, its other workers never replaced and SIGTERM unanswered."""
STOP_STORAGE_S = 20.0
"""Past the drain's grace, how long a stopping worker may still take: its last checkpoint waits
for storage 10 s at most, and its writer thread 10 s more (docs/operations.md, "Stopping")."""
SELF_PAUSE_S = 1.0
"""A gap this long between two of the supervisor's own looks means it was paused or starved too:
the gap is not counted in any worker's silence."""


@dataclass(frozen=True)
class Worker:
    """What a worker process is told by its supervisor."""

    index: int
    count: int
    listen: str
    lock_fd: int | None
    lifeline_fd: int | None = None
    heartbeat_fd: int | None = None
    counts_fd: int | None = None
    writer_lock_fd: int | None = None

    @classmethod
    def from_environ(cls, environ: dict[str, str] | os._Environ[str] = os.environ) -> Worker | None:
        text = environ.get(WORKER_ENV)
        if text is None:
            return None
        index, _, count = text.partition("/")
        lock, lifeline, beat = environ.get(LOCK_ENV), environ.get(LIFELINE_ENV), environ.get(HEARTBEAT_ENV)
        return cls(
            int(index),
            int(count),
            environ[LISTEN_ENV],
            int(lock) if lock else None,
            int(lifeline) if lifeline else None,
            int(beat) if beat else None,
            int(environ[COUNTS_ENV]) if environ.get(COUNTS_ENV) else None,
            int(environ[WRITER_LOCK_ENV]) if environ.get(WRITER_LOCK_ENV) else None,
        )

    def metrics_listen(self, listen: str | None) -> str | None:
        """Worker i's /metrics address: the configured port plus i (port 0 stays 0: a free one)."""
        if listen is None:
            return None
        host, port = split_host_port(listen)
        return listen if port == 0 else f"{host}:{port + self.index}"


def supervise(config: ServerConfig, argv: Sequence[str]) -> int:
    """Run ``config.processes`` workers of ``fairdeck <argv>`` until a signal or a worker's death."""
    count = config.processes
    if config.witnesses:
        raise StartupRefused(
            f"--processes {count} with --witness: each process would ask the witnesses to cosign on "
            "its own; run a dealer with witnesses as --processes 1"
        )
    # The port first, as one dealer does: a port in use is refused before a fresh data dir gets
    # its keys. The probe binds without SO_REUSEPORT, so it also refuses a port that another
    # group's workers share among themselves.
    probe_listen("--listen", config.listen)
    reserved = _reserve(config.listen)
    identity = prepare(config)  # keys made or checked, the data dir locked: once, here
    if config.tiles is not None:  # whole before any worker hands out a checkpoint
        try:
            complete_before_start(config, identity.log_keys.signer.name, identity.log_keys.rotations)
        except (TileError, OSError, LogUnreadable) as e:
            identity.release()
            reserved.close()
            raise StartupRefused(tiles_refusal(config.tiles, e)) from None
    try:
        writer_lock = _writer_lock(config)
    except StartupRefused:
        identity.release()
        reserved.close()
        raise
    listen = _with_port(config.listen, reserved.getsockname()[1])
    env = dict(os.environ, **{LISTEN_ENV: listen})
    fds: tuple[int, ...] = ()
    if identity.lock is not None:
        fd = identity.lock.fileno()
        os.set_inheritable(fd, True)
        env[LOCK_ENV] = str(fd)
        fds = (fd,)
    # The workers' lifeline: they hold only the read end, so it ends when this process does.
    lifeline_read, lifeline_write = os.pipe()  # both close-on-exec; the read end is passed below
    env[LIFELINE_ENV] = str(lifeline_read)
    counts = group_counts.make(count)  # one table for the group, kept for the replacements too
    env[COUNTS_ENV] = str(counts)
    fds = (*fds, lifeline_read, counts)
    if writer_lock is not None:
        env[WRITER_LOCK_ENV] = str(writer_lock)
        fds = (*fds, writer_lock)
    workers: list[_Running] = []
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                w.proc.send_signal(signal.SIGTERM)

    def spawn(index: int) -> _Running:
        return _Running.spawn(index, count, [sys.executable, "-m", "fairdeck.cli", *argv], env, fds)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for i in range(count):
            workers.append(spawn(i))
        pids = _wait_listening([w.proc for w in workers], lambda: stopping)
        if pids is None:
            stop(signal.SIGTERM, None)
            status = _reap(workers, config.grace_seconds + 5)
            if stopping and all(s == 0 for s in status):
                return 0
            failed = next((i for i, s in enumerate(status) if s != 0), 0)
            how = (
                "it did not exit, held by the kernel"
                if status[failed] is None
                else f"exit status {status[failed]}"
            )
            print(
                f"fairdeck serve: process {failed + 1} of {count} did not start ({how}); no process serves",
                file=sys.stderr,
            )
            return 2
        print(
            f"fairdeck dealer listening on {listen} (data: {config.data_dir}; {count} processes, "
            f"pids {' '.join(map(str, pids))})",
            flush=True,
        )
        for w in workers:
            w.last_beat = time.monotonic()
            w.listening = True
        return _watch(workers, spawn, lambda: stopping, stop, config.grace_seconds + 5, config.worker_timeout)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        # Never leave a worker behind, whatever happened here; one given up on was said already.
        _kill([w for w in workers if w.proc.poll() is None and not w.given_up], count)
        for w in workers:
            w.close()
        reserved.close()
        os.close(lifeline_read)
        os.close(lifeline_write)
        os.close(counts)
        if writer_lock is not None:
            os.close(writer_lock)
        identity.release()


def _writer_lock(config: ServerConfig) -> int | None:
    """The writers' lock file for the whole group (SQLite only), or None (PostgreSQL)."""
    if config.db is not None:
        return None
    try:
        return open_writer_lock(config.data_dir)
    except OSError as e:
        raise StartupRefused(
            f"cannot open the writers' lock {config.data_dir / WRITER_LOCK_NAME}: {e.strerror or e}"
        ) from None


def _reserve(listen: str) -> socket.socket:
    """Bind the port with SO_REUSEPORT and keep it for the group's life: port 0 becomes one free
    port for every worker, and no process without SO_REUSEPORT can take it meanwhile."""
    host, port = split_host_port(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as e:
        sock.close()
        raise StartupRefused(
            f"--listen {listen}: cannot listen there ({e.strerror or e}); "
            "stop what holds it, or pick another --listen"
        ) from None
    return sock


def _with_port(listen: str, port: int) -> str:
    return f"{listen.rsplit(':', 1)[0]}:{port}"


def _wait_listening(workers: list[subprocess.Popen[bytes]], stopping: Callable[[], bool]) -> list[int] | None:
    """Each worker's pid once it printed its listening line; None if one exited first."""
    waiting = {w.stdout.fileno(): w for w in workers if w.stdout is not None}
    deadline = time.monotonic() + START_TIMEOUT
    while waiting:
        if stopping() or time.monotonic() > deadline:
            return None
        ready, _, _ = select.select(list(waiting), [], [], 0.2)
        for fd in ready:
            w = waiting[fd]
            assert w.stdout is not None
            line = w.stdout.readline()
            if not line:  # exited before it listened
                return None
            if line.startswith(b"fairdeck dealer listening on "):
                del waiting[fd]
    for w in workers:  # what a worker prints later is not needed; never let its pipe fill
        if w.stdout is not None:
            os.set_blocking(w.stdout.fileno(), False)
    return [w.pid for w in workers]


class _Running:
    """A worker process as its supervisor sees it: the process, and the read end of its heartbeat."""

    def __init__(self, index: int, proc: subprocess.Popen[bytes], beats: int) -> None:
        self.index = index
        self.proc = proc
        self.beats = beats
        self.last_beat = time.monotonic() + START_TIMEOUT  # no beat is due before it has started
        self.listening = False
        """It printed its listening line (a replacement's is read by ``drain``)."""
        self.stopped_since: float | None = None
        self.stopped_looks = 0
        self.stopped_switches = -1
        """The context switches of the stop the looks since ``stopped_since`` saw."""
        self.continued = False
        """The group is stopping and the supervisor continued it (``_unstop``)."""
        self.given_up = False
        """SIGKILL did not end it within KILL_WAIT_S (``_kill``): it is not waited for again."""

    @classmethod
    def spawn(
        cls, index: int, count: int, argv: list[str], env: dict[str, str], fds: tuple[int, ...]
    ) -> _Running:
        read, write = os.pipe()  # both close-on-exec; the write end is passed below
        os.set_blocking(read, False)
        try:
            proc = subprocess.Popen(  # noqa: S603 - this same program, with the operator's own arguments
                argv,
                env={**env, WORKER_ENV: f"{index}/{count}", HEARTBEAT_ENV: str(write)},
                pass_fds=(*fds, write),
                stdout=subprocess.PIPE,
            )
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)  # the worker's copy is the only one: its death ends the pipe
        return cls(index, proc, read)

    def heard(self, now: float) -> None:
        """Take in the beats sent since the last look."""
        with contextlib.suppress(BlockingIOError):
            if os.read(self.beats, 4096):
                self.last_beat = now

    def stopped_for(self, now: float) -> float:
        """How long every look in a row saw the kernel hold it stopped, and it did not run in
        between (0 while fewer than STOPPED_LOOKS did, or where /proc cannot tell). A look is an
        instant: a process stopped and continued over and over (cpulimit; strace with a busy
        process) is seen stopped at most looks while it runs between them, and each time it stops
        again it is switched out anew, so its count of context switches moves."""
        seen = _stopped_switches(self.proc.pid)
        if seen is None:
            self.stopped_since, self.stopped_looks = None, 0
            return 0.0
        if self.stopped_since is None or seen != self.stopped_switches:
            self.stopped_since, self.stopped_looks, self.stopped_switches = now, 0, seen
        self.stopped_looks += 1
        return now - self.stopped_since if self.stopped_looks >= STOPPED_LOOKS else 0.0

    def forgive(self, gap: float) -> None:
        """The supervisor itself did not run for ``gap`` seconds: that time is not counted as the
        worker's silence (moved, not reset, so a supervisor that stalls often still replaces a
        worker that never beats)."""
        self.last_beat += gap
        self.stopped_since, self.stopped_looks = None, 0

    def drain(self) -> None:
        """Read what it printed (never let its pipe fill), noting its listening line."""
        if self.proc.stdout is None:
            return
        with contextlib.suppress(BlockingIOError, ValueError):
            out = self.proc.stdout.read()
            if out and b"fairdeck dealer listening on " in out:
                self.listening = True

    def stopped_cleanly(self) -> bool:
        """It drained and exited 0, or SIGTERM ended it before it had started serving."""
        code = self.proc.returncode
        return code == 0 or (code == -signal.SIGTERM and not self.listening)

    def close(self) -> None:
        if self.beats >= 0:
            os.close(self.beats)
            self.beats = -1


def _watch(
    workers: list[_Running],
    spawn: Callable[[int], _Running],
    stopping: Callable[[], bool],
    stop: Callable[[int, object], None],
    grace: float,
    timeout: float,
) -> int:
    """Until every worker exits: 0 when they all drained after a signal, else 1. A worker silent
    for ``timeout`` seconds, or seen stopped for STOPPED_S (at most ``timeout``), is killed and
    replaced. ``timeout`` 0: never. Once the group is told to stop, a worker still running
    ``grace`` + STOP_STORAGE_S seconds later is killed (``_undrained``)."""
    count = len(workers)
    looked = time.monotonic()
    stop_began: float | None = None
    while True:
        now = time.monotonic()
        if now - looked > SELF_PAUSE_S:
            for w in workers:
                w.forgive(now - looked - LOOK_S)
        looked = now
        for w in workers:
            w.drain()
            w.heard(now)
        exited = [w for w in workers if w.proc.poll() is not None]
        if len(exited) + sum(w.given_up for w in workers) >= count:
            break
        if stopping():
            stop_began = now if stop_began is None else stop_began
            bound = grace + STOP_STORAGE_S
            if now - stop_began > bound:  # SIGTERM was not acted on (a blocked loop, a dead disk)
                _undrained([w for w in workers if w.proc.returncode is None and not w.given_up], count, bound)
        if exited and not stopping():
            w = exited[0]
            print(
                f"fairdeck serve: process {w.index + 1} of {count} (pid {w.proc.pid}) exited with "
                f"status {w.proc.returncode}; stopping the others",
                file=sys.stderr,
                flush=True,
            )
            stop(signal.SIGTERM, None)
            _reap(workers, grace)
            return 1
        for k, w in enumerate(workers):
            if stopping():
                if w.proc.returncode is None and w.stopped_for(now) >= STOPPED_S:
                    _unstop(w, count)
                continue
            if timeout <= 0:
                continue
            stopped = w.stopped_for(now)
            if stopped >= min(STOPPED_S, timeout):
                workers[k] = _replace(w, spawn, count, f"{stopped:.1f} s (the kernel shows it stopped)")
            elif now - w.last_beat > timeout:
                workers[k] = _replace(w, spawn, count, f"{now - w.last_beat:.1f} s")
            if workers[k] is not w and stopping():  # told to stop while it waited for the killed one:
                with contextlib.suppress(ProcessLookupError):  # the replacement, started after, was not
                    workers[k].proc.send_signal(signal.SIGTERM)
        time.sleep(LOOK_S)
    if all(w.stopped_cleanly() for w in workers):
        print("fairdeck dealer stopped", flush=True)
        return 0
    return 1


def _undrained(late: list[_Running], count: int, grace: float) -> None:
    """The group was told to stop ``grace`` seconds ago and these workers still run: kill them,
    one line each. Waiting on for them left the supervisor, and the service manager's stop, with
    no end."""
    for w in late:
        print(
            f"fairdeck serve: process {w.index + 1} of {count} (pid {w.proc.pid}) did not drain within "
            f"{grace:g} s of SIGTERM; killed it",
            file=sys.stderr,
            flush=True,
        )
    _kill(late, count)  # one the kernel holds is given up on there, and not waited for


def _unstop(w: _Running, count: int) -> None:
    """While the group stops: a worker the kernel holds stopped cannot act on its SIGTERM, and the
    group would wait for it for ever. Continue it (SIGCONT), so that it drains as the others do;
    one still held (a debugger's stop, which SIGCONT does not end) is killed, in one line."""
    if not w.continued:
        w.continued = True
        w.stopped_since, w.stopped_looks = None, 0
        w.proc.send_signal(signal.SIGCONT)
        return
    w.proc.kill()
    print(
        f"fairdeck serve: process {w.index + 1} of {count} (pid {w.proc.pid}) is held stopped and "
        "cannot drain; killed it",
        file=sys.stderr,
        flush=True,
    )


def _replace(hung: _Running, spawn: Callable[[int], _Running], count: int, silent: str) -> _Running:
    """Kill a worker that stopped answering (SIGKILL ends a stopped process too) and start another
    in its place; say so in one line."""
    _kill([hung], count)
    hung.close()
    new = spawn(hung.index)
    if new.proc.stdout is not None:  # its listening line is not waited for: the others serve meanwhile
        os.set_blocking(new.proc.stdout.fileno(), False)
    print(
        f"fairdeck serve: process {hung.index + 1} of {count} (pid {hung.proc.pid}) stopped answering "
        f"for {silent}; killed it and started pid {new.proc.pid} in its place",
        file=sys.stderr,
        flush=True,
    )
    return new


def _kill(workers: Sequence[_Running], count: int) -> None:
    """SIGKILL ``workers`` and wait for them, all together at most KILL_WAIT_S (not that long for
    each: a dead disk holds every worker, and 5 s each added up past a service manager's stop
    timeout). One still there is said in one line and given up on (``given_up``): never killed
    nor waited for again, so never said twice (it is reaped if it ever exits)."""
    for w in workers:
        with contextlib.suppress(ProcessLookupError):
            w.proc.kill()
    deadline = time.monotonic() + KILL_WAIT_S
    for w in workers:
        try:
            w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.given_up = True
            print(
                f"fairdeck serve: process {w.index + 1} of {count} (pid {w.proc.pid}) did not exit within "
                f"{KILL_WAIT_S:g} s of SIGKILL (state {_state(w.proc.pid)}; D: the kernel holds it in I/O, "
                "a dead disk or network file system); going on without it",
                file=sys.stderr,
                flush=True,
            )


def _state(pid: int) -> str:
    """The process's state letter in /proc (``?`` where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return "?"


def _stopped_switches(pid: int) -> int | None:
    """Where /proc/PID/status shows the process stopped (state T or t): its main thread's count of
    context switches, read in the same look; None where it runs, or where /proc cannot tell
    (not Linux, or no counts: then the heartbeat alone judges it)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            text = f.read()
    except OSError:
        return None
    fields = dict(line.partition(b":")[::2] for line in text.splitlines())
    state = fields.get(b"State", b"").split()
    if not state or state[0] not in (b"T", b"t"):
        return None
    try:
        return int(fields[b"voluntary_ctxt_switches"]) + int(fields[b"nonvoluntary_ctxt_switches"])
    except (KeyError, ValueError):
        return None


def _reap(workers: list[_Running], grace: float) -> list[int | None]:
    """Wait ``grace`` seconds for every worker to exit, then kill the ones left (``_kill``, all
    together). Each one's exit status; None for one the kernel did not let go."""
    deadline = time.monotonic() + grace
    left = []
    for w in workers:
        try:
            w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            left.append(w)
    _kill(left, len(workers))
    return [w.proc.returncode for w in workers]
