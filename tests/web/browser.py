"""Running the verifier page in real headless Chromium, through client/web/test/harness.mjs.

The harness (Node.js and Playwright's playwright-core, installed by ``npm ci`` in client/web from
its lock file) drives Debian's ``chromium``. Where either is missing the browser tests skip,
saying what to install, except under ``CI_REQUIRE_BROWSER=1`` (set by .ci/run), where they fail.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "client" / "web"
PAGE = ROOT / "client" / "fairdeck" / "web" / "verifier.html"
HARNESS = WEB / "test" / "harness.mjs"
VECTORS = ROOT / "docs" / "vectors"


def _missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if shutil.which("node") is None:
        return "Node.js is not installed (the page's build and test harness run on it)"
    if (
        not (WEB / "node_modules" / "playwright-core").is_dir()
        or not (WEB / "node_modules" / "esbuild").is_dir()
    ):
        return "client/web/node_modules is missing: run `npm ci --prefix client/web`"
    if chromium() is None:
        return "Chromium is not installed (Debian: `apt-get install chromium`; or set FAIRDECK_CHROMIUM)"
    return None


def chromium() -> str | None:
    explicit = os.environ.get("FAIRDECK_CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def node_missing() -> str | None:
    """Why the Node.js build cannot run here (it needs no browser), or None."""
    if shutil.which("node") is None:
        return "Node.js is not installed (the page is built with it)"
    if not (WEB / "node_modules" / "esbuild").is_dir():
        return "client/web/node_modules is missing: run `npm ci --prefix client/web`"
    return None


def require(why: str | None) -> None:
    """Skip with the reason, or fail where CI says the browser must be there."""
    if why is None:
        return
    if os.environ.get("CI_REQUIRE_BROWSER") == "1":
        pytest.fail(f"CI_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


def require_browser() -> None:
    require(_missing())


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def run(job: dict[str, Any], tmp: Path, page: Path = PAGE, timeout: float = 240) -> dict[str, Any]:
    """Run one harness job against ``page``; the harness's JSON result."""
    job = {"page": str(page), "chromium": chromium(), **job}
    path = tmp / "job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run(
        ["node", str(HARNESS), str(path)], capture_output=True, text=True, timeout=timeout, cwd=WEB
    )
    assert done.returncode == 0, f"the harness failed:\n{done.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def python_verdict(
    data: bytes,
    tmp: Path,
    key: str | None = None,
    witnesses: tuple[str, ...] = (),
    threshold: int | None = None,
) -> tuple[bool, str | None]:
    """What ``fairdeck verify FILE [--key] [--witness]...`` says of these bytes: (ok, failed step).

    The reference the page is held to: the command itself, run in-process on a real file.
    """
    import contextlib
    import io

    from fairdeck.cli.commands import main

    path = tmp / "input.json"
    path.write_bytes(data)
    argv = ["verify", str(path)]
    if key is not None:
        argv += ["--key", key]
    for w in witnesses:
        argv += ["--witness", w]
    if threshold is not None:
        argv += ["--witness-threshold", str(threshold)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    text = out.getvalue()
    if status == 0:
        assert text.startswith("OK"), text
        return True, None
    assert status == 1 and text.startswith("FAILED at step "), (status, text, err.getvalue())
    return False, text.removeprefix("FAILED at step ").split(":", 1)[0]
