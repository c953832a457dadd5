"""Start-up refusals (docs/operations.md, "Runbook: each refusal"), each in the real
console script: exit 2, exactly one line on stderr naming the file or option, no traceback,
nothing created. Keys and the database are identities: serve never makes one because a
file went missing, never serves a key that is not the log's or cannot open its seeds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from tests.support.dealers import RunningDealer
from tests.support.env import clean_env
from tests.support.forked_serve import ForkedProcess, ServeForker

LISTENING = "fairdeck dealer listening on "
BLOCK_PSYCOPG = (
    "import sys; sys.modules['psycopg'] = None; from fairdeck.cli import main; sys.exit(main(sys.argv[1:]))"
)


@dataclass
class Outcome:
    rc: int
    out: str
    err: str
    started: bool
    """It printed its listening line: the dealer served (stopped by the test with SIGTERM)."""

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]

    def refused(self, *names: str) -> str:
        """Assert a clean refusal naming each of ``names``; returns the line."""
        assert not self.started, f"the dealer started; stderr: {self.err[-2000:]}"
        assert "Traceback" not in self.out + self.err, self.err[-3000:]
        assert self.rc == 2, (self.rc, self.err[-2000:])
        assert len(self.lines) == 1, self.lines
        line = self.lines[0]
        assert line.startswith("fairdeck "), line
        for name in names:
            assert name in line, (name, line)
        return line


FORKER: list[ServeForker] = []
"""The module's forking process, while its tests run (``forked``)."""


@pytest.fixture(scope="module", autouse=True)
def forked() -> Iterator[None]:
    """Every ``fairdeck ARGS`` of the module is forked from one process that imported the console
    script and the dealer (tests/support/forked_serve.py): a new interpreter and the dealer's
    imports, about 0.7 s of CPU, were most of each case's time."""
    FORKER.append(ServeForker())
    yield
    FORKER.pop().close()


def run(*args: str, code: str | None = None, within: float = 60, fresh: bool = False) -> Outcome:
    """``fairdeck ARGS`` (or ``python -c CODE ARGS``); a dealer that starts is stopped and reported.
    Forked from the module's ServeForker, or ``fresh``: a new interpreter, as a user runs it."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as err_file:
        proc: subprocess.Popen[str] | ForkedProcess
        if code is None and FORKER and not fresh:
            proc = FORKER[0].start(args, err_file)
        else:
            head = [sys.executable, "-c", code] if code else [sys.executable, "-m", "fairdeck.cli"]
            proc = subprocess.Popen(
                [*head, *args], stdout=subprocess.PIPE, stderr=err_file, text=True, env=clean_env()
            )
        stdout = proc.stdout
        assert stdout is not None
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(within)
        started = bool(first) and first[0].startswith(LISTENING)
        if not started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(within)
        if proc.poll() is None:
            proc.terminate()
        rc = proc.wait(within)
        out = stdout.read()
        stdout.close()
        err_file.seek(0)
        return Outcome(rc, "".join(first) + out, err_file.read(), started)


def serve(*args: str, code: str | None = None, fresh: bool = False) -> Outcome:
    return run("serve", "--listen", "127.0.0.1:0", *args, code=code, fresh=fresh)


SQLITE_AND_LOCK = {"fairdeck.lock", "fairdeck.db-wal", "fairdeck.db-shm"}
"""Files a check of an existing data dir may leave: SQLite's own and the data dir lock."""


def listing(root: Path) -> dict[str, bytes]:
    """Every key and database file under ``root``, with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in SQLITE_AND_LOCK
    }


# -- a data dir with history: closed hands, open hands, signed checkpoints ----------------------


def _make(where: Path, hands: int) -> Path:
    dealer = RunningDealer(where, checkpoint_interval=0.02)
    try:
        dealer.start()
        with DealerClient(dealer.target, timeout=20) as client:
            for _ in range(hands):
                opened = client.open_hand("standard")
                client.draw(opened.hand_id, 5)
                client.close_hand(opened.hand_id)
            client.open_hand("standard")  # stays open: its seed is sealed under seed.key
    finally:
        dealer.close()
    assert (where / "log.key").exists() and (where / "seed.key").exists()
    return where


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory.mktemp("history") / "data", hands=150)


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another dealer's data dir: its keys are valid keys, but not ``history``'s."""
    return _make(tmp_path_factory.mktemp("other") / "data", hands=1)


@pytest.fixture
def data(history: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(history, copy)
    (copy / "fairdeck.lock").unlink(missing_ok=True)
    return copy


def _remove_db(d: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (d / f"fairdeck.db{suffix}").unlink(missing_ok=True)


def _truncate_db(d: Path) -> None:
    _remove_db(d)
    (d / "fairdeck.db").write_bytes(b"")


def _foreign_db(d: Path) -> None:
    _remove_db(d)
    with sqlite3.connect(d / "fairdeck.db") as db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('not a fairdeck database')")


def _malformed_db(d: Path) -> None:
    _remove_db(d)
    (d / "fairdeck.db").write_bytes(os.urandom(8192))


def _garbage_page(d: Path) -> None:
    """A page of garbage in the middle of the file, as a bad disk sector leaves it."""
    with sqlite3.connect(d / "fairdeck.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, size = (
            db.execute("PRAGMA page_count").fetchone()[0],
            db.execute("PRAGMA page_size").fetchone()[0],
        )
    assert pages > 20, pages
    with (d / "fairdeck.db").open("r+b") as f:
        f.seek(size * (pages // 2))
        f.write(b"\xde\xad\xbe\xef" * (size // 4))


def _copy_from(other_dir: Path, name: str) -> Callable[[Path], None]:
    def copy(d: Path) -> None:
        shutil.copy2(other_dir / name, d / name)

    return copy


# (id, how to break a data dir with history, what the one line must name)
BROKEN: list[tuple[str, Callable[[Path, Path], None], tuple[str, ...]]] = [
    ("database_missing", lambda d, o: _remove_db(d), ("fairdeck.db", "missing", "log.key", "restore")),
    ("database_zero_length", lambda d, o: _truncate_db(d), ("fairdeck.db", "empty", "restore")),
    ("database_without_tables", lambda d, o: _foreign_db(d), ("fairdeck.db", "no fairdeck tables")),
    ("database_malformed", lambda d, o: _malformed_db(d), ("fairdeck.db", "damaged", "restore")),
    ("database_garbage_page", lambda d, o: _garbage_page(d), ("fairdeck.db", "damaged", "restore")),
    ("log_key_missing", lambda d, o: (d / "log.key").unlink(), ("log.key", "missing", "restore")),
    ("log_key_wrong", lambda d, o: _copy_from(o, "log.key")(d), ("log.key", "not")),
    ("seed_key_missing", lambda d, o: (d / "seed.key").unlink(), ("seed.key", "missing", "restore")),
    ("seed_key_wrong", lambda d, o: _copy_from(o, "seed.key")(d), ("seed.key", "cannot open", "open hand")),
    ("log_key_mode", lambda d, o: (d / "log.key").chmod(0o644), ("log.key", "chmod 600")),
    ("seed_key_mode", lambda d, o: (d / "seed.key").chmod(0o640), ("seed.key", "chmod 600")),
]


@pytest.mark.parametrize(("case", "damage", "names"), BROKEN, ids=[c[0] for c in BROKEN])
def test_a_data_dir_that_is_not_whole_is_refused(
    case: str, damage: Callable[[Path, Path], None], names: tuple[str, ...], data: Path, other: Path
) -> None:
    damage(data, other)
    before = listing(data)
    serve("--data", str(data)).refused(*names)
    assert listing(data) == before, "a refusal wrote nothing: no new key, database or lock file"


def test_the_same_data_dir_with_its_own_keys_still_starts(data: Path) -> None:
    """The control for the table above: the undamaged copy serves."""
    started = run("serve", "--listen", "127.0.0.1:0", "--data", str(data))
    assert started.started, started.err[-2000:]


# (id, extra flags on a fresh data dir, what the line must name)
FRESH: list[tuple[str, list[str], tuple[str, ...]]] = [
    (
        "seed_key_file_missing",
        ["--seed-key-file", "{tmp}/nowhere/seed.key"],
        ("--seed-key-file", "fairdeck init"),
    ),
    (
        "log_key_file_missing",
        ["--log-key-file", "{tmp}/nowhere/log.key"],
        ("--log-key-file", "fairdeck init"),
    ),
    ("bad_log_origin", ["--log-origin", "not a name"], ("--log-origin",)),
    ("bad_log_origin_plus", ["--log-origin", "a+b"], ("--log-origin",)),
]


@pytest.mark.parametrize(("case", "flags", "names"), FRESH, ids=[c[0] for c in FRESH])
def test_a_fresh_data_dir_with_a_bad_option_is_refused_and_left_fresh(
    case: str, flags: list[str], names: tuple[str, ...], tmp_path: Path
) -> None:
    data = tmp_path / "fresh"
    serve("--data", str(data), *[f.format(tmp=tmp_path) for f in flags]).refused(*names)
    assert not data.exists() and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("kind", ["a bad option", "a started dealer"])
def test_the_console_script_in_a_fresh_interpreter_as_a_user_runs_it(
    kind: str, tmp_path: Path, data: Path
) -> None:
    """The cases above run forked from one process that imported the dealer once: what a fresh
    `fairdeck` prints while it imports (a dependency's warning), or a refusal that needs a module
    only the forker had imported, would not show there. A refusal and a start, fresh."""
    if kind == "a bad option":
        new = tmp_path / "fresh"
        serve("--data", str(new), "--max-hand-lifetime", "-1", fresh=True).refused("--max-hand-lifetime")
        assert not new.exists()
    else:
        outcome = serve("--data", str(data), fresh=True)
        assert outcome.started and not [
            line for line in outcome.lines if "WARNING" in line or "Warning:" in line
        ], outcome.err[-2000:]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_port_in_use_is_refused_before_a_fresh_data_dir_gets_keys(busy_port: int, tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    line = run("serve", "--listen", f"127.0.0.1:{busy_port}", "--data", str(data)).refused(
        f"--listen 127.0.0.1:{busy_port}"
    )
    assert "in use" in line
    assert not data.exists()


def test_a_metrics_port_in_use_is_refused_naming_the_port(busy_port: int, tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    serve("--data", str(data), "--metrics-listen", f"127.0.0.1:{busy_port}").refused(
        f"--metrics-listen 127.0.0.1:{busy_port}", "in use"
    )
    assert not data.exists()


def test_postgres_without_its_driver_is_refused_naming_the_extra(tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    outcome = serve("--data", str(data), "--db", "postgresql://fairdeck@127.0.0.1:1/none", code=BLOCK_PSYCOPG)
    outcome.refused("--db", "fairdeck[postgres]")
    assert not data.exists()


def test_a_second_dealer_on_one_data_dir_is_refused_naming_the_first(data: Path) -> None:
    first = subprocess.Popen(
        [sys.executable, "-m", "fairdeck.cli", "serve", "--listen", "127.0.0.1:0", "--data", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        assert first.stdout is not None and first.stdout.readline().startswith(LISTENING)
        serve("--data", str(data)).refused(str(data), f"pid {first.pid}", "in use")
    finally:
        first.terminate()
        first.communicate(timeout=30)
    assert first.returncode == 0
    assert run("serve", "--listen", "127.0.0.1:0", "--data", str(data)).started  # the lock went with it


# -- PostgreSQL: keys are never made by serve, and replicas must share them --------------------


def _keys(where: Path, origin: str) -> list[str]:
    """`fairdeck init --keys-only` into ``where``; the serve flags that use those keys."""
    flags = ["--seed-key-file", str(where / "seed.key"), "--log-key-file", str(where / "log.key")]
    made = run("init", "--keys-only", "--data", str(where / "unused"), "--log-origin", origin, *flags)
    assert made.rc == 0, made.err
    return flags


def _replica(pg_url: str, flags: list[str]) -> RunningDealer:
    seed, log = Path(flags[1]), Path(flags[3])
    return RunningDealer(seed.parent / "data", db=pg_url, seed_key_file=seed, log_key_file=log)


def test_postgres_replicas_with_other_keys_are_refused(pg_url: str, tmp_path: Path) -> None:
    ours, theirs = _keys(tmp_path / "ours", "pg.test/log"), _keys(tmp_path / "theirs", "pg.test/log")
    first = _replica(pg_url, ours)
    try:
        first.start()
        with DealerClient(first.target, timeout=20) as client:
            client.open_hand("standard")  # open: its seed is sealed under our seed key
    finally:
        first.close()
    db = ["--db", pg_url]
    # The other log key (same origin, so only the key itself tells them apart).
    serve(*db, *ours[:2], *theirs[2:]).refused("--log-key-file", str(tmp_path / "theirs" / "log.key"))
    # The other seed key cannot open the open hand.
    serve(*db, *theirs[:2], *ours[2:]).refused("--seed-key-file", "cannot open", "open hand")
    # A key file that is not there is named, and not made.
    nowhere = str(tmp_path / "nowhere" / "log.key")
    serve(*db, *ours[:2], "--log-key-file", nowhere).refused(f"--log-key-file {nowhere}", "fairdeck init")
    assert not (tmp_path / "nowhere").exists()
    assert run("serve", "--listen", "127.0.0.1:0", *db, *ours).started  # the control


def test_postgres_log_key_rotation_moves_the_record_on(pg_url: str, tmp_path: Path) -> None:
    """After `rotate-key log`, replicas with the rotated file start (its retired list holds the
    recorded key), and then a replica still holding only the old key is refused."""
    flags = _keys(tmp_path / "keys", "pg.test/rotation")
    log_key = Path(flags[3])
    old = tmp_path / "old-log.key"
    shutil.copy2(log_key, old)
    first = _replica(pg_url, flags)
    try:
        first.start()
        with DealerClient(first.target, timeout=20) as client:
            opened = client.open_hand("standard")
            client.close_hand(opened.hand_id)
    finally:
        first.close()
    assert run("rotate-key", "log", "--key-file", str(log_key)).rc == 0
    assert run("serve", "--listen", "127.0.0.1:0", "--db", pg_url, *flags).started
    serve("--db", pg_url, *flags[:2], "--log-key-file", str(old)).refused(f"--log-key-file {old}")


# -- read-only commands never create anything ---------------------------------------------------


READ_ONLY: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("key", ["key", "--data", "{typo}"], ("log.key",)),
    (
        "key_log_key_file",
        ["key", "--log-key-file", "{typo}/log.key", "--log-origin", "x.test/log"],
        ("log.key",),
    ),
    ("token_list", ["token", "list", "--data", "{typo}"], ("fairdeck.db",)),
    (
        "token_create",
        ["token", "create", "--data", "{typo}", "--tenant", "t", "--role", "dealer"],
        ("fairdeck.db",),
    ),
    ("token_revoke", ["token", "revoke", "--data", "{typo}", "0123456789abcdef"], ("fairdeck.db",)),
    ("rotate_seed_key", ["rotate-key", "seed", "--data", "{typo}"], ("seed.key",)),
    ("rotate_log_key", ["rotate-key", "log", "--data", "{typo}"], ("log.key",)),
]


@pytest.mark.parametrize(("case", "argv", "names"), READ_ONLY, ids=[c[0] for c in READ_ONLY])
def test_commands_on_a_missing_data_dir_create_nothing(
    case: str, argv: list[str], names: tuple[str, ...], tmp_path: Path
) -> None:
    typo = tmp_path / "TYPO"
    outcome = run(*[a.format(typo=typo) for a in argv])
    outcome.refused(str(typo), *names)
    assert outcome.out == ""  # no key printed
    assert not typo.exists()


def test_key_with_a_world_readable_key_file_is_one_line(data: Path) -> None:
    """`fairdeck key` on a 0644 log key printed a LogKeyError traceback."""
    (data / "log.key").chmod(0o644)
    line = run("key", "--data", str(data)).refused(str(data / "log.key"), "chmod 600")
    assert "init" not in line  # the key is there: nothing to make


# -- fairdeck init -------------------------------------------------------------------------------


def test_init_makes_a_new_log_that_serves_and_never_replaces_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = run("init", "--data", str(data), "--log-origin", "init.test/log")
    assert made.rc == 0, made.err
    assert made.out.startswith("init.test/log+") and made.out.count("\n") == 1
    assert {p.name for p in data.iterdir()} >= {"fairdeck.db", "log.key", "seed.key"}
    for name in ("log.key", "seed.key"):
        assert (data / name).stat().st_mode & 0o777 == 0o600
    printed = run("key", "--data", str(data))
    assert (printed.rc, printed.out) == (0, made.out)
    before = listing(data)
    run("init", "--data", str(data)).refused(str(data))
    assert listing(data) == before
    assert run("serve", "--listen", "127.0.0.1:0", "--data", str(data)).started


def test_init_keys_only_makes_no_data_dir_and_refuses_existing_keys(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    argv = ["init", "--keys-only", "--data", str(tmp_path / "unused")]
    argv += ["--seed-key-file", str(keys / "seed.key"), "--log-key-file", str(keys / "log.key")]
    assert run(*argv).rc == 0
    assert not (tmp_path / "unused").exists()
    before = listing(keys)
    run(*argv).refused(str(keys))
    assert listing(keys) == before
