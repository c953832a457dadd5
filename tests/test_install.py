"""The README's install command gives a package a user's type checker can see.

setuptools' default editable install maps our two roots (``client/`` and
``server/``) through an import hook, which mypy cannot follow: a user's
``mypy --strict`` then reports ``fairdeck`` as missing. The README installs in
``editable_mode=strict`` (a static path to a tree of links) instead, and CI
installs with the README's own command, so this test checks what users get.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_SCRIPT = '''\
"""A game server's own code, type-checked strictly against the installed SDK."""

from __future__ import annotations

import fairdeck
from fairdeck.client import AsyncDealerClient, DealerClient, FairdeckError


def deal(target: str) -> list[str]:
    try:
        with DealerClient(target) as dealer:
            opened = dealer.open_hand("standard")
            return [str(card) for card in opened.commitment.hex()]
    except FairdeckError as e:
        return [e.reason]


async def deal_async(target: str) -> str:
    async with AsyncDealerClient(target) as dealer:
        opened = await dealer.open_hand("standard")
        return opened.hand_id


hand = fairdeck.deal_local("standard", "demo-1", [b"seed"])
fairdeck.verify(hand.transcript)
'''


def _sh_blocks_after(heading: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    return re.findall(r"```sh\n(.*?)\n```", section, flags=re.S)


def test_ci_runs_the_readme_test_command() -> None:
    """CI must run the README's test command as written, install mode included."""
    command = _sh_blocks_after("**Run the whole test suite**")[0]
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_ci_installs_both_browsers_and_leaves_the_page_packages_to_the_test_run() -> None:
    """The page is tested in two engines on CI; its npm packages come from the README's own
    command (the test run installs them), so CI shows that a newcomer needs no extra step."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "missing+=(chromium)" in ci and "missing+=(firefox-esr)" in ci
    assert "apt-get install" in ci and "CI_REQUIRE_BROWSER=1" in ci
    assert "npm ci" not in ci.replace("`npm ci`", "")


@pytest.mark.parametrize("heading", ["**Run the dealer**", "**Run the whole test suite**"])
def test_readme_installs_in_a_mode_type_checkers_can_follow(heading: str) -> None:
    command = _sh_blocks_after(heading)[0]
    assert "pip install -q -e " in command
    assert "--config-settings editable_mode=strict" in command


def test_a_user_script_type_checks_against_the_installed_package(tmp_path: Path) -> None:
    """mypy --strict, run from outside the checkout, finds fairdeck and its types."""
    script = tmp_path / "game_server.py"
    script.write_text(textwrap.dedent(USER_SCRIPT), encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--config-file",
            "",
            str(script),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    hint = "install with the README's command"
    assert done.returncode == 0, f"mypy --strict fails on a user script ({hint}):\n{done.stdout}{done.stderr}"
