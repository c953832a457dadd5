"""Directories the dealer did not make are hostile: a tiles directory with a flipped bit in a full
tile (served on before: at start the dealer only checked that full tiles exist), a tile or the
data dir's lock file planted as a link to a file outside. The dealer refuses to start in one line
naming the file and the fix, and writes nothing outside its directories."""

from __future__ import annotations

from pathlib import Path

from fairdeck.client import DealerClient
from tests.support.faults import FaultRun


def deal_closed(target: str, count: int) -> None:
    """``count`` closed hands (two entries each) in one call: not in the ledger, in the log."""
    with DealerClient(target, timeout=30) as c:
        assert len(list(c.deal_hands("short", count, close=True))) == count


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    return lines[-1]


def tiled(run: FaultRun, hands: int = 200) -> Path:
    """A stopped dealer whose log has full tiles (more than 256 entries) in ``run.tmp/tiles``."""
    tiles = run.tmp / "tiles"
    dealer = run.start("--tiles", str(tiles))
    deal_closed(dealer.target, hands)
    run.ledger.deal(dealer.target, 1)  # and a checkpoint that covers them
    dealer.terminate()
    assert (tiles / "tile/0/000").stat().st_size == 256 * 32
    return tiles


def test_a_flipped_bit_in_a_full_tile_refuses_start_naming_it(run: FaultRun) -> None:
    tiles = tiled(run)
    tile = tiles / "tile/0/000"
    data = bytearray(tile.read_bytes())
    data[100] ^= 1
    tile.write_bytes(bytes(data))
    last = one_line(run.start_refused("--tiles", str(tiles)))
    assert last.startswith(f"fairdeck serve: --tiles {tiles}: ") and "tile/0/000" in last, last
    assert "remove" in last and "start again" in last, last
    tile.unlink()  # the fix the line gives: the dealer writes it again from its database
    dealer = run.start("--tiles", str(tiles))
    run.ledger.deal(dealer.target, 1)
    dealer.terminate()
    data[100] ^= 1
    assert tile.read_bytes() == bytes(data)


def test_a_full_tile_planted_as_a_link_outside_refuses_start_and_the_target_is_untouched(
    run: FaultRun,
) -> None:
    tiles = tiled(run)
    victim = run.tmp / "victim"
    victim.write_bytes((tiles / "tile/0/000").read_bytes())
    (tiles / "tile/0/000").unlink()
    (tiles / "tile/0/000").symlink_to(victim)
    before = victim.read_bytes()
    last = one_line(run.start_refused("--tiles", str(tiles)))
    assert "tile/0/000 is a symbolic link" in last, last
    assert victim.read_bytes() == before


def test_a_lock_file_planted_as_a_link_is_refused_and_its_target_untouched(run: FaultRun) -> None:
    run.start().terminate()
    victim = run.tmp / "victim"
    victim.write_text("not the dealer's\n")
    (run.data_dir / "fairdeck.lock").unlink()
    (run.data_dir / "fairdeck.lock").symlink_to(victim)
    last = one_line(run.start_refused())
    assert "fairdeck.lock is a symbolic link" in last and "remove it" in last, last
    assert victim.read_text() == "not the dealer's\n"
