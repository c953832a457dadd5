"""``serve --processes N``: one dealer on several cores, as N serving processes on one port.

``supervise`` runs the start-up checks once and holds the data dir's lock for the group, then
starts N workers, each a whole ``fairdeck serve`` that binds the port with SO_REUSEPORT, inherits
the lock's descriptor and writes the one SQLite database (its write lock is the serial section).
Signals go to every worker; if one dies, the others are stopped and the supervisor exits 1 with
one line; if the supervisor dies, the workers see their lifeline pipe end and drain. Limits,
health and metrics are per worker; witnesses are refused; with ``--tiles`` worker 0 writes the
tiles (log_lease.py). The design: docs/scaling.md ("Several processes on one SQLite file").
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
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.startup import prepare
from fairdeck_server.tile_publishing import complete_before_start, tiles_refusal

if TYPE_CHECKING:
    from fairdeck_server.config import ServerConfig

WORKER_ENV = "FAIRDECK_WORKER"
"""``INDEX/COUNT`` of a worker process; absent in the supervisor and in a plain dealer."""
LISTEN_ENV = "FAIRDECK_WORKER_LISTEN"
"""The address every worker binds (the supervisor resolved port 0 to one port for all)."""
LOCK_ENV = "FAIRDECK_WORKER_LOCK_FD"
"""The descriptor of the data dir's lock file, locked by the supervisor."""
LIFELINE_ENV = "FAIRDECK_WORKER_LIFELINE_FD"
"""The read end of a pipe whose write end only the supervisor holds: end of file when it dies."""
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Worker:
    """What a worker process is told by its supervisor."""

    index: int
    count: int
    listen: str
    lock_fd: int | None
    lifeline_fd: int | None = None

    @classmethod
    def from_environ(cls, environ: dict[str, str] | os._Environ[str] = os.environ) -> Worker | None:
        text = environ.get(WORKER_ENV)
        if text is None:
            return None
        index, _, count = text.partition("/")
        lock, lifeline = environ.get(LOCK_ENV), environ.get(LIFELINE_ENV)
        return cls(
            int(index),
            int(count),
            environ[LISTEN_ENV],
            int(lock) if lock else None,
            int(lifeline) if lifeline else None,
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
    fds = (*fds, lifeline_read)
    workers: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                w.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for i in range(count):
            workers.append(
                subprocess.Popen(  # noqa: S603 - this same program, with the operator's own arguments
                    [sys.executable, "-m", "fairdeck.cli", *argv],
                    env={**env, WORKER_ENV: f"{i}/{count}"},
                    pass_fds=fds,
                    stdout=subprocess.PIPE,
                )
            )
        pids = _wait_listening(workers, lambda: stopping)
        if pids is None:
            stop(signal.SIGTERM, None)
            status = _reap(workers, config.grace_seconds + 5)
            if stopping and all(s == 0 for s in status):
                return 0
            failed = next((i for i, s in enumerate(status) if s != 0), 0)
            print(
                f"fairdeck serve: process {failed + 1} of {count} did not start (exit status "
                f"{status[failed]}); no process serves",
                file=sys.stderr,
            )
            return 2
        print(
            f"fairdeck dealer listening on {listen} (data: {config.data_dir}; {count} processes, "
            f"pids {' '.join(map(str, pids))})",
            flush=True,
        )
        return _watch(workers, lambda: stopping, stop, config.grace_seconds + 5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for w in workers:  # never leave a worker behind, whatever happened here
            if w.poll() is None:
                w.kill()
                w.wait()
        reserved.close()
        os.close(lifeline_read)
        os.close(lifeline_write)
        identity.release()


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


def _watch(
    workers: list[subprocess.Popen[bytes]],
    stopping: Callable[[], bool],
    stop: Callable[[int, object], None],
    grace: float,
) -> int:
    """Until every worker exits: 0 when they all drained after a signal, else 1."""
    while True:
        for w in workers:
            _drain(w)
        exited = [(i, w) for i, w in enumerate(workers) if w.poll() is not None]
        if len(exited) == len(workers):
            break
        if exited and not stopping():
            i, w = exited[0]
            print(
                f"fairdeck serve: process {i + 1} of {len(workers)} (pid {w.pid}) exited with status "
                f"{w.returncode}; stopping the others",
                file=sys.stderr,
                flush=True,
            )
            stop(signal.SIGTERM, None)
            _reap(workers, grace)
            return 1
        time.sleep(0.1)
    if all(w.returncode == 0 for w in workers):
        print("fairdeck dealer stopped", flush=True)
        return 0
    return 1


def _drain(w: subprocess.Popen[bytes]) -> None:
    if w.stdout is not None:
        with contextlib.suppress(BlockingIOError, ValueError):
            w.stdout.read()


def _reap(workers: list[subprocess.Popen[bytes]], grace: float) -> list[int]:
    deadline = time.monotonic() + grace
    for w in workers:
        try:
            w.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
    return [w.returncode for w in workers]
