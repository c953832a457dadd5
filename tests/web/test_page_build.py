"""The verifier page as shipped: built from client/web by its locked tools (a rebuild must give the
committed bytes, as the generated gRPC code is checked), network shut off by its own policy, and
written by `fairdeck verifier-page` from the installed package."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import browser

PAGE = browser.PAGE
WEB = browser.WEB
CLI = [sys.executable, "-m", "fairdeck.cli"]


def test_the_committed_page_is_what_the_sources_build(tmp_path: Path) -> None:
    browser.require(browser.node_missing())
    fresh = tmp_path / "verifier.html"
    done = subprocess.run(
        ["node", "build.mjs", "--out", str(fresh)], cwd=WEB, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert fresh.read_bytes() == PAGE.read_bytes(), (
        "client/fairdeck/web/verifier.html is stale: run `npm run build --prefix client/web` and commit it"
    )
    check = subprocess.run(
        ["node", "build.mjs", "--check"], cwd=WEB, capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stderr


def test_the_build_is_the_same_from_any_directory(tmp_path: Path) -> None:
    """esbuild named each bundled module by its path from the working directory: built from the
    repository's root, the page held `../work/.../node_modules/...` comments (the builder's own
    directories), and `node client/web/build.mjs --check` called a fresh page stale."""
    browser.require(browser.node_missing())
    for where in (browser.ROOT, tmp_path):
        command = ["node", str(WEB / "build.mjs"), "--check"]
        check = subprocess.run(command, cwd=where, capture_output=True, text=True, timeout=120)
        assert check.returncode == 0, (where, check.stderr)


def test_the_staleness_check_catches_a_changed_source(tmp_path: Path) -> None:
    """The check itself can fail: a copy of client/web with one source line changed builds other bytes."""
    browser.require(browser.node_missing())
    copy = tmp_path / "web"
    shutil.copytree(WEB / "src", copy / "src")  # with its folders (src/codeal/)
    for name in ("build.mjs", "package.json", "package-lock.json"):
        (copy / name).write_bytes((WEB / name).read_bytes())
    (copy / "node_modules").symlink_to(WEB / "node_modules")
    spec = copy / "src" / "spec.js"
    spec.write_text(
        spec.read_text().replace(
            'export const VERSION = "fairdeck-v1";', 'export const VERSION = "fairdeck-v1"; // changed'
        )
    )
    out = tmp_path / "page.html"
    done = subprocess.run(
        ["node", "build.mjs", "--out", str(out)], cwd=copy, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() != PAGE.read_bytes()


def test_the_page_forbids_every_request_by_its_own_policy() -> None:
    html = PAGE.read_text(encoding="utf-8")
    policies = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', html)
    assert len(policies) == 1
    directives = {d.split()[0]: d.split()[1:] for d in policies[0].split(";") if d.strip()}
    assert directives["default-src"] == ["'none'"]
    # Only inline script and style (the page is one file); nothing may name a source to load from.
    assert directives["script-src"] == ["'unsafe-inline'"] and directives["style-src"] == ["'unsafe-inline'"]
    assert not {"connect-src", "frame-src", "worker-src", "font-src"} & set(directives)
    assert "<script src" not in html and "<link" not in html


def test_the_lock_file_pins_what_package_json_asks_for() -> None:
    package = json.loads((WEB / "package.json").read_text())
    lock = json.loads((WEB / "package-lock.json").read_text())
    for name, version in {**package["dependencies"], **package["devDependencies"]}.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} is not pinned exactly"
        locked = lock["packages"][f"node_modules/{name}"]
        assert locked["version"] == version and locked["integrity"].startswith("sha512-")


def test_verifier_page_writes_the_packaged_page(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "verifier-page", "--out", str(tmp_path / "site")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    written = tmp_path / "site" / "fairdeck-verifier.html"
    assert written.read_bytes() == PAGE.read_bytes()
    assert "sha256" in done.stdout


def test_verifier_page_pins_a_key_and_refuses_a_bad_one(tmp_path: Path) -> None:
    from fairdeck.log.note import Signer

    vkey = Signer.from_seed("log.example/fairdeck", bytes(32)).verifier.to_string()
    done = subprocess.run(
        [*CLI, "verifier-page", "--out", str(tmp_path), "--key", vkey],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "fairdeck-verifier.html").read_text(encoding="utf-8")
    assert f'<meta name="fairdeck-log-key" content="{vkey}">' in html
    bad = subprocess.run(
        [*CLI, "verifier-page", "--out", str(tmp_path / "x"), "--key", "not-a-key"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        bad.returncode == 2
        and bad.stderr.count("\n") == 1
        and "--key" in bad.stderr
        and "Traceback" not in bad.stderr
    )
    assert not (tmp_path / "x").exists()


def test_the_wheel_ships_the_page(tmp_path: Path) -> None:
    """A Python-only user gets the page with `pip install`: it is package data of the wheel."""
    import zipfile

    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", str(browser.ROOT), "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("fairdeck-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert z.read("fairdeck/web/verifier.html") == PAGE.read_bytes()


def test_a_mistyped_build_argument_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """`node build.mjs --chek` (a typo of --check) rebuilt and wrote over the committed page, and
    `--out` without a file ended in a TypeError stack trace."""
    browser.require(browser.node_missing())
    before = PAGE.stat().st_mtime_ns
    for args in (["--chek"], ["--out"], ["--check", "--out", str(tmp_path / "x.html")], ["x"]):
        done = subprocess.run(
            ["node", "build.mjs", *args], cwd=WEB, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args, done.stderr)
        assert "--check, or --out FILE" in done.stderr and "at " not in done.stderr, done.stderr
    assert PAGE.stat().st_mtime_ns == before and not (tmp_path / "x.html").exists()
