"""``serve --tiles`` killed at each step of publishing a checkpoint (as kill -9 would, at an exact
point: tests/support/crashpoint/sitecustomize.py), then restarted: before it serves again, every
checkpoint in storage has its tiles, the checkpoint file's tree is whole, and nothing of a killed
write is left where a reader could take it for a tile."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck_server.cli.audit_sources import data_log
from tests.support.dealers import DealerProcess
from tests.support.tilecheck import checkpoint_of, missing, prove_from_tiles

CRASHPOINT = Path(__file__).resolve().parents[1] / "support" / "crashpoint"
STEPS = {
    # a tile half written: its temporary file is there, the tile is not
    "tile-linked": "os:link:40",
    # tiles linked into place, their directories not yet synced
    "tiles-synced": "fairdeck.log.tile_writer:TileDir.sync:6",
    # the tiles written, the checkpoint not yet stored
    "checkpoint-stored": "fairdeck_server.storage.sqlite.engine:SqliteStorage.put_checkpoint:6",
    # the checkpoint stored, the checkpoint file not yet written
    "file-shown": "fairdeck_server.publishing.tile_publishing:LiveTiles.show:6",
    # the new checkpoint file written to its temporary name, not yet renamed into place
    "file-renamed": "os:replace:6",
}


def deal_until_gone(target: str) -> int:
    """Deal until the dealer dies; how many hands were dealt."""
    dealt = 0
    try:
        with DealerClient(target, timeout=5, retries=0) as dealer:
            while True:
                dealer.close_hand(dealer.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id)
                dealt += 1
    except Exception:
        return dealt


def check(tiles: Path, data: Path) -> None:
    _, notes, _ = data_log(str(data))
    for note in notes:
        size = checkpoint_of(note).size
        assert missing(tiles, size) == [], f"checkpoint {size} is stored without its tiles"
    shown = (tiles / "checkpoint").read_bytes()
    assert checkpoint_of(shown).size == checkpoint_of(notes[-1]).size
    prove_from_tiles(lambda rel: (tiles / rel).read_bytes(), shown, samples=10)


@pytest.mark.parametrize("step", sorted(STEPS))
def test_killed_at_each_step_it_completes_the_tiles_before_it_serves(tmp_path: Path, step: str) -> None:
    data, tiles = tmp_path / "data", tmp_path / "tiles"
    flags = ("--tiles", str(tiles), "--checkpoint-interval", "0.05", "--rate-limit", "0")
    crashing = DealerProcess(
        data,
        tmp_path / "crash.log",
        *flags,
        env={"PYTHONPATH": str(CRASHPOINT), "FAIRDECK_TEST_CRASH": STEPS[step]},
    )
    dealt = deal_until_gone(crashing.target)
    crashing.proc.wait(timeout=30)
    assert crashing.proc.returncode == 137, f"not killed at {step}: {crashing.stderr()}"
    assert dealt > 0
    with DealerProcess(data, tmp_path / "again.log", *flags) as again:
        check(tiles, data)  # before a single call: the start completed it
        with DealerClient(again.target) as dealer:
            for _ in range(20):
                dealer.close_hand(dealer.deal_new_hand("standard", client_seeds=["y"]).hand.hand_id)
    check(tiles, data)
    temporary = [p for p in tiles.rglob(".*") if p.is_file()]
    # A kill can leave a temporary file only where the tree was being written; the restart
    # removes those at the tree's edge, and the web server never serves a dot file anyway.
    assert not temporary, temporary
