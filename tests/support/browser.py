"""Running the verifier page in real headless browsers, through client/web/test/harness.mjs.

The harness (Node.js, with Playwright's playwright-core and puppeteer-core from client/web's lock
file) drives Debian's ``chromium`` over CDP and ``firefox-esr`` over WebDriver BiDi. The README's
``pytest`` installs client/web's packages itself (``npm ci``, when node_modules is missing or does
not match the lock file), begun in the background before collection where the run covers the tests
that need it (``HeadStart``). Where Node.js or a browser is missing the browser tests skip, saying in
one line what to install, except under ``CI_REQUIRE_BROWSER=1`` (set by .ci/run), where they fail.
``run`` hands each job to a long-lived ``node harness.mjs --serve`` (one per process, engine and
launch options; started on first use, closed at exit, restarted when it died or missed its deadline),
which keeps its browser open between jobs and gives every job fresh browser contexts of its own. The
server and its browsers end with the process however it ends (drivers.mjs's endWithParent, tied.sh).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "client" / "web"
PAGE = ROOT / "client" / "fairdeck" / "web" / "verifier.html"
HARNESS = WEB / "test" / "harness.mjs"
VECTORS = ROOT / "docs" / "vectors"
ENGINES = ("chromium", "firefox")
"""The browser engines every page test runs in: "any browser" means at least these two."""
HOW_TO_GET = {
    "chromium": "Chromium is not installed: `sudo apt-get install chromium` (Debian/Ubuntu), "
    "or set FAIRDECK_CHROMIUM to a Chrome or Chromium binary",
    "firefox": "Firefox is not installed: `sudo apt-get install firefox-esr` (Debian/Ubuntu), "
    "or set FAIRDECK_FIREFOX to a Firefox binary",
}
_NAMES = {
    "chromium": ("FAIRDECK_CHROMIUM", ("chromium", "chromium-browser", "google-chrome")),
    "firefox": ("FAIRDECK_FIREFOX", ("firefox-esr", "firefox")),
}


def executable(engine: str) -> str | None:
    """The browser binary of ``engine``: $FAIRDECK_CHROMIUM / $FAIRDECK_FIREFOX, else on PATH."""
    variable, names = _NAMES[engine]
    explicit = os.environ.get(variable)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) and os.path.isfile(explicit) else None
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium() -> str | None:
    return executable("chromium")


def stale(prefix: Path) -> str | None:
    """Why ``prefix/node_modules`` does not hold what ``prefix/package-lock.json`` pins, or None.

    npm records what it installed in node_modules/.package-lock.json: every package the lock
    file pins (but optional ones, such as other platforms' esbuild) must be there, at its version.
    """
    installed = prefix / "node_modules" / ".package-lock.json"
    if not installed.is_file():
        return "node_modules is missing"
    want = json.loads((prefix / "package-lock.json").read_text(encoding="utf-8"))["packages"]
    have = json.loads(installed.read_text(encoding="utf-8")).get("packages", {})
    for name, entry in want.items():
        needed = name and not entry.get("optional") and not entry.get("link")
        if needed and have.get(name, {}).get("version") != entry.get("version"):
            return f"{name} {entry.get('version')} is not installed"
    return None


NPM_CI_SECONDS = 240.0
"""How long `npm ci` may take: below pytest's timeout of the test that runs it first (300 s)."""
KEPT = "node_modules.kept"
"""Where node_modules waits while `npm ci` replaces it, and comes back from if npm fails."""
_NETWORK = frozenset(
    {"ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNRESET", "ENETUNREACH", "EHOSTUNREACH"}
)


def npm_failure(stderr: str) -> str:
    """npm's error in one line: its code and first message (npm ends with where its log is)."""
    said = [line.removeprefix("npm error").removeprefix("npm ERR!").strip() for line in stderr.splitlines()]
    code = next((line.removeprefix("code ") for line in said if line.startswith("code ")), "")
    boring = ("code ", "errno ", "syscall ", "A complete log", "Log files", "at ", "{", "}")
    message = next((line for line in said if line and not line.startswith(boring)), "no output")
    hint = "; is the npm registry reachable?" if code in _NETWORK else ""
    return f"{code}: {message}{hint}" if code else message


def _lock_name(prefix: Path) -> str:
    return "fairdeck-npm-ci-" + hashlib.sha256(str(prefix.resolve()).encode()).hexdigest()[:16]


def _lock_file(prefix: Path) -> TextIO:
    return open(Path(tempfile.gettempdir()) / f"{_lock_name(prefix)}.lock", "w")


@functools.cache
def npm_ci(prefix: Path) -> str | None:
    """Install ``prefix``'s packages from its lock file when they are missing or stale (once per
    process); why they cannot be, or None. npm ci deletes node_modules before it fetches: where it
    fails (offline, say), the node_modules that was there is put back as it was. The test processes
    of one run (pytest-xdist's workers) take turns through a file lock: the first installs, the
    others wait and then find the packages fresh, never half deleted. Where the run's controller
    began the install (``head_start``), they wait for it and take its outcome, not trying again."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "Node.js is not installed (https://nodejs.org, or Debian's `nodejs` and `npm`)"
    with _lock_file(prefix) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when this process ends
        said = _head_start_said(prefix)
        return _npm_ci(prefix) if said is None else said or None


HEAD_START = "FAIRDECK_NPM_CI_DONE"
"""Set by a run whose controller began ``npm ci`` itself (``HeadStart``), for all its processes
(pytest-xdist's workers inherit it): the folder where the outcome for each prefix is written, an
empty file for installed, else why not, under the prefix's lock."""


def _head_start_said(prefix: Path) -> str | None:
    """The outcome the run's head start wrote for ``prefix``, or None where it wrote none."""
    folder = os.environ.get(HEAD_START)
    if not folder:
        return None
    try:
        return (Path(folder) / _lock_name(prefix)).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


class HeadStart:
    """Installs ``prefixes`` (in turn, each as ``npm_ci`` would) in a thread of this process, so that
    the install runs while the workers start and collect, rather than in the first test that needs
    it. Each prefix's lock is taken at once where it is free, so no process of this run can begin
    an install of its own; the outcomes go where ``HEAD_START`` says."""

    def __init__(self, prefixes: Sequence[Path]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fairdeck-npm-ci-"))
        os.environ[HEAD_START] = str(self.folder)
        self.stopping = threading.Event()
        self.running: list[subprocess.Popen[str]] = []
        """The ``npm ci`` under way, if any."""
        self.held: list[tuple[Path, TextIO]] = []
        for prefix in prefixes:
            lock = _lock_file(prefix)
            with contextlib.suppress(BlockingIOError):  # another run installs it now: the thread waits
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.held.append((prefix, lock))
        self.thread = threading.Thread(target=self._install, name="npm ci", daemon=True)
        self.thread.start()

    def _install(self) -> None:
        for prefix, lock in self.held:
            with lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # held already, or waited for
                if self.stopping.is_set():
                    continue
                why = _npm_ci(prefix, self.running)
                part = self.folder / f"{_lock_name(prefix)}.part"
                part.write_text(why or "", encoding="utf-8")
                part.rename(self.folder / _lock_name(prefix))

    def stop(self) -> None:
        """At the end of the run: an install still under way (a run that ended early) is stopped,
        and a node_modules that was there put back as it was, before this returns."""
        self.stopping.set()
        while self.thread.is_alive():
            for process in list(self.running):
                process.terminate()
            self.thread.join(0.2)
        if os.environ.get(HEAD_START) == str(self.folder):
            del os.environ[HEAD_START]
        shutil.rmtree(self.folder, ignore_errors=True)


def head_start(prefixes: Sequence[Path]) -> HeadStart | None:
    """A ``HeadStart`` of ``prefixes``, or None where Node.js is missing (each test says so)."""
    if not prefixes or shutil.which("node") is None or shutil.which("npm") is None:
        return None
    return HeadStart(prefixes)


def _npm_ci(prefix: Path, running: list[subprocess.Popen[str]] | None = None) -> str | None:
    """``npm ci`` of ``prefix`` where it is stale; why it failed, or None. The npm process is in
    ``running`` while it runs."""
    running = [] if running is None else running
    if stale(prefix) is None:
        return None
    where = prefix.relative_to(ROOT) if prefix.is_relative_to(ROOT) else prefix
    modules, kept = prefix / "node_modules", prefix / KEPT
    shutil.rmtree(kept, ignore_errors=True)
    if modules.exists():
        modules.rename(kept)
    command = ["npm", "ci", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error"]
    npm = f"`npm ci --prefix {where}`"
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        running.append(process)
        try:
            _, stderr = process.communicate(timeout=NPM_CI_SECONDS)
            why = None if process.returncode == 0 else f"{npm} failed: {npm_failure(stderr)}"
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            why = f"{npm} did not finish in {NPM_CI_SECONDS:g} s; is the npm registry reachable?"
        finally:
            running.remove(process)
    why = why or stale(prefix)
    if why is not None and kept.exists():
        shutil.rmtree(modules, ignore_errors=True)
        kept.rename(modules)
        why += f" ({where}/node_modules is left as it was)"
    shutil.rmtree(kept, ignore_errors=True)
    return why


def node_missing() -> str | None:
    """Why client/web's Node.js tools cannot run here (they need no browser), or None."""
    return npm_ci(WEB)


def _missing(engine: str = "chromium") -> str | None:
    """Why the page cannot be tested in ``engine`` here, or None."""
    if node_missing() is not None:
        return node_missing()
    if executable(engine) is not None:
        return None
    variable = _NAMES[engine][0]
    if os.environ.get(variable):
        return f"{variable}={os.environ[variable]} is not a program to run: name a browser, or unset it"
    return HOW_TO_GET[engine]


SKIPPED: set[str] = set()
"""Why browser tests skipped in this session; tests/web/conftest.py says each once at the end."""


def require(why: str | None) -> None:
    """Skip with the reason, or fail where CI says the browser must be there."""
    if why is None:
        return
    SKIPPED.add(why)
    if os.environ.get("CI_REQUIRE_BROWSER") == "1":
        pytest.fail(f"CI_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


def require_browser(engine: str = "chromium") -> None:
    require(_missing(engine))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class HarnessServer:
    """One ``node harness.mjs --serve``: a JSON job a line in, a JSON answer a line out. Its stderr
    goes to a file, whose end a failure quotes."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close(), with the server)
        self.process = subprocess.Popen(
            ["node", str(HARNESS), "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, cwd=WEB, bufsize=0,
        )  # fmt: skip
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin.fileno(), self.process.stdout.fileno()
        os.set_blocking(self.stdin, False)
        self.buffer = bytearray()

    def said(self) -> str:
        """The end of what the server wrote on stderr."""
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(0, self.stderr.tell() - 4000))
        return self.stderr.read().decode("utf-8", "replace")

    def ask(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The server's answer to ``job``; HarnessGone if it ended or gave none within ``timeout`` s."""
        data = memoryview((json.dumps(job) + "\n").encode())
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdin, selectors.EVENT_WRITE)
            selector.register(self.stdout, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HarnessGone(f"the harness gave no answer in {timeout:g} s")
                for key, _ in selector.select(left):
                    if key.fd == self.stdin:
                        try:
                            data = data[os.write(self.stdin, data) :]
                        except BrokenPipeError:
                            raise HarnessGone(f"the harness ended (exit {self.process.wait()})") from None
                        if not data:
                            selector.unregister(self.stdin)
                        continue
                    chunk = os.read(self.stdout, 1 << 20)
                    if not chunk:
                        raise HarnessGone(f"the harness ended (exit {self.process.wait()})")
                    self.buffer += chunk
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self, wait: float = 10) -> None:
        """Ask the server to end (it closes its browsers), then make sure: SIGTERM, which the drivers
        answer by killing their browsers, and at last SIGKILL."""
        for step in (self._eof, self.process.terminate, self.process.kill):
            if self.process.poll() is not None:
                break
            step()
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        self.stderr.close()

    def _eof(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):  # a pipe already broken
            self.process.stdin.close()


class HarnessGone(Exception):
    """The harness server ended, or missed a job's deadline (and is then killed)."""


OPTIONS = ("color_scheme", "font_size")
"""The job fields a browser is set up with (drivers.mjs)."""
LAUNCH_OPTIONS = {"chromium": (), "firefox": OPTIONS}
"""Those an engine takes at launch only (drivers.mjs's PER_PAGE, the others): Chromium takes both for
each page, so one Chromium (and its server) serves every color scheme and text size."""
LAUNCH_DEFAULTS = {"color_scheme": "light"}
"""What every browser is launched with when a job names nothing (drivers.mjs's DEFAULT_SCHEME): a
job that names it runs in the plain browser."""
SERVERS: OrderedDict[tuple[object, ...], HarnessServer] = OrderedDict()
"""This process's harness servers, by (pid, engine, binary, color scheme, font size), least recently
used first; an option the engine takes for each page is None in the key."""
MAX_SERVERS = 4
"""How many servers (each with its browser) one process keeps. The one that goes is the least
recently used of those launched with options (a Firefox in dark mode, say: a test or two use each),
so that an engine's plain browser, which most tests share, is launched once a process."""


def _evict() -> None:
    """Close the least recently used server with launch options, or else the least recently used."""
    special = [key for key in SERVERS if any(option is not None for option in key[-len(OPTIONS) :])]
    SERVERS.pop(special[0] if special else next(iter(SERVERS))).close()


def _server(key: tuple[object, ...]) -> HarnessServer:
    server = SERVERS.get(key)
    if server is not None and server.process.poll() is None:
        SERVERS.move_to_end(key)
        return server
    if server is not None:
        SERVERS.pop(key).close()
    while len(SERVERS) >= MAX_SERVERS:
        _evict()
    SERVERS[key] = HarnessServer()
    return SERVERS[key]


@atexit.register
def close_servers() -> None:
    """Close this process's harness servers (and their browsers)."""
    while SERVERS:
        key, server = SERVERS.popitem()
        if key[0] == os.getpid():
            server.close()


def run(
    job: dict[str, Any], tmp: Path, page: Path = PAGE, timeout: float = 240, engine: str = "chromium"
) -> dict[str, Any]:
    """Run one harness job against ``page`` in ``engine``; the harness's JSON result. The job is
    written to ``tmp/job.json`` as well, for ``node client/web/test/harness.mjs tmp/job.json``."""
    job = {"page": str(page), "engine": engine, "browser": executable(engine), **job}
    path = tmp / "job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    at_launch = LAUNCH_OPTIONS.get(engine, ("color_scheme", "font_size"))
    launched = [job.get(o) if o in at_launch and job.get(o) != LAUNCH_DEFAULTS.get(o) else None
                for o in OPTIONS]  # fmt: skip
    key = (os.getpid(), engine, job["browser"], *launched)
    server = _server(key)
    try:
        answer = server.ask(job, timeout)
    except BaseException as e:
        # Ended, late, or interrupted (pytest-timeout, Ctrl-C): its answer, if one still comes, must
        # not pass for the next job's.
        SERVERS.pop(key, None)
        said = server.said()
        server.close(wait=2)
        if not isinstance(e, HarnessGone):
            raise
        raise AssertionError(
            f"{e}; it is killed, and the next job starts a new one ({path}):\n{said}"
        ) from None
    if not answer["ok"]:
        restarted = " (its browser died: the next job launches a new one)" if answer["restarted"] else ""
        raise AssertionError(f"the harness failed{restarted} ({path}):\n{answer['error'][-4000:]}")
    result: dict[str, Any] = answer["result"]
    return result


def run_once(
    job: dict[str, Any], tmp: Path, page: Path = PAGE, timeout: float = 240, engine: str = "chromium"
) -> dict[str, Any]:
    """As ``run``, in the harness's one-shot mode: a node process and a browser for this job alone."""
    job = {"page": str(page), "engine": engine, "browser": executable(engine), **job}
    path = tmp / "job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run(
        ["node", str(HARNESS), str(path)], capture_output=True, text=True, timeout=timeout, cwd=WEB
    )
    assert done.returncode == 0, f"the harness failed:\n{done.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


PATHS = ("page", "file", "policy_file", "control")
"""The job fields that name a file: a job's content is theirs, not where they lie."""


def _content(value: object, field: str = "") -> object:
    """``value`` with every file it names replaced by the SHA-256 of the file's bytes."""
    if isinstance(value, dict):
        return {k: _content(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_content(v) for v in value]
    if field in PATHS and isinstance(value, str):
        return hashlib.sha256(Path(value).read_bytes()).hexdigest()
    return value


def run_shared(
    job: dict[str, Any],
    factory: pytest.TempPathFactory,
    page: Path = PAGE,
    timeout: float = 240,
    engine: str = "chromium",
) -> dict[str, Any]:
    """As ``run``, once a test session for each job content (its fields, the bytes of the files it
    names, the engine and its binary): for a module fixture, which pytest-xdist would build on every
    worker that gets one of the module's tests. The first process to ask runs the job and writes its
    result under the session's shared temporary folder; the others wait on the same file lock, then
    read it. A job that failed wrote nothing: the next process to ask runs it again, and fails alike."""
    whole = {"page": str(page), "engine": engine, "browser": executable(engine), **job}
    key = hashlib.sha256(json.dumps(_content(whole), sort_keys=True).encode()).hexdigest()[:32]
    base = factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "page-runs"
    shared.mkdir(exist_ok=True)
    done = shared / f"{key}.json"
    with open(shared / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if done.is_file():
            cached: dict[str, Any] = json.loads(done.read_text(encoding="utf-8"))
            return cached
        result = run(job, factory.mktemp(f"page-run-{engine}"), page=page, timeout=timeout, engine=engine)
        part = shared / f"{key}.part"
        part.write_text(json.dumps(result), encoding="utf-8")
        part.rename(done)
    return result


@functools.cache
def _verify_parser() -> argparse.ArgumentParser:
    """The parser ``fairdeck verify`` runs under: main's own, as main builds it for the client's
    commands (without the server's)."""
    from fairdeck.cli.dispatch import COMMANDS, build_parser

    assert "verify" in {command.name for command in COMMANDS}  # the client's own, not the server's
    return build_parser(server=False)


def python_line(
    data: bytes,
    tmp: Path,
    key: str | Sequence[str] | None = None,
    witnesses: tuple[str, ...] = (),
    threshold: int | None = None,
    policy: str | None = None,
) -> str:
    """The line ``fairdeck verify FILE [--key]... [--witness]... [--policy]`` prints for these bytes
    ("OK: ..." or "FAILED at step ...: ..."): the command itself, run in-process on a real file,
    through the command line ``fairdeck``'s main builds (built once: building it took two thirds of
    a call). ``key``: one ``--key`` value (a key, or ``@FILE``), or a list of them, each its own
    ``--key``; ``policy``: the path of a tlog-policy file."""
    import contextlib
    import io

    path = tmp / "input.json"
    # A new file each time: ext4 writes a truncated file's old blocks out first, a wait per case.
    path.unlink(missing_ok=True)
    path.write_bytes(data)
    argv = ["verify", str(path)]
    for k in [key] if isinstance(key, str) else key or ():
        argv += ["--key", k]
    for w in witnesses:
        argv += ["--witness", w]
    if threshold is not None:
        argv += ["--witness-threshold", str(threshold)]
    if policy is not None:
        argv += ["--policy", policy]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        args = _verify_parser().parse_args(argv)
        args.argv = argv
        status = args.handler(args)
    lines = out.getvalue().splitlines(keepends=True)
    assert lines, (status, err.getvalue())
    text, *more = lines
    # After an OK, a second line may say which key rotation statements led to the key that signed.
    assert all(line.startswith("  signed by ") for line in more) and len(more) <= 1, (status, more)
    assert (status, text.startswith("OK: ")) in {(0, True), (1, False)}, (status, text, err.getvalue())
    assert status == 0 or text.startswith("FAILED at step "), text
    return text.removesuffix("\n")


def python_verdict(
    data: bytes,
    tmp: Path,
    key: str | Sequence[str] | None = None,
    witnesses: tuple[str, ...] = (),
    threshold: int | None = None,
) -> tuple[bool, str | None]:
    """What ``fairdeck verify`` says of these bytes: (ok, failed step). The page is held to it."""
    line = python_line(data, tmp, key, witnesses, threshold)
    if line.startswith("OK: "):
        return True, None
    return False, line.removeprefix("FAILED at step ").split(":", 1)[0]
