"""Shared machinery of the transparency-log tests: a real in-process dealer
with a configurable ServerConfig, the ``fairdeck audit`` command run in-process
(or as the real console script), and read/write access to a data dir's log
tables for the tampering tests."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fairdeck.cli import main as fairdeck_main
from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.note import Signer
from tests.support.dealers import RunningDealer
from tests.support.env import clean_env
from tests.support.waits import wait_for

DB_NAME = "fairdeck.db"
LONG_LIFETIME = "1000000"  # seconds: no hand of a test is ever "too old" with this


# -- the fairdeck command --------------------------------------------------------------------------


@dataclass
class CliResult:
    rc: int
    out: str
    err: str

    @property
    def report(self) -> dict[str, Any]:
        """The ``--json`` report."""
        parsed: dict[str, Any] = json.loads(self.out)
        return parsed

    @property
    def findings(self) -> list[dict[str, Any]]:
        return list(self.report["findings"])


def fairdeck(*args: str) -> CliResult:
    """``fairdeck ARGS`` in this process (the same code path as the console script)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = fairdeck_main(list(args))
        except SystemExit as e:  # argparse
            rc = int(e.code or 0)
    return CliResult(rc, out.getvalue(), err.getvalue())


def fairdeck_process(*args: str, timeout: float = 60) -> CliResult:
    """``python -m fairdeck.cli ARGS``: the real console script in a subprocess."""
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def audit_data(data_dir: Path, *extra: str, key: str | None = None) -> CliResult:
    """``fairdeck audit --data DIR --key ... --json EXTRA`` in-process."""
    return fairdeck(
        "audit", "--data", str(data_dir), "--key", key or verifier_key(data_dir), "--json", *extra
    )


def signer_of(data_dir: Path) -> Signer:
    """The log's real signing key (what a dishonest operator holds)."""
    return Signer.parse((data_dir / "log.key").read_text().strip())


def verifier_key(data_dir: Path) -> str:
    return signer_of(data_dir).verifier.to_string()


def finding_text(result: CliResult) -> str:
    return "\n".join(f"{f['index']} {f['hand_id']} {f['problem']}" for f in result.findings)


def has_finding(
    result: CliResult, problem: str, *, index: int | None = None, hand_id: str | None = None
) -> bool:
    """True when some finding's problem contains ``problem`` (and names ``index``/``hand_id`` if given)."""
    return any(
        problem in f["problem"]
        and (index is None or f["index"] == index)
        and (hand_id is None or f["hand_id"] == hand_id)
        for f in result.findings
    )


# -- the log tables of a data dir ------------------------------------------------------------------


@contextlib.contextmanager
def database(data_dir: Path) -> Iterator[sqlite3.Connection]:
    """A read-write connection to a stopped dealer's database, committed on exit."""
    conn = sqlite3.connect(data_dir / DB_NAME, isolation_level=None)
    try:
        conn.execute("BEGIN")
        yield conn
        conn.execute("COMMIT")
    finally:
        conn.close()


def read_entries(data_dir: Path) -> list[bytes]:
    with database(data_dir) as conn:
        return [bytes(r[0]) for r in conn.execute("SELECT entry FROM log_entries ORDER BY idx")]


def checkpoint_sizes(data_dir: Path) -> set[int]:
    """The sizes of the stored checkpoints, read beside a running dealer (read only)."""
    conn = sqlite3.connect(f"file:{data_dir / DB_NAME}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT size FROM checkpoints")}
    finally:
        conn.close()


def read_checkpoints(data_dir: Path) -> list[tuple[int, bytes, bytes]]:
    """Every stored checkpoint as (size, root, note), smallest first."""
    with database(data_dir) as conn:
        rows = conn.execute("SELECT size, root, note FROM checkpoints ORDER BY size").fetchall()
    return [(r[0], bytes(r[1]), bytes(r[2])) for r in rows]


def tree_root(entries: list[bytes]) -> bytes:
    return merkle.root([merkle.leaf_hash(e) for e in entries])


def sign_tree(signer: Signer, size: int, root: bytes) -> bytes:
    return sign_checkpoint(Checkpoint(signer.name, size, root), signer)


def append_signed(data_dir: Path, new_entries: list[bytes]) -> int:
    """Append entries and a checkpoint over the whole new tree, signed with the REAL key.

    Returns the new tree size. Old checkpoints stay: the old log is a prefix of the new one.
    """
    signer = signer_of(data_dir)
    entries = read_entries(data_dir) + new_entries
    with database(data_dir) as conn:
        start = len(entries) - len(new_entries)
        conn.executemany(
            "INSERT INTO log_entries (idx, entry) VALUES (?, ?)",
            [(start + i, e) for i, e in enumerate(new_entries)],
        )
        root = tree_root(entries)
        conn.execute(
            "INSERT INTO checkpoints (size, root, note, time_ms) VALUES (?, ?, ?, ?)",
            (len(entries), root, sign_tree(signer, len(entries), root), time.time_ns() // 1_000_000),
        )
    return len(entries)


def resign_all(data_dir: Path) -> int:
    """Replace every checkpoint with one signed (REAL key) over the entries as they are now."""
    signer = signer_of(data_dir)
    entries = read_entries(data_dir)
    root = tree_root(entries)
    with database(data_dir) as conn:
        conn.execute("DELETE FROM checkpoints")
        conn.execute(
            "INSERT INTO checkpoints (size, root, note, time_ms) VALUES (?, ?, ?, ?)",
            (len(entries), root, sign_tree(signer, len(entries), root), time.time_ns() // 1_000_000),
        )
    return len(entries)


# -- a real log, built once ------------------------------------------------------------------------


@dataclass
class BuiltLog:
    """A stopped dealer's data dir holding a real log, and what went into it."""

    data_dir: Path
    closed: dict[str, bytes] = field(default_factory=dict)
    """hand_id -> commitment of every hand closed by CloseHand or DealHands(close=True)."""
    still_open: dict[str, bytes] = field(default_factory=dict)
    """hand_id -> commitment of every hand left open (OPEN or SHUFFLED)."""
    entries: int = 0
    checkpoint_sizes: list[int] = field(default_factory=list)

    def copy(self, to: Path) -> Path:
        shutil.copytree(self.data_dir, to)
        return to


def build_log(data_dir: Path) -> BuiltLog:
    """A few hundred hands through a real dealer: closed by CloseHand, by
    DealHands(close=True), and a few left open; then a clean stop."""
    built = BuiltLog(data_dir)
    # A short checkpoint interval, and a wait for a checkpoint of the whole log between the
    # phases, so the log has checkpoints at many sizes.
    with (
        RunningDealer(data_dir, checkpoint_interval=0.02) as dealer,
        DealerClient(dealer.target, timeout=20) as c,
    ):
        assert dealer.server is not None
        storage = dealer.server.storage

        def checkpointed() -> None:
            size: int = dealer._run(storage.log_size())
            wait_for(f"a checkpoint of all {size} entries", lambda: size in checkpoint_sizes(data_dir))

        # 30 tables open, then play, then close in the reverse order: 30 commits, then 30 reveals.
        hands = [c.open_hand("standard") for _ in range(30)]
        for i, hand in enumerate(hands):
            c.shuffle(hand.hand_id, [f"seat-{i}", b"\x00\xff"])
            c.draw(hand.hand_id, 5)
        checkpointed()
        for hand in reversed(hands):
            built.closed[c.close_hand(hand.hand_id).hand_id] = hand.commitment
        checkpointed()
        for dealt in c.deal_hands("short", 150, client_seeds=["batch"], close=True):
            built.closed[dealt.hand_id] = dealt.commitment
        checkpointed()
        deals = [c.deal_new_hand("jokers", client_seeds=[f"table-{i}"]) for i in range(20)]
        for deal in deals:
            built.closed[c.close_hand(deal.hand.hand_id).hand_id] = deal.hand.commitment
        checkpointed()
        for dealt in c.deal_hands("standard", 20, close=False):  # dealt, never closed
            built.still_open[dealt.hand_id] = dealt.commitment
        for _ in range(4):  # opened, never shuffled
            hand = c.open_hand("standard")
            built.still_open[hand.hand_id] = hand.commitment
        checkpointed()
    built.entries = len(read_entries(data_dir))
    built.checkpoint_sizes = [size for size, _, _ in read_checkpoints(data_dir)]
    assert built.entries == 2 * len(built.closed) + len(built.still_open)
    assert built.checkpoint_sizes[-1] == built.entries, "a clean stop signs the whole log"
    assert len(built.checkpoint_sizes) >= 4
    return built


@pytest.fixture(scope="session")
def built_log(tmp_path_factory: pytest.TempPathFactory) -> BuiltLog:
    """The pristine log; never modified (tests tamper with copies)."""
    return build_log(tmp_path_factory.mktemp("built") / "data")


@pytest.fixture
def log_copy(built_log: BuiltLog, tmp_path: Path) -> Path:
    """A private copy of the built log's data dir, to tamper with."""
    return built_log.copy(tmp_path / "data")


def deal(target: str, *, closed: int, still_open: int) -> int:
    """Some closed hands and some left open; returns the log size afterwards."""
    last = 0
    with DealerClient(target, timeout=20) as c:
        for dealt in c.deal_hands("standard", closed, close=True):
            assert dealt.reveal_receipt is not None
            last = dealt.reveal_receipt.index
        for _ in range(still_open):
            last = c.open_hand("short").commit_receipt.index
    return last + 1


def settle(dealer: RunningDealer, size: int) -> bytes:
    """Wait until the dealer's signed head covers ``size`` entries; return its note."""
    vkey = verifier_key(dealer.data_dir)
    with AuditClient(dealer.target, verifier=vkey, timeout=10) as log:
        wait_for("a checkpoint covering the log", lambda: log.checkpoint().size >= size, every=0.01)
    return read_checkpoints(dealer.data_dir)[-1][2]


def audit(*where: str, key: str, since: Path | None = None, lifetime: str = LONG_LIFETIME) -> CliResult:
    extra = ["--since", str(since)] if since is not None else []
    return fairdeck("audit", *where, "--key", key, "--max-hand-lifetime", lifetime, "--json", *extra)
