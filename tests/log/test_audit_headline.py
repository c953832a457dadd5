"""``fairdeck audit --tiles`` on tiles it cannot read to the end: the headline is the cause, not
"0 entries ... the empty log" with the cause lines below it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from tests.support.dealers import RunningDealer


def fairdeck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def tiles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Tiles of a log of 300 entries (one full tile and a partial one), and its vkey."""
    data = tmp_path_factory.mktemp("headline") / "data"
    with RunningDealer(data, rate_limit=0) as dealer, DealerClient(dealer.target, timeout=30) as client:
        for _ in client.deal_hands("short", 150, close=True):
            pass
    out = data.parent / "tiles"
    done = fairdeck("tiles", "--data", str(data), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, fairdeck("key", "--data", str(data)).stdout.strip()


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "cause"),
    [
        (
            lambda log: _flip(log / "tile" / "0" / "000"),
            "entry 3 in tile/entries/000 does not hash to its leaf",
        ),
        (
            lambda log: (log / "tile" / "entries" / "000").write_bytes(b""),
            "tile/entries/000: entry bundle ends",
        ),
        (lambda log: (log / "tile" / "0" / "000").unlink(), "tile/0/000"),
    ],
    ids=["flipped bit", "emptied bundle", "missing tile"],
)
def test_a_damaged_tile_is_the_headline_not_an_empty_log(
    damage: object, cause: str, tiles: tuple[Path, str], tmp_path: Path
) -> None:
    copy = tmp_path / "log"
    shutil.copytree(tiles[0], copy)
    damage(copy)  # type: ignore[operator]
    done = fairdeck("audit", "--tiles", str(copy), "--key", tiles[1])
    assert done.returncode == 1, done.stdout + done.stderr
    headline = done.stdout.splitlines()[0]
    assert headline.startswith("audit FAILED: could not read the whole log: "), done.stdout
    assert cause in headline, done.stdout
    assert "the empty log" not in done.stdout
    assert "Traceback" not in done.stderr
