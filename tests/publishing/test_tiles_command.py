"""`fairdeck tiles` and `fairdeck audit --tiles` as users run them: a real dealer's data dir, the
real console commands, tiles served by a real `python -m http.server` on 127.0.0.1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.log.tiles import tiles_for
from tests.support.dealers import RunningDealer

pytestmark = pytest.mark.xdist_group("tiles_command")
"""One worker runs the module, so its dealer of 150 hands is dealt once a run."""

CLI = [sys.executable, "-m", "fairdeck.cli"]


def fairdeck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def dealt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """A data dir with 150 closed hands and 1 open (301 entries), its vkey, and a target serving it."""
    data = tmp_path_factory.mktemp("tiles") / "data"
    dealer = RunningDealer(data, rate_limit=0)
    dealer.start()
    with DealerClient(dealer.target) as client:
        for _ in range(150):
            client.close_hand(client.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id)
        client.open_hand("standard")
    dealer.stop()  # the last checkpoint is signed on the way out
    vkey = fairdeck("key", "--data", str(data)).stdout.strip()
    dealer.start()
    yield data, vkey, dealer.target
    dealer.close()


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, dealt: tuple[Path, str, str]
) -> Iterator[tuple[Path, str]]:
    data, _, _ = dealt
    root = tmp_path_factory.mktemp("www")
    done = fairdeck("tiles", "--data", str(data), "--out", str(root / "log"))
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"tiles of \S+ at tree size 301 in .+: \d+ files written, 0 already there\n", done.stdout
    )
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    port = re.search(r"port (\d+)", server.stdout.readline())
    assert port, "http.server did not start"
    yield root / "log", f"http://127.0.0.1:{port.group(1)}/log"
    server.terminate()
    server.wait()


def _report(*args: str) -> dict[str, object]:
    done = fairdeck("audit", *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    report.pop("seconds")
    return report


def test_audit_from_tiles_over_http_is_the_audit_over_grpc(
    dealt: tuple[Path, str, str], served: tuple[Path, str]
) -> None:
    _, vkey, target = dealt
    _, url = served
    over_grpc = _report("--target", target, "--key", vkey)
    from_tiles = _report("--tiles", url, "--key", vkey)
    from_dir = _report("--tiles", str(served[0]), "--key", vkey)
    assert from_tiles == over_grpc == from_dir
    assert from_tiles["entries"] == 301 and from_tiles["closed"] == 150 and from_tiles["ok"] is True


def test_a_second_export_adds_nothing(dealt: tuple[Path, str, str], served: tuple[Path, str]) -> None:
    # 301 entries: tile/0/000, tile/0/001.p/45, tile/1/000.p/1 and the two bundles, and the partial
    # tiles and bundles of each smaller signed size: every file but the checkpoint, checked again.
    files = [p for p in served[0].rglob("*") if p.is_file() and p.name != "checkpoint"]
    assert {"tile/0/000", "tile/0/001.p/45", "tile/1/000.p/1", "tile/entries/001.p/45"} <= {
        p.relative_to(served[0]).as_posix() for p in files
    }
    done = fairdeck("tiles", "--data", str(dealt[0]), "--out", str(served[0]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(f"0 files written, {len(files)} already there"), done.stdout


def test_every_signed_size_has_its_partial_tiles(
    dealt: tuple[Path, str, str], served: tuple[Path, str]
) -> None:
    """tlog-tiles: "Logs MUST serve partial tiles corresponding to tree sizes for which a checkpoint
    was produced": the export writes them for every stored checkpoint, not only the latest."""
    from fairdeck_server.cli.audit_sources import data_log

    _, notes, _ = data_log(str(dealt[0]))
    sizes = [int(note.split(b"\n")[1]) for note in notes]
    assert len(sizes) > 1
    for size in sizes:
        for tile in tiles_for(size):
            assert (served[0] / tile.path).is_file(), (size, tile.path)
            if tile.level == 0:
                assert (served[0] / tile.bundle_path).is_file(), (size, tile.bundle_path)


def test_a_tampered_tile_fails_the_audit_naming_it(
    tmp_path: Path, dealt: tuple[Path, str, str], served: tuple[Path, str]
) -> None:
    import shutil

    copy = tmp_path / "log"
    shutil.copytree(served[0], copy)
    tile = copy / "tile" / "0" / "000"
    data = bytearray(tile.read_bytes())
    data[100] ^= 1
    tile.write_bytes(bytes(data))
    done = fairdeck("audit", "--tiles", str(copy), "--key", dealt[1])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "in tile/entries/000 does not hash to its leaf in tile/0/000" in done.stdout
    assert "Traceback" not in done.stderr


def test_refusals_are_one_line(tmp_path: Path, dealt: tuple[Path, str, str]) -> None:
    for args, words in [
        (("tiles", "--data", str(tmp_path / "none"), "--out", str(tmp_path / "t")), "no dealer database"),
        (("audit", "--tiles", str(tmp_path / "empty"), "--key", dealt[1]), "checkpoint"),
        (("audit", "--tiles", "http://127.0.0.1:9/nothing", "--key", dealt[1]), "cannot fetch"),
    ]:
        done = fairdeck(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], done.stderr
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("where", ["dir", "http"])
def test_worker_processes_read_tiles_to_the_same_report(
    tmp_path: Path, dealt: tuple[Path, str, str], served: tuple[Path, str], where: str
) -> None:
    """``audit --tiles --workers N``: bundles fetched and checked in worker processes give the
    one-process report, on the intact tiles and on a copy with a bundle altered."""
    import shutil

    location = str(served[0]) if where == "dir" else served[1]
    reports = [_report("--tiles", location, "--key", dealt[1], "--workers", n) for n in ("0", "2")]
    assert reports[0] == reports[1] and reports[0]["ok"] is True
    copy = tmp_path / "log"
    shutil.copytree(served[0], copy)
    bundle = copy / "tile" / "entries" / "000"
    data = bytearray(bundle.read_bytes())
    data[-1] ^= 1
    bundle.write_bytes(bytes(data))
    outputs = [fairdeck("audit", "--tiles", str(copy), "--key", dealt[1], "--workers", n) for n in ("0", "2")]
    assert [o.returncode for o in outputs] == [1, 1]
    assert outputs[0].stdout.split("\n", 1)[1] == outputs[1].stdout.split("\n", 1)[1]
    assert "in tile/entries/000 does not hash to its leaf in tile/0/000" in outputs[1].stdout
    assert "Traceback" not in outputs[1].stderr
