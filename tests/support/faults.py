"""The fault-injection harness: real ``fairdeck serve`` processes, faults injected from outside, and
the two invariants every scenario must keep.

A scenario is a test that takes the ``run`` fixture (a ``FaultRun``), starts dealers with
``run.start(...)``, does work through ``run.ledger`` (which records only what the dealer
acknowledged), injects its fault, and returns. The fixture then stops every dealer and checks:

1. **Nothing acknowledged is lost**: every hand whose open or close was acknowledged is in the log
   at the index its receipt gave, saying what the dealer said (``Ledger.check``).
2. **No audit of an honest dealer reports cheating**: the real ``fairdeck audit --data``, on the
   real clock, with the dealer's lifetime, exits 0 with no finding. A scenario that damages rows
   (``run.damaged``) gets exactly one finding per damaged hand, which the dealer cannot reveal:
   a mistake is never silent.

The faults:

- ``FakeClock``: the dealer's wall clock under libfaketime (Debian's ``faketime``), with the
  monotonic clock left alone as an NTP step leaves it; ``set(offset)`` moves it during a run.
- ``Sandbox``: a private mount namespace holding a small tmpfs for the data dir, kept alive by a
  holder process: a real full disk (``fill``), a real read-only remount (``remount``), and files
  reached from outside through ``/proc/HOLDER/root``. Skips, saying why, where namespaces are not
  allowed.
- ``WITHOUT_DAC``: a command prefix that drops root's permission to ignore file modes, so a
  read-only file is read-only to a dealer run as root too (empty when not root).
- Signals (SIGSTOP, SIGCONT, SIGTERM) and rows changed in the database: through ``DealerProcess``
  and sqlite3 directly.

A new kind of fault is one more test in tests/faults/, using these pieces.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fairdeck.cli import main as fairdeck_main
from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.log.logentry import CommitEntry, RevealEntry, decode
from fairdeck_server.publishing.log_signing import load_log_keys
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.forked_serve import ServeForker
from tests.support.waits import wait_for as wait_for  # the scenarios poll with it

FAKETIME_LIBS = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
"""Debian's libfaketime (the faketime package), for LD_PRELOAD."""
REQUIRE_FAKETIME = "CI_REQUIRE_FAKETIME"
"""Set to 1 (as .ci/run does) to fail, not skip, the clock scenarios where faketime is missing."""
LIFETIME = 3.0
"""Seconds: the dealers' --max-hand-lifetime in these scenarios, unless a scenario says otherwise."""
FAST = ("--checkpoint-interval", "0.05", "--rate-limit", "0", "--max-open-hands", "0", "--grace-seconds", "3")

# -- the dealer's clock ------------------------------------------------------------------------------


class FakeClock:
    """The dealer's wall clock under libfaketime: an offset in seconds from the true time, read from a
    file at every call (``FAKETIME_NO_CACHE``), so ``set`` steps it while the dealer runs. The
    monotonic clock is not faked (``FAKETIME_DONT_FAKE_MONOTONIC``), as in an NTP step."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(0)

    def set(self, offset_s: int, rate: float | None = None) -> None:
        """Offset the wall clock by ``offset_s`` seconds; with ``rate``, it also runs that fast."""
        spec = f"{offset_s:+d}" + ("" if rate is None else f" x{rate}")
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(spec + "\n")
        os.replace(tmp, self.path)

    def env(self) -> dict[str, str]:
        if not FAKETIME_LIBS:
            if os.environ.get(REQUIRE_FAKETIME) == "1":
                pytest.fail(f"{REQUIRE_FAKETIME}=1 but libfaketime is not installed (Debian: faketime)")
            pytest.skip("libfaketime is not installed (Debian package faketime)")
        return {
            "LD_PRELOAD": FAKETIME_LIBS[0],
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }


# -- file systems ------------------------------------------------------------------------------------

WITHOUT_DAC: tuple[str, ...] = (
    ("setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--")
    if os.geteuid() == 0 and shutil.which("setpriv")
    else ()
)
"""Run a dealer as root without the capability to ignore file modes: a 0444 file is then read-only
to it, as to any other user."""


class Sandbox:
    """A private mount namespace with a tmpfs of ``size`` at ``mount``, alive while its holder runs.

    Dealers run in it with ``wrap`` (nsenter); its files are at ``outside(path)`` for the test."""

    def __init__(self, mount: Path, size: str = "16m") -> None:
        if not shutil.which("unshare") or not shutil.which("nsenter"):
            pytest.skip("unshare and nsenter (util-linux) are needed for a mount namespace")
        root = os.geteuid() == 0
        self.user_ns = () if root else ("--user", "--map-root-user")
        mount.mkdir(parents=True, exist_ok=True)
        self.mount = mount
        script = f"mount -t tmpfs -o size={size},mode=0755 tmpfs {mount} && echo ready && exec sleep 100000"
        self.holder = subprocess.Popen(
            ["unshare", *self.user_ns, "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != "ready":
            error = self.holder.stderr.read() if self.holder.stderr else ""
            self.holder.kill()
            pytest.skip(f"no private mount namespace with a tmpfs here: {error.strip()}")

    @property
    def wrap(self) -> tuple[str, ...]:
        user = ("--user", "--preserve-credentials") if self.user_ns else ()
        return ("nsenter", "-t", str(self.holder.pid), *user, "--mount", "--")

    def outside(self, path: Path) -> Path:
        """``path`` (inside the tmpfs) as the test reaches it: through the holder's root."""
        return Path(f"/proc/{self.holder.pid}/root") / path.relative_to("/")

    def run(self, *command: str) -> None:
        subprocess.run([*self.wrap, *command], check=True, capture_output=True, timeout=30)

    def remount(self, mode: str) -> None:
        """``ro`` or ``rw``: remount the tmpfs, as a file system that turned read-only after errors."""
        self.run("mount", "-o", f"remount,{mode}", str(self.mount))

    def fill(self) -> Path:
        """Fill the tmpfs to the last byte; the filler file (remove it to free the space)."""
        filler = self.outside(self.mount / "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for chunk in (65536, 4096, 1):
                try:
                    while os.write(fd, b"\0" * chunk):
                        pass
                except OSError:  # ENOSPC: on to a smaller chunk, until not one byte fits
                    continue
        finally:
            os.close(fd)
        return filler

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait(timeout=10)


# -- what the dealer acknowledged ----------------------------------------------------------------------


@dataclass
class Ledger:
    """Every hand the dealer acknowledged opening (with the commitment and log index it answered) and
    closing (with the reveal's index). Calls that fail are not recorded: only acknowledged work."""

    opened: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    closed: dict[str, int] = field(default_factory=dict)
    failures: int = 0

    def open(self, target: str, count: int = 1, deck: str = "short") -> list[str]:
        """Open ``count`` hands (left open); their ids."""
        ids = []
        with DealerClient(target, timeout=15, retries=0) as c:
            for _ in range(count):
                try:
                    hand = c.open_hand(deck)
                except FairdeckError:
                    self.failures += 1
                    continue
                self.opened[hand.hand_id] = (hand.commitment, hand.commit_receipt.index)
                ids.append(hand.hand_id)
        return ids

    def close(self, target: str, hand_ids: Sequence[str]) -> None:
        with DealerClient(target, timeout=15, retries=0) as c:
            for hand_id in hand_ids:
                try:
                    hand = c.close_hand(hand_id)
                except FairdeckError:
                    self.failures += 1
                    continue
                assert hand.reveal_receipt is not None
                self.closed[hand_id] = hand.reveal_receipt.index

    def deal(self, target: str, count: int = 1) -> None:
        """Open and close ``count`` hands."""
        self.close(target, self.open(target, count))

    def check(self, entries: Sequence[bytes]) -> None:
        """Invariant 1: each acknowledged entry is in the log where its receipt said."""
        for hand_id, (commitment, index) in self.opened.items():
            assert index < len(entries), f"the commitment of hand {hand_id} (entry {index}) is lost"
            entry = decode(entries[index])
            assert isinstance(entry, CommitEntry), f"entry {index} is not the commitment of {hand_id}"
            assert entry.hand_id == hand_id, f"entry {index} is not the commitment of {hand_id}"
            assert entry.commitment == commitment, f"hand {hand_id}: another commitment at entry {index}"
        for hand_id, index in self.closed.items():
            assert index < len(entries), f"the reveal of hand {hand_id} (entry {index}) is lost"
            entry = decode(entries[index])
            assert isinstance(entry, RevealEntry), f"entry {index} is not the reveal of {hand_id}"
            assert entry.hand_id == hand_id, f"entry {index} is not the reveal of {hand_id}"


# -- a run ---------------------------------------------------------------------------------------------


@dataclass
class Audit:
    rc: int
    out: str
    err: str

    @property
    def report(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.out)
        return parsed


def fairdeck(*args: str) -> Audit:
    """The ``fairdeck`` command line (its ``main``, the console script's code path) in this
    process, on the true clock: the dealers are the processes under test, not the auditor."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = fairdeck_main(list(args))
        except SystemExit as e:  # argparse
            rc = int(e.code or 0)
    return Audit(rc, out.getvalue(), err.getvalue())


class FaultRun:
    """One scenario: its data dir, its faked clock, the dealers it started and its ledger."""

    def __init__(self, tmp: Path, forker: ServeForker | None = None) -> None:
        self.tmp = tmp
        self.forker = forker
        """Where a start on the true clock, with no sandbox and no wrap, is forked from (a fresh
        interpreter and the dealer's imports each time cost 0.3-0.5 s of CPU)."""
        self.data_dir = tmp / "data"
        self.clock = FakeClock(tmp / "faketime")
        self.ledger = Ledger()
        self.lifetime = LIFETIME
        self.dealers: list[DealerProcess] = []
        self.sandbox: Sandbox | None = None
        self.faked = False
        """Whether the dealers run under the faked clock (``start(fake_clock=True)``)."""
        self.damaged: set[str] = set()
        """Hands whose rows a scenario damaged: the dealer cannot reveal them, and the audit must
        say so (an overdue finding for each, and nothing else) once the log has moved past them."""

    @property
    def outside_data(self) -> Path:
        """The data dir as this test reaches it (through the sandbox, if there is one)."""
        return self.sandbox.outside(self.data_dir) if self.sandbox is not None else self.data_dir

    def in_sandbox(self, size: str = "16m") -> Sandbox:
        """Put the data dir on a small tmpfs in a mount namespace of its own (before ``start``)."""
        self.sandbox = Sandbox(self.tmp / "mnt", size)
        self.data_dir = self.sandbox.mount / "data"
        return self.sandbox

    def start(
        self, *args: str, fake_clock: bool = False, wrap: Sequence[str] = (), lifetime: float | None = None
    ) -> DealerProcess:
        """``fairdeck serve`` with this run's data dir and lifetime (and the faked clock)."""
        if lifetime is not None:
            self.lifetime = lifetime
        env = self.clock.env() if fake_clock else None
        self.faked = self.faked or fake_clock
        outer = self.sandbox.wrap if self.sandbox is not None else ()
        dealer = DealerProcess(
            self.data_dir,
            self.tmp / f"dealer-{len(self.dealers)}.stderr",
            "--max-hand-lifetime",
            f"{self.lifetime:g}",
            *FAST,
            *args,
            env=env,
            wrap=[*outer, *wrap],
            forker=self.forker,  # used only where neither env nor wrap is given
        )
        self.dealers.append(dealer)
        return dealer

    def start_refused(self, *args: str, fake_clock: bool = False, wrap: Sequence[str] = ()) -> str:
        """``fairdeck serve`` that must refuse to start: exit 2 and nothing on stdout; its stderr."""
        env = clean_env(**(self.clock.env() if fake_clock else {}))
        outer = self.sandbox.wrap if self.sandbox is not None else ()
        argv = ["serve", "--listen", "127.0.0.1:0", "--data", str(self.data_dir), *args]
        if self.forker is not None and not fake_clock and not outer and not wrap:
            done = self.forker.run(argv, timeout=60)
        else:
            done = subprocess.run(
                [*outer, *wrap, sys.executable, "-m", "fairdeck.cli", *argv],
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
            )
        assert done.returncode == 2 and not done.stdout, f"it started, or failed otherwise: {done}"
        return done.stderr

    def key(self) -> str:
        return load_log_keys(self.outside_data / "log.key").signer.verifier.to_string()

    def keys(self) -> list[str]:
        """Every verifier key of the log's key file (the current one first)."""
        return [v.to_string() for v in load_log_keys(self.outside_data / "log.key").verifiers]

    def audit(self, *where: str, keys: Sequence[str] | None = None, lifetime: float | None = None) -> Audit:
        """``fairdeck audit WHERE --key ... --max-hand-lifetime L --json`` on the true clock."""
        flags = [x for k in (keys or self.keys()) for x in ("--key", k)]
        life = f"{self.lifetime if lifetime is None else lifetime:g}"
        where = where or ("--data", str(self.readable_data()))
        return fairdeck("audit", *where, *flags, "--max-hand-lifetime", life, "--json")

    def readable_data(self) -> Path:
        """The data dir where SQLite can open it: itself, or (in a sandbox, which SQLite cannot reach
        through /proc/PID/root: it resolves the link) a copy, taken while the dealer is stopped."""
        if self.sandbox is None:
            return self.data_dir
        copy = self.tmp / f"data-copy-{time.monotonic_ns()}"
        shutil.copytree(self.outside_data, copy, ignore=shutil.ignore_patterns("filler", "*.lock"))
        return copy

    def entries(self) -> list[bytes]:
        db = self.readable_data() / "fairdeck.db"
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return [bytes(r[0]) for r in conn.execute("SELECT entry FROM log_entries ORDER BY idx")]

    def stop(self) -> None:
        for dealer in self.dealers:
            dealer.terminate()

    def check(self) -> None:
        """The two invariants, on the stopped dealers' data dir."""
        self.stop()
        if not (self.outside_data / "fairdeck.db").exists():
            assert not self.ledger.opened, "hands were acknowledged, and there is no database"
            return
        self.ledger.check(self.entries())
        audit = self.audit("--data", str(self.readable_data()))
        if self.damaged:  # the one finding a damaged row must give: that hand is never revealed
            found = {f["hand_id"] for f in audit.report["findings"]}
            assert found == self.damaged, f"the audit should name exactly the damaged hands: {audit.out}"
            return
        assert audit.rc == 0 and audit.report["findings"] == [], (
            f"the audit of an honest dealer reports: {audit.out or audit.err}"
        )

    def close(self) -> None:
        self.stop()
        if self.sandbox is not None:
            self.sandbox.close()


def metric(dealer: DealerProcess, name: str, **labels: str) -> float:
    """One sample of a dealer process's /metrics (started with --metrics-listen), 0 if absent."""
    found = re.search(r"metrics on (http://\S+/metrics)", dealer.stderr())
    assert found, "the dealer serves no /metrics (start it with --metrics-listen 127.0.0.1:0)"
    with urllib.request.urlopen(found.group(1), timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return 0.0


def worker_pids(dealer: DealerProcess) -> list[int]:
    """The pids of the processes of a ``serve --processes N`` dealer (to signal one of them)."""
    rest = dealer.listening.group(4) or ""
    found = re.fullmatch(r"(\d+) processes, pids ([\d ]+)", rest)
    assert found, f"not a --processes dealer: {rest!r}"
    return [int(pid) for pid in found.group(2).split()]


def lines(dealer: DealerProcess, needle: str) -> list[str]:
    """The dealer's log lines that hold ``needle``."""
    return [line for line in dealer.stderr().splitlines() if needle in line]


@pytest.fixture
def run(tmp_path: Path, serve_forker: ServeForker) -> Iterator[FaultRun]:
    """A scenario's run; when the scenario returns, its dealers are stopped and both invariants
    are checked on what they wrote. Its plain starts are forked from the worker's ``serve_forker``."""
    fault_run = FaultRun(tmp_path, serve_forker)
    try:
        yield fault_run
        fault_run.check()
    finally:
        fault_run.close()
