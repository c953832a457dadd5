"""A throwaway PostgreSQL cluster for the tests and the replica benchmark.

``PgCluster`` runs ``initdb`` and ``pg_ctl`` in a fresh temp dir: trust
authentication, listening on 127.0.0.1 on a free port and on a unix socket
in that dir, nothing else. When this process runs as root (initdb refuses
root), the binaries run as the ``postgres`` user through ``runuser`` and the
temp dir is handed to that user. ``stop`` shuts the server down and deletes
the dir.

The tests' cluster runs with ``fsync=off``: PostgreSQL still writes its WAL and
still makes COMMIT wait for it (synchronous_commit stays on), it just does not
ask the disk to flush, so a test never waits on the disk. No test crashes the
PostgreSQL server itself; the durability tests kill dealer processes, and a
committed transaction survives those whatever fsync says. The benchmark
starts its cluster with ``fsync=True`` to measure the real cost of durability.

Used by tests/support/fixtures.py (fixtures ``pg_cluster``, ``pg_url``) and by
bench/replica_bench.py.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

BINARIES = ("initdb", "pg_ctl")


class PgUnavailable(RuntimeError):
    """The PostgreSQL server binaries (or a user to run them as) are not installed."""


def find_bindir() -> Path:
    """The directory holding initdb and pg_ctl: PATH first, then /usr/lib/postgresql/*/bin (newest)."""
    found = [shutil.which(name) for name in BINARIES]
    if all(found):
        return Path(os.path.realpath(str(found[1]))).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    for candidate in candidates:
        if all((Path(candidate) / name).exists() for name in BINARIES):
            return Path(candidate)
    raise PgUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found: not on PATH nor in /usr/lib/postgresql/*/bin"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PgCluster:
    """One PostgreSQL server in a temp dir, for one test session or one benchmark run."""

    def __init__(
        self, *, fsync: bool = False, max_connections: int = 200, settings: dict[str, str] | None = None
    ) -> None:
        self.fsync = fsync
        self.max_connections = max_connections
        self.settings = settings or {}
        self.bindir = find_bindir()
        self.run_as: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                raise PgUnavailable(
                    "running as root, and there is no 'postgres' user to run initdb as"
                ) from None
            if shutil.which("runuser") is None:
                raise PgUnavailable("running as root, and runuser is not installed")
            self.run_as = "postgres"
        self.dir: Path | None = None
        self.port = 0
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fairdeck-pg-"))
        if self.run_as is not None:
            user = pwd.getpwnam(self.run_as)
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        data = self.dir / "data"
        self._run(
            "initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--locale=C", "--no-sync", "--no-instructions",
        )  # fmt: skip
        self.port = _free_port()
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.dir),
            "max_connections": str(self.max_connections),
            "fsync": "on" if self.fsync else "off",
            "full_page_writes": "on" if self.fsync else "off",
            "shared_buffers": "128MB",
            "log_min_messages": "warning",
            **self.settings,
        }
        options = " ".join(f"-c {k}={v}" for k, v in settings.items())
        try:
            self._run("pg_ctl", "-D", str(data), "-l", str(self.dir / "server.log"), "-w", "-t", "60",
                      "-o", options, "start")  # fmt: skip
        except RuntimeError:
            self._cleanup()
            raise
        self._started = True
        atexit.register(self.stop)  # an interrupted session does not leave a server running

    def stop(self) -> None:
        atexit.unregister(self.stop)
        if self._started and self.dir is not None:
            self._started = False
            with contextlib.suppress(RuntimeError):
                self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")
        self._cleanup()

    def __enter__(self) -> PgCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- databases ----------------------------------------------------------------------------

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its URL."""
        import psycopg
        from psycopg import sql

        name = name or f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def server_log(self) -> str:
        if self.dir is None or not (self.dir / "server.log").exists():
            return ""
        return (self.dir / "server.log").read_text(errors="replace")

    # -- helpers ------------------------------------------------------------------------------

    def _run(self, binary: str, *args: str) -> None:
        argv = [str(self.bindir / binary), *args]
        if self.run_as is not None:
            argv = ["runuser", "-u", self.run_as, "--", *argv]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, cwd=self.dir, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if done.returncode != 0:
            detail = f"{done.stderr.strip()[-2000:]}\n{self.server_log()[-2000:]}"
            raise RuntimeError(f"{binary} failed (rc {done.returncode}): {detail}")

    def _cleanup(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
