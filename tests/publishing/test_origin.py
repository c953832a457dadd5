"""The log's origin and its tiles' URL (tlog-tiles: "The origin line SHOULD be the scheme-less URL
prefix of the log with no trailing slashes"): ``fairdeck init`` guides an operator to it, refuses
a URL with a scheme or a trailing slash, and ``serve --tiles`` warns about a random one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.forked_serve import ServeForker


def init(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "init", "--data", str(data), *args],
        capture_output=True, text=True, env=clean_env(), timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("origin", "fix"),
    [
        ("https://example.com/fairdeck/log", "example.com/fairdeck/log"),
        ("example.com/log/", "example.com/log"),
    ],
)
def test_a_url_is_refused_naming_the_origin_to_use(tmp_path: Path, origin: str, fix: str) -> None:
    done = init(tmp_path / "data", "--log-origin", origin)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.rstrip().endswith(fix), done.stderr
    assert not (tmp_path / "data").exists()  # nothing made


def test_init_without_an_origin_says_how_to_name_the_log(tmp_path: Path) -> None:
    done = init(tmp_path / "data")
    assert done.returncode == 0
    assert "--log-origin example.com/fairdeck/log" in done.stderr
    assert done.stdout.startswith("fairdeck.log/")


def test_serve_tiles_warns_about_a_random_origin(tmp_path: Path, serve_forker: ServeForker) -> None:
    assert init(tmp_path / "data").returncode == 0
    with DealerProcess(
        tmp_path / "data", tmp_path / "serve.log", "--tiles", str(tmp_path / "tiles"), forker=serve_forker
    ):
        pass
    assert "is a random name; tlog-tiles asks for the URL prefix" in (tmp_path / "serve.log").read_text()
    assert init(tmp_path / "named", "--log-origin", "example.com/fairdeck/log").returncode == 0
    with DealerProcess(
        tmp_path / "named", tmp_path / "named.log", "--tiles", str(tmp_path / "t2"), forker=serve_forker
    ):
        pass
    assert "random name" not in (tmp_path / "named.log").read_text()
