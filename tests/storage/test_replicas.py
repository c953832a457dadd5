"""Two real dealer processes (``fairdeck serve --db postgresql://...``) on one
database, sharing the seed key and the log key: a hand can move between
them call by call, an idempotent retry sent to the other replica gets the
same hand, and after one replica is killed (SIGKILL) in the middle of load,
``fairdeck audit`` against the survivor passes and finds every acknowledged
open and close in the log at the index of its receipt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.client.models import HandState
from fairdeck.log import logentry
from fairdeck_server.dealing.vault import load_or_create_key
from fairdeck_server.publishing.log_signing import load_or_create_signer
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.waits import wait_for


class Replica(DealerProcess):
    """``fairdeck serve --db URL`` on 127.0.0.1:0 with its own data dir and the shared keys."""

    def __init__(self, name: str, tmp: Path, url: str, seed_key: Path, log_key: Path) -> None:
        self.name = name
        super().__init__(
            tmp / name, tmp / f"{name}.stderr",
            "--db", url, "--seed-key-file", str(seed_key), "--log-key-file", str(log_key),
            "--checkpoint-interval", "0.05", "--rate-limit", "0", "--log-level", "WARNING",
        )  # fmt: skip

    def kill(self) -> None:
        self.kill9()

    def stop(self) -> None:
        self.terminate()


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path, str]:
    """The seed key and log key both replicas load, and the log's verifier key."""
    seed_key, log_key = tmp_path / "seed.key", tmp_path / "log.key"
    load_or_create_key(seed_key, environ={})
    signer = load_or_create_signer(log_key, "fairdeck.test/replicas")
    return seed_key, log_key, signer.verifier.to_string()


@pytest.fixture
def pair(tmp_path: Path, pg_url: str, keys: tuple[Path, Path, str]) -> Iterator[tuple[Replica, Replica]]:
    seed_key, log_key, _ = keys
    a = Replica("a", tmp_path, pg_url, seed_key, log_key)
    try:
        b = Replica("b", tmp_path, pg_url, seed_key, log_key)
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()
    for replica in (a, b):
        assert "Traceback" not in replica.stderr(), replica.stderr()


def test_a_hand_moves_between_replicas(pair: tuple[Replica, Replica], keys: tuple[Path, Path, str]) -> None:
    a_target, b_target = pair[0].target, pair[1].target
    with DealerClient(a_target, timeout=20) as a, DealerClient(b_target, timeout=20) as b:
        opened = a.open_hand("standard")
        b.shuffle(opened.hand_id, ["alice", "bob"])
        first = a.draw(opened.hand_id, 2).cards
        second = b.draw(opened.hand_id, 3).cards
        assert a.get(opened.hand_id).dealt_count == 5
        closed = b.close_hand(opened.hand_id)
        closed.verify(commitment=opened.commitment, dealt=first + second)
        assert a.close_hand(opened.hand_id).reveal_receipt == closed.reveal_receipt  # closing again: as is

        dealt = b.deal_new_hand("short", client_seeds=["x"])
        assert a.close_hand(dealt.hand.hand_id).state is HandState.CLOSED

        # A retry of an idempotent open, sent to the other replica, gets the same hand.
        once = a.open_hand("jokers", request_id="retry-1")
        again = b.open_hand("jokers", request_id="retry-1")
        assert (again.hand_id, again.commit_receipt) == (once.hand_id, once.commit_receipt)
        with pytest.raises(FairdeckError) as reused:
            b.open_hand("standard", request_id="retry-1")
        assert reused.value.reason == "REQUEST_ID_REUSED"

    with AuditClient(b_target, verifier=keys[2], timeout=20) as log:  # commit and reveal are in the log
        log.verify_hand(closed, commitment=opened.commitment)


def test_killing_a_replica_mid_load_loses_nothing_acknowledged(
    pair: tuple[Replica, Replica], keys: tuple[Path, Path, str], tmp_path: Path
) -> None:
    a, b = pair
    lock = threading.Lock()
    commits: dict[str, int] = {}  # hand_id -> commit index of every acknowledged open/deal
    reveals: dict[str, int] = {}  # hand_id -> reveal index of every acknowledged close
    opened_on_a: list[str] = []  # acknowledged open on A, not closed
    unexpected: list[BaseException] = []
    stop_b = threading.Event()
    killing_a = threading.Event()  # before it is set, an error on A is a failure too
    calls: dict[tuple[str, str], int] = {}  # (replica, kind) -> calls completed

    def ack(hand_id: str, commit: int | None = None, reveal: int | None = None) -> None:
        with lock:
            if commit is not None:
                commits[hand_id] = commit
            if reveal is not None:
                reveals[hand_id] = reveal

    def worker(replica: Replica, kind: str, stop: threading.Event | None) -> None:
        """Calls back to back until the replica dies (A) or the test says stop (B)."""
        left_open = 0
        with DealerClient(replica.target, timeout=20) as c:
            while stop is None or not stop.is_set():
                try:
                    if kind == "deal":
                        d = c.deal_new_hand("standard", client_seeds=[kind])
                        ack(d.hand.hand_id, commit=d.hand.commit_receipt.index)
                    elif kind == "batch":
                        for h in c.deal_hands("short", 40, close=True):
                            assert h.reveal_receipt is not None
                            ack(h.hand_id, h.commit_receipt.index, h.reveal_receipt.index)
                    else:  # open, draw, close; on A, the first few hands are left open
                        h = c.open_hand("jokers")
                        ack(h.hand_id, commit=h.commit_receipt.index)
                        c.draw(h.hand_id, 3)
                        if replica is a and left_open < 3:
                            left_open += 1
                            opened_on_a.append(h.hand_id)
                        else:
                            closed = c.close_hand(h.hand_id)
                            assert closed.reveal_receipt is not None
                            ack(h.hand_id, reveal=closed.reveal_receipt.index)
                    with lock:
                        calls[replica.name, kind] = calls.get((replica.name, kind), 0) + 1
                except FairdeckError as e:
                    if stop is None and killing_a.is_set():  # A's workers end when A is killed
                        return
                    with lock:
                        unexpected.append(e)
                    return
                except BaseException as e:
                    with lock:
                        unexpected.append(e)
                    return

    def calls_on(replica: Replica, more: int) -> None:
        """Until every kind of call completed ``more`` more times on the replica."""
        with lock:
            want = {k: calls.get((replica.name, k), 0) + more for k in kinds}

        def done() -> bool:
            with lock:
                assert not unexpected, unexpected
                return all(calls.get((replica.name, k), 0) >= n for k, n in want.items())

        wait_for(f"{more} more calls of each kind on {replica.name}", done, timeout=60, every=0.01)

    kinds = ["deal", "batch", "cycle"]
    on_a = [threading.Thread(target=worker, args=(a, k, None)) for k in kinds]
    on_b = [threading.Thread(target=worker, args=(b, k, stop_b)) for k in kinds]
    for t in on_a + on_b:
        t.start()
    try:
        calls_on(a, 5)  # calls of every kind flowing on both replicas
        calls_on(b, 5)
        killing_a.set()
        a.kill()
        killed_at = len(commits)
        calls_on(b, 5)  # B keeps serving after A died
    finally:
        stop_b.set()
        for t in on_a + on_b:
            t.join(timeout=60)
    assert not unexpected, unexpected
    assert len(commits) > killed_at

    with DealerClient(b.target, timeout=20) as c:  # B reveals a hand A opened before it died
        assert opened_on_a
        for hand_id in opened_on_a:
            closed = c.close_hand(hand_id)
            assert closed.reveal_receipt is not None
            reveals[hand_id] = closed.reveal_receipt.index

    with AuditClient(b.target, verifier=keys[2], timeout=20) as log:
        size = max([*commits.values(), *reveals.values()]) + 1
        wait_for("a checkpoint covering the acknowledged entries", lambda: log.checkpoint().size >= size)
        entries = dict(log.entries())

    for hand_id, index in commits.items():
        e = logentry.decode(entries[index])
        assert isinstance(e, logentry.CommitEntry) and e.hand_id == hand_id, (hand_id, index)
    for hand_id, index in reveals.items():
        e = logentry.decode(entries[index])
        assert isinstance(e, logentry.RevealEntry) and e.hand_id == hand_id, (hand_id, index)

    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "audit", "--target", b.target, "--key", keys[2],
         "--max-hand-lifetime", "1000000", "--json"],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["findings"] == []
    assert report["entries"] >= size
    assert report["closed"] >= len(reveals)


def _audit_db(url: str, vkey: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "audit", "--db", url, "--key", vkey, "--json"],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.returncode, json.loads(done.stdout)


def test_audit_reads_the_shared_database_with_a_read_only_role(
    pair: tuple[Replica, Replica], keys: tuple[Path, Path, str], pg_url: str
) -> None:
    """fairdeck audit --db: the log straight from PostgreSQL, as a role that may only
    SELECT the log's two tables; then one changed byte in one entry is found."""
    import psycopg

    a, b = pair
    with DealerClient(a.target, timeout=20) as ca, DealerClient(b.target, timeout=20) as cb:
        dealt = [*ca.deal_hands("standard", 5, close=True), *cb.deal_hands("short", 5, close=True)]
    size = max(h.reveal_receipt.index for h in dealt if h.reveal_receipt is not None) + 1
    with AuditClient(b.target, verifier=keys[2], timeout=20) as log:
        wait_for("a checkpoint covering the dealt hands", lambda: log.checkpoint().size >= size)
    reader = f"reader_{os.getpid()}_{time.monotonic_ns()}"  # roles are cluster-wide: a new one
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {reader} LOGIN")
        conn.execute(f"GRANT SELECT ON log_entries, checkpoints TO {reader}")
    reader_url = pg_url.replace("://postgres@", f"://{reader}@", 1)
    assert reader_url != pg_url

    code, report = _audit_db(reader_url, keys[2])
    assert (code, report["ok"], report["findings"]) == (0, True, [])
    assert report["entries"] == report["tree_size"] == size and report["closed"] == 10

    with psycopg.connect(pg_url, autocommit=True) as conn:
        flip = "set_byte(entry, 20, get_byte(entry, 20) # 1)"  # one bit of one byte
        conn.execute(f"UPDATE log_entries SET entry = {flip} WHERE idx = 3")
    code, report = _audit_db(reader_url, keys[2])
    assert code == 1 and report["ok"] is False
    [found] = report["findings"]  # once, at the entries the signed checkpoints locate
    assert found["index"] <= 3 <= (found["last_index"] or found["index"]), found


def test_audit_of_an_unreachable_database_says_so_without_its_password(keys: tuple[Path, Path, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "audit", "--db",
         "postgresql://auditor:hunter2@127.0.0.1:1/fairdeck?connect_timeout=5", "--key", keys[2]],
        capture_output=True, text=True, timeout=60, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("fairdeck audit: cannot read the log: ")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert "hunter2" not in done.stdout + done.stderr
