"""kill -9 under load: nothing acknowledged is lost from the log, and no
signed checkpoint is ever contradicted.

The real console script (``fairdeck serve``, its ``__main__`` forked from a
process that imported it once: tests/support/forked_serve.py) runs as a
process of its own. Threads drive OpenHand+DrawCards+CloseHand cycles, DealNewHand (some
closed) and small DealHands batches, and record every open and close whose
response arrived. At a moment drawn from a seeded random.Random the dealer is
killed with SIGKILL. The data dir is copied as the crash left it and checked:

- every acknowledged open's commit entry and every acknowledged close's
  reveal entry is in the log, at the index of its receipt;
- every signed checkpoint (the latest above all) has size <= the stored
  entries and the root of the tree of that size, and the stored tree hashes
  agree with the entries;
- ``fairdeck audit --data`` of the crashed copy passes.

Then the dealer restarts on the same data dir; the SDK's AuditClient proves
the restarted log extends the last checkpoint signed before the crash and
that acknowledged hands are in it. After the last cycle the dealer stops
cleanly and the real ``fairdeck audit --data`` passes.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.client.models import Hand
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, open_checkpoint
from fairdeck.log.logentry import CommitEntry, RevealEntry, decode
from fairdeck.log.note import Verifier
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker
from tests.support.logs import (
    DB_NAME,
    LONG_LIFETIME,
    audit_data,
    fairdeck_process,
    verifier_key,
)
from tests.support.waits import pace

pytestmark = pytest.mark.slow

CYCLES = 20
SEED = 0xFA1D_DEC4


def start_dealer(data: Path, stderr: Path, forker: ServeForker) -> DealerProcess:
    """The console script's ``serve``, forked from ``forker``: 21 starts of a new interpreter and
    the dealer's imports were a third of this test's time."""
    return DealerProcess(
        data, stderr,
        "--max-hand-lifetime", LONG_LIFETIME, "--log-level", "WARNING",
        "--rate-limit", "0", "--max-open-hands", "0",  # load, not limits (tests/policy)
        forker=forker,
    )  # fmt: skip


@dataclass
class Acks:
    """Every open and close whose response the client received."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    commits: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    """hand_id -> (commit receipt index, commitment)."""
    reveals: dict[str, int] = field(default_factory=dict)
    """hand_id -> reveal receipt index."""
    closed: list[tuple[Hand, bytes]] = field(default_factory=list)
    """Closed hands (and the commitment seen at open), for AuditClient.verify_hand."""
    unexpected: list[BaseException] = field(default_factory=list)

    def opened(self, hand_id: str, index: int, commitment: bytes) -> None:
        with self.lock:
            self.commits[hand_id] = (index, commitment)

    def revealed(self, hand_id: str, index: int) -> None:
        with self.lock:
            self.reveals[hand_id] = index


DECKS = ("standard", "short", "jokers")


def play(c: DealerClient, rng: random.Random, acks: Acks) -> None:
    hand = c.open_hand(rng.choice(DECKS))
    acks.opened(hand.hand_id, hand.commit_receipt.index, hand.commitment)
    c.draw(hand.hand_id, rng.randint(1, 5))
    closed = c.close_hand(hand.hand_id)
    assert closed.reveal_receipt is not None
    acks.revealed(hand.hand_id, closed.reveal_receipt.index)
    with acks.lock:
        acks.closed.append((closed, hand.commitment))


def deal_new(c: DealerClient, rng: random.Random, acks: Acks) -> None:
    deal = c.deal_new_hand(rng.choice(DECKS), client_seeds=[f"seat-{rng.randrange(10)}"])
    acks.opened(deal.hand.hand_id, deal.hand.commit_receipt.index, deal.hand.commitment)
    if rng.random() < 0.5:
        closed = c.close_hand(deal.hand.hand_id)
        assert closed.reveal_receipt is not None
        acks.revealed(closed.hand_id, closed.reveal_receipt.index)


def batch(c: DealerClient, rng: random.Random, acks: Acks) -> None:
    close = rng.random() < 0.5
    for h in c.deal_hands(rng.choice(DECKS), rng.randint(1, 8), close=close):
        acks.opened(h.hand_id, h.commit_receipt.index, h.commitment)
        if close:
            assert h.reveal_receipt is not None
            acks.revealed(h.hand_id, h.reveal_receipt.index)


WORKERS: tuple[Callable[[DealerClient, random.Random, Acks], None], ...] = (play, play, deal_new, batch)


def drive(target: str, seed: int, acks: Acks, killed: threading.Event) -> list[threading.Thread]:
    """Start the load; each worker runs until a call fails, which it may only once ``killed`` is set."""

    def loop(work: Callable[[DealerClient, random.Random, Acks], None], rng: random.Random) -> None:
        with DealerClient(target, timeout=5) as c:
            while not killed.is_set():
                try:
                    work(c, rng, acks)
                except Exception as e:
                    if not killed.is_set():  # a failure while the dealer was still alive
                        with acks.lock:
                            acks.unexpected.append(e)
                    return

    threads = [
        threading.Thread(target=loop, args=(work, random.Random(seed * 31 + i)), daemon=True)
        for i, work in enumerate(WORKERS)
    ]
    for t in threads:
        t.start()
    return threads


def snapshot(data_dir: Path, to: Path) -> Path:
    """Copy the database files exactly as the crash left them (WAL included)."""
    shutil.rmtree(to, ignore_errors=True)
    to.mkdir(parents=True)
    for suffix in ("", "-wal", "-shm"):
        src = data_dir / (DB_NAME + suffix)
        if src.exists():
            shutil.copy2(src, to / src.name)
    shutil.copy2(data_dir / "log.key", to / "log.key")
    return to


def roots_at(leaves: list[bytes], sizes: set[int]) -> dict[int, bytes]:
    """The Merkle roots of the trees of each of ``sizes`` leaves, in one pass."""
    stack: list[tuple[int, bytes]] = []  # complete subtrees: (leaf count, hash)
    roots = {0: merkle.EMPTY_ROOT} if 0 in sizes else {}
    for n, leaf in enumerate(leaves, start=1):
        count, h = 1, leaf
        while stack and stack[-1][0] == count:
            left_count, left = stack.pop()
            count, h = left_count + count, merkle.node_hash(left, h)
        stack.append((count, h))
        if n in sizes:
            root = stack[-1][1]
            for _, left in reversed(stack[:-1]):
                root = merkle.node_hash(left, root)
            roots[n] = root
    return roots


@dataclass
class Crashed:
    """What the previous crashes left, to check the next one against."""

    entries: list[bytes] = field(default_factory=list)
    checked_commits: set[str] = field(default_factory=set)
    checked_reveals: set[str] = field(default_factory=set)
    head: Checkpoint | None = None


def check_crashed_log(snap: Path, verifier: Verifier, acks: Acks, before: Crashed, *, audit: bool) -> Crashed:
    """The crashed copy's log: acknowledged entries present, checkpoints true, the
    earlier crashes' log a prefix of it; with ``audit``, ``fairdeck audit --data`` passes."""
    conn = sqlite3.connect(snap / DB_NAME)  # recovers the WAL of the copy, as a restart would
    try:
        rows = conn.execute("SELECT idx, entry FROM log_entries ORDER BY idx").fetchall()
        checkpoints = conn.execute("SELECT size, root, note FROM checkpoints ORDER BY size").fetchall()
        stored = dict(conn.execute("SELECT idx, hash FROM log_hashes").fetchall())
    finally:
        conn.close()
    assert [r[0] for r in rows] == list(range(len(rows))), "the log has gaps"
    entries = [bytes(r[1]) for r in rows]
    assert entries[: len(before.entries)] == before.entries, "the log was rewritten, not appended to"
    now = Crashed(entries, set(before.checked_commits), set(before.checked_reveals))

    # Acknowledged opens and closes not checked after an earlier crash (those are in the prefix).
    with acks.lock:
        commits = {h: v for h, v in acks.commits.items() if h not in now.checked_commits}
        reveals = {h: i for h, i in acks.reveals.items() if h not in now.checked_reveals}
    for hand_id, (index, commitment) in commits.items():
        assert index < len(entries), f"acknowledged open of {hand_id} (entry {index}) is lost"
        e = decode(entries[index])
        assert isinstance(e, CommitEntry) and (e.hand_id, e.commitment) == (hand_id, commitment)
    for hand_id, index in reveals.items():
        assert index < len(entries), f"acknowledged close of {hand_id} (entry {index}) is lost"
        e = decode(entries[index])
        assert isinstance(e, RevealEntry) and e.hand_id == hand_id
    now.checked_commits |= commits.keys()
    now.checked_reveals |= reveals.keys()

    # Every signed checkpoint is a tree of the stored entries; the latest one above all.
    leaves = [merkle.leaf_hash(e) for e in entries]
    roots = roots_at(leaves, {r[0] for r in checkpoints} | {len(leaves)})
    for size, root, note in checkpoints:
        cp = open_checkpoint(bytes(note), verifier, verifier.name)
        assert (cp.size, cp.root) == (size, bytes(root))
        assert size <= len(entries), f"a checkpoint signs {size} entries, {len(entries)} survived"
        assert cp.root == roots[size], f"the checkpoint at {size} is not the stored tree"
        now.head = cp
    if before.head is not None:
        assert now.head is not None and now.head.size >= before.head.size
    # The stored tree hashes agree with the entries (the restarted dealer proves from them).
    assert merkle.tree_hash(len(leaves), lambda ix: [bytes(stored[i]) for i in ix]) == roots[len(leaves)]

    if audit or now.head is None:
        result = audit_data(snap, "--max-hand-lifetime", LONG_LIFETIME)
        if now.head is None:  # killed before the first checkpoint was signed
            assert [f["problem"] for f in result.findings] == ["no signed checkpoint covers the log"]
        else:
            assert result.rc == 0, result.out
            assert (result.report["tree_size"], result.report["entries"]) == (now.head.size, len(entries))
    return now


def check_restarted(
    target: str, vkey: str, acks: Acks, before: Checkpoint | None, rng: random.Random
) -> None:
    """The restarted dealer's log extends what was signed before the crash and holds acknowledged hands."""
    with AuditClient(target, verifier=vkey, timeout=10) as log:
        if before is not None:
            head = log.consistency(before)
            assert head.size >= before.size
        with acks.lock:
            sample = rng.sample(acks.closed, min(3, len(acks.closed)))
        for hand, commitment in sample:
            log.verify_hand(hand, commitment=commitment)


def test_kill_9_under_load(tmp_path: Path) -> None:
    rng = random.Random(SEED)  # the kill schedule and the load's choices
    sample_rng = random.Random(SEED + 1)  # which hands to prove after a restart
    data = tmp_path / "data"
    stderr = tmp_path / "dealer-stderr.txt"
    acks = Acks()
    crashed = Crashed()
    dealer: DealerProcess | None = None
    forker = ServeForker()
    try:
        for cycle in range(CYCLES):
            dealer = start_dealer(data, stderr, forker)
            vkey = verifier_key(data)
            check_restarted(dealer.target, vkey, acks, crashed.head, sample_rng)
            killed = threading.Event()
            threads = drive(dealer.target, rng.randrange(2**32), acks, killed)
            pace(rng.uniform(0.3, 1.2))  # the load runs a while, then the crash
            killed.set()
            dealer.kill9()
            # The files are final once the process is dead; the workers wind down
            # (the SDK retries against the dead port) while the copy is checked.
            snap = snapshot(data, tmp_path / "snap")
            crashed = check_crashed_log(snap, Verifier.parse(vkey), acks, crashed, audit=cycle % 5 == 4)
            for t in threads:
                t.join(timeout=15)
                assert not t.is_alive(), "a load thread hung after the dealer died"
            assert not acks.unexpected, f"cycle {cycle}: a call failed before the kill: {acks.unexpected!r}"
            assert crashed.head is not None or cycle == 0
        assert len(acks.commits) > 20 * CYCLES and len(acks.reveals) > 10 * CYCLES, "the load did run"

        dealer = start_dealer(data, stderr, forker)
        check_restarted(dealer.target, verifier_key(data), acks, crashed.head, sample_rng)
        assert dealer.terminate() == 0
    finally:
        if dealer is not None and dealer.proc.poll() is None:
            dealer.proc.kill()
            dealer.proc.wait()
        forker.close()

    snap = snapshot(data, tmp_path / "snap")
    final_check = check_crashed_log(snap, Verifier.parse(verifier_key(data)), acks, crashed, audit=False)
    assert final_check.head is not None and final_check.head.size == len(final_check.entries), (
        "stop signs all"
    )
    key_file = tmp_path / "log.vkey"
    key_file.write_text(fairdeck_process("key", "--data", str(data)).out)
    final = fairdeck_process(
        "audit", "--data", str(data), "--key", f"@{key_file}", "--max-hand-lifetime", LONG_LIFETIME, "--json"
    )
    assert final.rc == 0, final.out + final.err
    report = final.report
    assert report["hands"] >= len(acks.commits)
    assert report["closed"] >= len(acks.reveals)
    assert report["tree_size"] == report["entries"] == len(final_check.entries)
