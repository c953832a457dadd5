"""``serve --tiles DIR`` in a real dealer: the tiles of every checkpoint are on disk before the
checkpoint is stored (so before anything can hand it out), the checkpoint file comes last, a
restart completes what is missing, and a directory that cannot be this log's is refused."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from fairdeck.client import AuditClient, DealerClient
from fairdeck.log.tiles import TileLog
from fairdeck.v1 import audit_pb2, audit_pb2_grpc
from fairdeck_server.cli.audit_sources import data_log
from fairdeck_server.refusals import StartupRefused
from tests.support.dealers import RunningDealer
from tests.support.tilecheck import checkpoint_of, missing, prove_from_tiles
from tests.support.waits import outlast, wait_for

Start = Callable[..., RunningDealer]


def deal(target: str, hands: int) -> list[str]:
    with DealerClient(target) as dealer:
        ids = [dealer.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id for _ in range(hands)]
        for hand_id in ids:
            dealer.close_hand(hand_id)
    return ids


def latest_note(target: str) -> bytes:
    with grpc.insecure_channel(target) as channel:
        answer = audit_pb2_grpc.AuditServiceStub(channel).GetCheckpoint(audit_pb2.GetCheckpointRequest())
    return bytes(answer.signed_checkpoint)


def stored_sizes(data: Path) -> list[int]:
    _, notes, _ = data_log(str(data))
    return [checkpoint_of(note).size for note in notes]


def read(root: Path) -> Callable[[str], bytes]:
    return lambda rel: (root / rel).read_bytes()


def test_every_checkpoint_has_its_tiles_before_it_is_stored(tmp_path: Path, dealer_factory: Start) -> None:
    tiles = tmp_path / "tiles"
    dealer = dealer_factory(tiles=tiles, checkpoint_interval=0.02, rate_limit=0)
    assert dealer.server is not None
    engine: Any = dealer.server.storage
    put = engine.put_checkpoint
    seen: list[int] = []

    async def checked_put(size: int, root: bytes, note: bytes, time_ms: int) -> Any:
        assert missing(tiles, size) == [], f"checkpoint {size} stored before its tiles"
        assert TileLog(read(tiles), size).root() == root
        seen.append(size)
        return await put(size, root, note, time_ms)

    engine.put_checkpoint = checked_put
    ids = deal(dealer.target, 150)  # 300 entries, across a tile boundary
    with AuditClient(dealer.target, verifier=dealer.server.publisher.signer.verifier) as audit:
        for hand_id in ids[::15]:  # hand proofs hand out checkpoints too
            proof = audit.inclusion_proof(hand_id=hand_id, reveal=True)
            assert missing(tiles, proof.tree_size) == []
            prove_from_tiles(read(tiles), proof.signed_checkpoint)
    note = latest_note(dealer.target)
    prove_from_tiles(read(tiles), note)
    dealer.stop()
    assert len(seen) > 3 and seen == sorted(seen)
    # The checkpoint file is the last one signed, and every stored size kept its partial tiles.
    assert checkpoint_of((tiles / "checkpoint").read_bytes()).size == max(stored_sizes(tmp_path / "data"))
    for size in stored_sizes(tmp_path / "data"):
        assert missing(tiles, size) == [], size
    assert not [p for p in tiles.rglob(".*") if p.is_file()], "temporary files left behind"


def test_a_restart_completes_what_is_missing_before_it_serves(tmp_path: Path, dealer_factory: Start) -> None:
    tiles = tmp_path / "tiles"
    dealer = dealer_factory(tiles=tiles, checkpoint_interval=0.05, rate_limit=0)
    deal(dealer.target, 200)
    dealer.stop()
    sizes = stored_sizes(tmp_path / "data")
    # Lost: the checkpoint file, a full tile and bundle, and the partial tiles of two signed sizes.
    (tiles / "checkpoint").unlink()
    (tiles / "tile/0/000").unlink()
    (tiles / "tile/entries/000").unlink()
    for size in sizes[-2:]:
        for rel in [p for p in [f"tile/0/{size // 256:03d}.p/{size % 256}"] if size % 256]:
            (tiles / rel).unlink(missing_ok=True)
    dealer.start()
    for size in sizes:
        assert missing(tiles, size) == [], size
    note = (tiles / "checkpoint").read_bytes()
    assert checkpoint_of(note).size == sizes[-1]
    prove_from_tiles(read(tiles), note, samples=20)


def test_tiles_of_an_existing_log_get_every_signed_size(tmp_path: Path, dealer_factory: Start) -> None:
    """A dealer that ran without --tiles, started with it: the tiles are written before it serves,
    with the partial tiles of every checkpoint it signed before (tlog-tiles: "Logs MUST serve
    partial tiles corresponding to tree sizes for which a checkpoint was produced")."""
    dealer = dealer_factory(checkpoint_interval=0.05, rate_limit=0)
    deal(dealer.target, 120)
    dealer.stop()
    sizes = stored_sizes(tmp_path / "data")
    assert len(sizes) > 2
    tiles = tmp_path / "tiles"
    dealer = dealer_factory(tiles=tiles, rate_limit=0)
    for size in sizes:
        assert missing(tiles, size) == [], size
    prove_from_tiles(read(tiles), latest_note(dealer.target), samples=20)


def test_another_logs_directory_is_refused(tmp_path: Path, dealer_factory: Start) -> None:
    other = dealer_factory(tmp_path / "other", tiles=tmp_path / "tiles", rate_limit=0)
    deal(other.target, 2)
    other.stop()
    before = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "tiles").rglob("*"))
    with pytest.raises(StartupRefused, match=r"^--tiles .*tiles: .* is not a checkpoint of .*another log"):
        dealer_factory(tiles=tmp_path / "tiles")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "tiles").rglob("*")) == before


def test_a_database_behind_its_published_tiles_is_refused(tmp_path: Path, dealer_factory: Start) -> None:
    """A database restored from a backup older than the tiles published: going on would sign a
    second tree for sizes the public already holds, so the dealer refuses to start."""
    tiles = tmp_path / "tiles"
    dealer = dealer_factory(tiles=tiles, rate_limit=0)
    deal(dealer.target, 3)
    dealer.stop()
    shutil.copytree(tmp_path / "data", tmp_path / "backup", ignore=shutil.ignore_patterns("fairdeck.lock"))
    dealer.start()
    deal(dealer.target, 3)
    dealer.stop()
    shutil.rmtree(tmp_path / "data")
    shutil.copytree(tmp_path / "backup", tmp_path / "data")
    with pytest.raises(StartupRefused, match=r"database is behind what was published .* would fork"):
        dealer_factory(tiles=tiles)


def test_a_publisher_without_tiles_signs_with_no_prepare(tmp_path: Path) -> None:
    """Benchmarks and tools build a CheckpointPublisher by hand and never call prepare(): without
    tiles or a lease it must sign at once (a version that waited for prepare() hung them)."""
    import asyncio

    from fairdeck_server.publishing.log_signing import CheckpointPublisher, load_or_create_signer
    from fairdeck_server.storage.sqlite import SqliteStorage

    async def run() -> int:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        try:
            publisher = CheckpointPublisher(storage, load_or_create_signer(tmp_path / "log.key", "t.test/p"))
            await storage.create_hands([])
            head = await asyncio.wait_for(publisher.publish(), 5)
            return 0 if head is None else head.size
        finally:
            await storage.close()

    assert asyncio.run(run()) == 0


def test_a_full_disk_stops_signing_not_dealing_and_heals(
    tmp_path: Path, dealer_factory: Start, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """While the tiles cannot be written (ENOSPC), no checkpoint is signed, so none is handed out
    without its tiles; dealing goes on; the cause is logged once; no half-written file is left;
    once the disk has room, checkpoints resume with their tiles."""
    import errno

    import fairdeck.log.safefiles as safefiles

    tiles = tmp_path / "tiles"
    dealer = dealer_factory(tiles=tiles, checkpoint_interval=0.02, rate_limit=0)
    deal(dealer.target, 5)
    full = [True]
    real = safefiles._write_all

    def write(fd: int, data: bytes) -> None:
        if full[0]:
            os.write(fd, data[: len(data) // 2])  # part of it reached the disk
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    wait_for(  # the five hands are signed
        "a checkpoint of the first hands", lambda: max(stored_sizes(tmp_path / "data"), default=0) >= 10, 30
    )
    monkeypatch.setattr(safefiles, "_write_all", write)
    outlast(0.2)  # ten checkpoint intervals: one being written as the disk filled completes first
    before = max(stored_sizes(tmp_path / "data"))
    with caplog.at_level("ERROR"):
        deal(dealer.target, 20)  # dealing goes on
        outlast(0.5)  # some 25 checkpoint intervals
    assert max(stored_sizes(tmp_path / "data")) == before, "a checkpoint was signed without its tiles"
    errors = [r for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(errors) == 1 and "No space left on device" in errors[0].getMessage()
    assert not [p for p in tiles.rglob(".*") if p.is_file()], "a half-written file was left"
    full[0] = False
    wait_for("checkpoints to resume", lambda: max(stored_sizes(tmp_path / "data")) != before, timeout=10)
    dealer.stop()
    for size in stored_sizes(tmp_path / "data"):
        assert missing(tiles, size) == [], size
