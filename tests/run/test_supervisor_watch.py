"""The supervisor's watch (processes._watch) over stand-in workers: real processes that beat on
the heartbeat pipe as a worker does, or fall silent while still running (a worker whose event loop
or writer is stuck: the case a SIGSTOP cannot show, since the kernel then shows it stopped)."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable

import pytest

from fairdeck_server.run import processes
from fairdeck_server.run.processes import _Running, _watch
from tests.support.speed import scaled
from tests.support.waits import WAIT_S, hold_silent, outlast, pace, wait_for

STAND_IN = """
import os, signal, sys, time
fd = int(os.environ["FAIRDECK_WORKER_HEARTBEAT_FD"])
if sys.argv[1] == "stuck":  # in state D no signal is acted on
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    if sys.argv[1] == "beat":
        os.write(fd, b".")
    time.sleep(0.1)
"""


def _ignores(pid: int, signum: int, masks: tuple[str, ...] = ("SigIgn",)) -> bool:
    """Whether ``pid`` has set ``signum`` to be ignored (/proc/PID/status SigIgn), or, with
    ``masks`` ("SigIgn", "SigCgt"), either ignored or caught by a handler of its own."""
    with open(f"/proc/{pid}/status") as f:
        mask = 0
        for line in f:
            if line.partition(":")[0] in masks:
                mask |= int(line.split()[1], 16)
    return bool(mask & (1 << (signum - 1)))


def stand_in(index: int, mode: str) -> _Running:
    running = _Running.spawn(index, 2, [sys.executable, "-c", STAND_IN, mode], dict(os.environ), ())
    assert running.proc.stdout is not None
    os.set_blocking(running.proc.stdout.fileno(), False)  # as the supervisor reads its workers'
    return running


class Watching:
    """``_watch`` over ``workers`` (stand-ins) in a thread, as ``supervise`` runs it, for the
    ``with`` block; replacements beat. ``stop`` is its SIGTERM handler: every worker is sent
    SIGTERM (and first SIGCONT with ``cont``, for a test that stops one itself); ``grace``: the
    seconds a stopping worker has to drain before it is killed."""

    def __init__(
        self, workers: list[_Running], timeout: float, *, cont: bool = False, grace: float = 5
    ) -> None:
        self.workers = workers
        self.cont = cont
        for w in workers:
            w.last_beat = time.monotonic()
        self.stopping = threading.Event()
        self.result: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.result.append(
                _watch(
                    workers, lambda i: stand_in(i, "beat"), self.stopping.is_set, self.stop, grace, timeout
                )
            )
        )

    def stop(self, _signum: int = signal.SIGTERM, _frame: object = None) -> None:
        self.stopping.set()
        for w in self.workers:
            if self.cont:
                w.proc.send_signal(signal.SIGCONT)
            w.proc.send_signal(signal.SIGTERM)

    def __enter__(self) -> Watching:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.thread.join(timeout=30)
        for w in self.workers:
            w.close()


@pytest.mark.paired  # waits out the supervisor's own timers
def test_a_worker_running_but_silent_is_replaced_after_the_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A 3 s timeout: the one that beats (every 0.1 s) never goes that long without, however
    # loaded the machine (with 1 s, at 13 times the usual slowness both were replaced).
    workers = [stand_in(0, "beat"), stand_in(1, "silent")]
    silent, beating = workers[1].proc, workers[0].proc
    began = time.monotonic()
    with Watching(workers, 3.0):
        wait_for("the silent worker replaced", lambda: workers[1].proc is not silent, timeout=30)
        took = time.monotonic() - began
    assert workers[1].proc is not silent, "the silent worker was never replaced"
    assert 3.0 <= took < 3.0 + scaled(2.0), took  # the timeout, then a look and a kill: scaled
    assert silent.returncode == -signal.SIGKILL and workers[0].proc is beating
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and re.fullmatch(
        rf"fairdeck serve: process 2 of 2 \(pid {silent.pid}\) stopped answering for [3-9]\.\d s; "
        rf"killed it and started pid {workers[1].proc.pid} in its place",
        said[0],
    ), said


@pytest.mark.light
def test_a_supervisor_that_stalls_at_every_look_still_replaces_a_silent_worker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each of the supervisor's looks comes 1.2 s after the last (a starved or throttled host):
    its own stalls are left out of the worker's silence, not allowed to reset it (reset at each
    stall, a worker that never beats was never replaced). Here every look adds 0.1 s of silence."""

    class Stalling:
        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def sleep(_seconds: float) -> None:
            hold_silent(1.2)  # the supervisor stalls

    monkeypatch.setattr(processes, "time", Stalling)
    workers = [stand_in(0, "silent")]
    silent = workers[0].proc
    with Watching(workers, 0.5):
        wait_for(
            "the silent worker replaced (its silence is not reset at every stall)",
            lambda: workers[0].proc is not silent,
            timeout=30,
            every=0.1,
        )
    assert "stopped answering" in capsys.readouterr().err


def _cycle(pid: int, until: threading.Event, stopped_s: tuple[float, float], running_s: float) -> None:
    """Stop and continue ``pid`` over and over, as cpulimit does (and as strace does with a busy
    process: the kernel shows it ``t`` at most instants, while it runs between them). Each stop
    lasts a random time in ``stopped_s``, as a real one does, not in step with the looks."""
    while not until.is_set():
        try:
            os.kill(pid, signal.SIGSTOP)
            pace(random.uniform(*stopped_s))
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        pace(running_s)


def test_a_worker_stopped_and_continued_over_and_over_still_runs_and_is_not_replaced(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Stopped at every look is not stopped throughout: a worker held to a small share of a core
    by cpulimit (or traced by strace while busy) runs between the looks and beats, and the
    supervisor kills no honest worker for it (no stop lasts 0.3 s here). Looks in a row that saw
    ``T`` are not a stop of 0.3 s unless the worker did not run between them."""
    workers = [stand_in(0, "beat"), stand_in(1, "beat")]
    cycled = workers[1].proc
    done = threading.Event()
    cycler = threading.Thread(target=_cycle, args=(cycled.pid, done, (0.05, 0.2), 0.01))
    with Watching(workers, 5.0, cont=True):
        cycler.start()
        try:
            outlast(3.0)  # shorter than the worker timeout: only the stopped rule could replace it
        finally:
            done.set()
            cycler.join()
    said = capsys.readouterr().err
    assert workers[1].proc is cycled, said
    assert "stopped answering" not in said, said


class _HeldLooks:
    """``processes.time`` with each of the watch's sleeps held until the test lets it go
    (``look``): its looks come when the test says, however loaded the machine."""

    monotonic = staticmethod(time.monotonic)

    def __init__(self) -> None:
        self.asleep = threading.Semaphore(0)
        self.go = threading.Semaphore(0)
        self.free = False

    def sleep(self, seconds: float) -> None:
        if self.free:  # let go: a plain sleep (a release left over may shorten one)
            self.go.acquire(timeout=seconds)
            return
        self.asleep.release()
        self.go.acquire()

    def slept(self) -> None:
        assert self.asleep.acquire(timeout=WAIT_S), "the watch did not come to its sleep"

    def look(self) -> None:
        """Let the watch make one look, and wait until it sleeps again."""
        self.go.release()
        self.slept()

    def let_go(self) -> None:
        self.free = True
        self.go.release()


def test_the_supervisors_pause_with_its_workers_is_not_their_silence(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole group paused past the worker timeout (a container pause, Ctrl-Z) and the
    supervisor continued a moment before its workers: its first look finds no beat since before
    the pause and the workers still stopped. That silence was its own pause: it replaces no one
    (it replaced each, "stopped answering for 3.x s"), nor, once they run, for the stop it saw.
    The looks are held (tests/faults/test_pauses.py left the supervisor free, and a stall of the
    test of 0.3 s after its first look let it see the workers stopped 3 looks in a row)."""
    held = _HeldLooks()
    monkeypatch.setattr(processes, "time", held)
    workers = [stand_in(0, "beat"), stand_in(1, "beat")]
    procs = [w.proc for w in workers]
    with Watching(workers, 2.0):
        try:
            held.slept()
            for proc in procs:
                os.kill(proc.pid, signal.SIGSTOP)
            wait_for("the workers stopped", lambda: {processes._state(p.pid) for p in procs} == {"T"})
            held.look()  # its last look before the pause reads the beats sent before the stop
            outlast(3.0)  # the supervisor paused too (its sleep held), past the worker timeout
            held.look()  # its first look after the pause: silent for 3 s, and still stopped
            for proc in procs:
                with contextlib.suppress(ProcessLookupError):  # replaced already
                    os.kill(proc.pid, signal.SIGCONT)
            wait_for("the workers running", lambda: "T" not in {processes._state(p.pid) for p in procs})
            for _ in range(processes.STOPPED_LOOKS + 1):
                held.look()
        finally:
            held.let_go()
    said = capsys.readouterr().err
    assert [w.proc for w in workers] == procs, said
    assert "stopped answering" not in said, said


@pytest.mark.serial
def test_a_worker_stopped_throughout_is_replaced_within_a_second(capsys: pytest.CaptureFixture[str]) -> None:
    """The other side of the test above: stopped once and left so, it is replaced well before the
    worker timeout (60 s here), the line saying the kernel shows it stopped."""
    workers = [stand_in(0, "beat"), stand_in(1, "beat")]
    stopped = workers[1].proc
    with Watching(workers, 60.0):
        began = time.monotonic()
        os.kill(stopped.pid, signal.SIGSTOP)
        wait_for(
            "the stopped worker replaced", lambda: workers[1].proc is not stopped, timeout=10, every=0.02
        )
        took = time.monotonic() - began
    assert workers[1].proc is not stopped and stopped.returncode == -signal.SIGKILL
    assert 0.3 <= took < scaled(1.5, under=30.0), took  # not the worker timeout (60 s)
    assert "(the kernel shows it stopped)" in capsys.readouterr().err


def test_a_worker_stopped_when_the_group_is_told_to_stop_drains_too() -> None:
    """SIGTERM while a worker is stopped (SIGSTOP, Ctrl-Z; with ``--worker-timeout 0``, or within
    its 0.3 s): the SIGTERM waits in the kernel until someone continues it, and the supervisor,
    which replaces no one while stopping, waited for it for ever. It continues it, and the worker
    ends by its SIGTERM as the others do."""
    workers = [stand_in(0, "beat"), stand_in(1, "beat")]
    stopped = workers[1].proc
    try:
        with Watching(workers, 0.0) as watching:
            os.kill(stopped.pid, signal.SIGSTOP)
            wait_for("the stop to take effect", lambda: processes._state(stopped.pid) == "T", every=0.01)
            watching.stop()
            watching.thread.join(timeout=10)
            assert not watching.thread.is_alive(), (
                "the supervisor waits for ever for a stopped worker to drain"
            )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped.pid, signal.SIGCONT)
    result = watching.result
    assert stopped.returncode == -signal.SIGTERM and result == [0], (stopped.returncode, result)


TRACER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if libc.ptrace(0x4206, pid, None, None) != 0 or libc.ptrace(0x4207, pid, None, None) != 0:  # SEIZE, INTERRUPT
    print("refused", flush=True)
    sys.exit(0)
os.waitpid(pid, 0x40000000)  # __WALL: it is held in a trace stop now
print("holding", flush=True)
while True:
    try:
        os.waitpid(pid, 0x40000000)  # its death, once killed
    except ChildProcessError:
        time.sleep(0.1)
"""


def test_a_worker_a_debugger_holds_when_the_group_is_told_to_stop_is_killed_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGCONT does not end a debugger's stop (state ``t``): that worker cannot drain, and the
    group stops without it, saying so, with exit status 1."""
    workers = [stand_in(0, "beat"), stand_in(1, "beat")]
    held = workers[1].proc
    tracer = subprocess.Popen(
        [sys.executable, "-c", TRACER, str(held.pid)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert tracer.stdout is not None
        if tracer.stdout.readline().strip() != "holding":
            pytest.skip("ptrace is not allowed here")
        watching = Watching(workers, 0.0)
        watching.stop()  # SIGTERM before the watch starts
        with watching:
            watching.thread.join(timeout=10)
            assert not watching.thread.is_alive(), "the supervisor waits for ever for a held worker to drain"
    finally:
        tracer.kill()
        tracer.wait()
        with contextlib.suppress(ProcessLookupError):
            held.kill()
        for w in workers:
            w.proc.wait(timeout=30)
            w.close()
    assert held.returncode == -signal.SIGKILL and watching.result == [1], (held.returncode, watching.result)
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        f"fairdeck serve: process 2 of 2 (pid {held.pid}) is held stopped and cannot drain; killed it"
    ]


class _Unkillable(subprocess.Popen[bytes]):
    """The kernel's side of a process in uninterruptible sleep (state D: I/O to a dead disk),
    which SIGKILL does not end until the I/O returns: no test can put a process there at will,
    so here SIGKILL stops it instead, and it stays as long as the test keeps it."""

    def kill(self) -> None:
        self.send_signal(signal.SIGSTOP)


@pytest.mark.paired  # waits out the supervisor's own timers
def test_a_worker_sigkill_does_not_end_holds_the_supervisor_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The supervisor waited for a killed worker without a bound: one stuck in the kernel left the
    group unsupervised for as long (no worker replaced, SIGTERM unanswered). It now waits
    KILL_WAIT_S, says so in one line, and starts the replacement."""
    monkeypatch.setattr(processes, "KILL_WAIT_S", 0.5, raising=False)
    workers = [stand_in(0, "beat"), stand_in(1, "silent")]
    stuck = workers[1].proc
    stuck.__class__ = _Unkillable
    try:
        with Watching(workers, 1.0):
            began = time.monotonic()
            with contextlib.suppress(AssertionError):  # said below
                wait_for("the stuck worker replaced", lambda: workers[1].proc is not stuck, timeout=30)
            took = time.monotonic() - began
            replaced = workers[1].proc is not stuck
    finally:
        os.kill(stuck.pid, signal.SIGKILL)  # the I/O returned, as it were
        stuck.wait()
    assert replaced, "the supervisor was still waiting for the worker it killed"
    assert 1.5 <= took < 1.5 + scaled(6.5), took  # 1 s of silence, 0.5 s for the kill; the rest: work
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 2, said
    assert re.fullmatch(
        rf"fairdeck serve: process 2 of 2 \(pid {stuck.pid}\) did not exit within 0\.5 s of SIGKILL "
        r"\(state T; D: the kernel holds it in I/O, a dead disk or network file system\); going on "
        r"without it",
        said[0],
    ), said
    assert said[1].startswith(f"fairdeck serve: process 2 of 2 (pid {stuck.pid}) stopped answering"), said


def test_a_stop_told_while_the_supervisor_waits_for_a_killed_worker_reaches_its_replacement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM while ``_replace`` waited KILL_WAIT_S for a worker SIGKILL did not end: the handler
    signalled the workers listed, the stuck one still among them, and the replacement started
    after it was never told to stop; the supervisor waited for it for ever."""
    monkeypatch.setattr(processes, "KILL_WAIT_S", 1.0)
    workers = [stand_in(0, "beat"), stand_in(1, "stuck")]
    stuck = workers[1].proc
    stuck.__class__ = _Unkillable
    try:
        with Watching(workers, 0.5) as watching:
            wait_for(  # killed (here: stopped), and the supervisor waits for it
                "the stuck worker stopped", lambda: processes._state(stuck.pid) == "T", timeout=10, every=0.02
            )
            watching.stop()
            watching.thread.join(timeout=5)
            ended = not watching.thread.is_alive()
    finally:
        os.kill(stuck.pid, signal.SIGKILL)
        stuck.wait()
    assert ended, "the supervisor waited for a replacement that was never told to stop"
    assert watching.result == [0] and workers[1].proc is not stuck


SUPERVISED = """
import os, signal, sys, time
mode = sys.argv[1].split(",")[int(os.environ["FAIRDECK_WORKER"].partition("/")[0])]
fd = int(os.environ["FAIRDECK_WORKER_HEARTBEAT_FD"])
if mode in ("stuck", "mute"):  # in state D no signal is acted on
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:  # a drain
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
if mode != "mute":
    print("fairdeck dealer listening on here", flush=True)
began = time.monotonic()
while mode != "dies" or time.monotonic() < began + 0.5:
    os.write(fd, b".")
    time.sleep(0.1)
sys.exit(3)
"""


def supervise(
    monkeypatch: pytest.MonkeyPatch, modes: str, kill_wait: float, start_timeout: float = 1.0
) -> tuple[int, list[int], float]:
    """``supervise`` over stand-ins, one per comma-separated mode (``serve``, ``dies``, ``stuck``:
    SIGTERM and SIGKILL do not end it, ``mute``: stuck before it listens); grace 0.5 s. START_TIMEOUT
    runs once every stand-in is at its SIGTERM line. What it returned, the stand-ins' pids, and how
    long it took."""
    monkeypatch.setattr(processes, "KILL_WAIT_S", kill_wait)
    monkeypatch.setattr(processes, "START_TIMEOUT", start_timeout)
    monkeypatch.setattr(
        processes, "prepare", lambda _config: types.SimpleNamespace(lock=None, release=lambda: None)
    )
    spawned: list[subprocess.Popen[bytes]] = []
    plain = _Running.spawn.__func__  # type: ignore[attr-defined]

    def spawn(
        cls: type[_Running],
        index: int,
        count: int,
        _argv: list[str],
        env: dict[str, str],
        fds: tuple[int, ...],
    ) -> _Running:
        running: _Running = plain(cls, index, count, [sys.executable, "-c", SUPERVISED, modes], env, fds)
        running.proc.__class__ = _Unkillable
        spawned.append(running.proc)
        return running

    monkeypatch.setattr(_Running, "spawn", classmethod(spawn))
    listening = processes._wait_listening

    def settled(workers: list[subprocess.Popen[bytes]], stopping: Callable[[], bool]) -> list[int] | None:
        # START_TIMEOUT runs from here: only once every stand-in is at its SIGTERM line, so that
        # it measures a stand-in's silence, not how long a loaded machine took to start Python
        # (one not there yet died of the SIGTERM sent at START_TIMEOUT: "exit status -15"). One
        # already exited ("dies") is past it: Python's exit put SIGTERM back to its default.
        wait_for(
            "every stand-in at its SIGTERM line",
            lambda: all(
                processes._state(p.pid) == "Z" or _ignores(p.pid, signal.SIGTERM, ("SigIgn", "SigCgt"))
                for p in workers
            ),
        )
        return listening(workers, stopping)

    monkeypatch.setattr(processes, "_wait_listening", settled)
    config = types.SimpleNamespace(
        processes=modes.count(",") + 1,
        witnesses=(),
        listen="127.0.0.1:0",
        tiles=None,
        data_dir="data",
        db="postgresql://stand-in",  # no SQLite writers' lock to open for these stand-in workers
        grace_seconds=-4.5,
        worker_timeout=0.0,
    )
    began = time.monotonic()
    try:
        code = processes.supervise(config, [])  # type: ignore[arg-type]
    finally:
        took = time.monotonic() - began
        for proc in spawned:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    return code, [p.pid for p in spawned], took


@pytest.mark.paired  # waits out the supervisor's own timers
def test_workers_sigkill_does_not_end_are_waited_for_together_and_said_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dead disk holds every worker. ``_reap`` waited KILL_WAIT_S for each in turn, and the
    ``finally`` of ``supervise`` killed and waited for each again, saying each line twice: 4 x 5 s
    for two workers, past a service manager's stop timeout with a few more. Here KILL_WAIT_S is
    2 s: together 3 s, in turn 5 s at least (9 s with the second wait); the bar is 3 s and the
    work, scaled but under 0.9 KILL_WAIT_S, so in turn fails at any factor. All three must have started
    (a 10 s START_TIMEOUT: with 1 s, a machine 13 times slower than usual started them too late)."""
    code, pids, took = supervise(monkeypatch, "dies,stuck,stuck", 2.0, start_timeout=10.0)
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert said[0].startswith(f"fairdeck serve: process 1 of 3 (pid {pids[0]}) exited with status 3"), said
    assert [line.split(" did not exit within")[0] for line in said[1:]] == [
        f"fairdeck serve: process 2 of 3 (pid {pids[1]})",
        f"fairdeck serve: process 3 of 3 (pid {pids[2]})",
    ], said
    assert took < 3.0 + scaled(1.5, under=0.9 * 2.0), took  # 0.5 s to die, 0.5 s of grace, 2 s for both


def test_a_worker_stuck_before_it_listens_is_not_said_to_have_an_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker stuck (state D) before it listened: ``_reap`` gave it up, and its status, None,
    was printed as ``exit status None``."""
    code, pids, _took = supervise(monkeypatch, "serve,mute", 0.5)
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(said) == 2 and said[0].startswith(
        f"fairdeck serve: process 2 of 2 (pid {pids[1]}) did not exit within 0.5 s of SIGKILL"
    ), said
    assert said[1] == (
        "fairdeck serve: process 2 of 2 did not start (it did not exit, held by the kernel); "
        "no process serves"
    ), said


GRACE = 1.0
"""The drain's grace the watch gives the next test's workers (``serve`` gives grace_seconds + 5)."""


@pytest.mark.paired  # waits out the supervisor's own timers
def test_a_worker_that_does_not_act_on_sigterm_is_killed_after_the_grace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Told to stop, the supervisor waited for every worker without a bound: one whose loop is
    blocked (or in a dead disk) never drains, and the group's stop never ended. After the grace
    (1 s here, and no time for storage) it is killed, in one line, and the group exits 1. The
    grace is a product timer: 1 s tells a kill after it from one at once (no grace) as 5 s did,
    and the old code's endless wait from either."""
    monkeypatch.setattr(processes, "STOP_STORAGE_S", 0.0, raising=False)
    workers = [stand_in(0, "beat"), stand_in(1, "stuck")]
    deaf = workers[1].proc
    watching = Watching(workers, 0, grace=GRACE)  # no heartbeat timeout: only the stop's bound can end it
    try:
        with watching:
            wait_for("the deaf worker to ignore SIGTERM", lambda: _ignores(deaf.pid, signal.SIGTERM))
            began = time.monotonic()
            watching.stop()
            watching.thread.join(timeout=60)  # a bound on the wait for the old code, not a bar
            took = time.monotonic() - began
            ended = not watching.thread.is_alive()
    finally:
        with contextlib.suppress(ProcessLookupError):
            deaf.kill()  # lets the old code's endless wait end
        deaf.wait()
        watching.thread.join(timeout=15)
    assert ended, "the supervisor still waited for a worker that ignored SIGTERM"
    assert GRACE <= took < GRACE + scaled(7.0), took  # the grace, then the kill and the exit: scaled
    assert watching.result == [1] and deaf.returncode == -signal.SIGKILL
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        f"fairdeck serve: process 2 of 2 (pid {deaf.pid}) did not drain within 1 s of SIGTERM; killed it"
    ]
