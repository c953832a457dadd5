"""The log as the public holds it: a dealer deals continuously with ``serve --tiles`` behind a real
nginx, with a real witness, while a second process (tests/support/tiles_collector.py) collects every
checkpoint the dealer hands out (RPC, receipts, the witness's monitoring endpoint, the tiles'
checkpoint) and proves each one from the tiles alone, fetched through nginx: tree hash, inclusion
of random entries, consistency with the one before. In the middle the dealer is killed (SIGKILL)
and started again; every proof must still hold, before, during and after."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from tests.support import waits
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.forked_serve import ServeForker
from tests.support.nginx import REPO, Nginx
from tests.support.witnesses import WitnessProcess, init_witness

pytestmark = pytest.mark.slow
CLI = (sys.executable, "-m", "fairdeck.cli")
PHASE_S = 6.0  # how long each phase deals: long enough for several witness rounds


def results(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def wait_for(what: str, ok: Callable[[], bool], seen: Callable[[], str], timeout: float = 60) -> None:
    try:
        waits.wait_for(what, ok, timeout=timeout, every=0.1)
    except AssertionError:
        raise AssertionError(f"never happened: {what}; {seen()}") from None


def point_at(target_file: Path, target: str) -> None:
    """Tell the collector and the dealing thread where the dealer is: replaced whole, so that a
    reader never sees the file empty between truncation and write."""
    part = target_file.with_suffix(".part")
    part.write_text(target)
    part.replace(target_file)


def test_every_checkpoint_handed_out_is_proved_from_tiles_through_nginx(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    data, root = tmp_path / "data", tmp_path / "www"
    vkey = subprocess.run(
        [*CLI, "init", "--data", str(data), "--log-origin", "log.test/fairdeck"],
        capture_output=True, text=True, check=True, env=clean_env(),
    ).stdout.strip()  # fmt: skip
    witness_vkey = init_witness(tmp_path / "w1", "witness.test/w1", vkey)
    witness = WitnessProcess(tmp_path / "w1")
    flags = (
        "--tiles", str(root / "log"), "--witness", f"{witness.url}={witness_vkey}",
        "--witness-interval", "0.5", "--checkpoint-interval", "0.05", "--rate-limit", "0",
    )  # fmt: skip
    target_file, stop, out = tmp_path / "target", tmp_path / "stop", tmp_path / "collected.jsonl"
    out.touch()
    nginx = Nginx(root)
    dealer = DealerProcess(data, tmp_path / "dealer.log", *flags, forker=serve_forker)
    point_at(target_file, dealer.target)
    # Its stderr goes to a file: a pipe nobody reads fills (gRPC's own lines while the dealer is
    # down) and blocks the collector, which then proves nothing more.
    collector_said = tmp_path / "collector.stderr"
    with collector_said.open("w") as said_to:  # the child keeps its own copy
        collector = subprocess.Popen(
            [
                sys.executable, "-m", "tests.support.tiles_collector", "--vkey", vkey,
                "--tiles", f"{nginx.url}/log", "--witness", witness.url,
                "--target-file", str(target_file), "--stop", str(stop), "--out", str(out),
            ],
            cwd=REPO, env=clean_env(PYTHONPATH=str(REPO)), stderr=said_to,
        )  # fmt: skip
    dealing = threading.Event()
    dealt = [0]

    def deal() -> None:
        while dealing.is_set():
            try:
                with DealerClient(target_file.read_text().strip(), timeout=5, retries=0) as client:
                    while dealing.is_set():
                        client.close_hand(client.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id)
                        dealt[0] += 1
            except Exception:
                waits.pace(0.1)  # the dealer is down: deal again once it is back

    before = 0

    def seen() -> str:
        """What the collector, the dealer and the witness show, for a failed wait."""
        records = results(out)
        sizes = [r for r in records if "size" in r]
        sources = sorted({str(r["source"]) for r in sizes if int(r["size"]) > before})  # type: ignore[call-overload]
        failed = [r["failure"] for r in records if "failure" in r][:3]
        gone = collector.poll()
        said = collector_said.read_text(errors="replace")[-2000:]
        witness_said = witness.stderr_path.read_text(errors="replace")[-1500:]
        return (
            f"sources past size {before}: {sources}; failures: {failed}; last records: {records[-6:]}; "
            f"collector exit: {gone}, stderr: {said}; dealer stderr: {dealer.stderr()[-2000:]}; "
            f"witness stderr: {witness_said}"
        )

    dealing.set()
    thread = threading.Thread(target=deal)
    thread.start()
    try:
        waits.pace(PHASE_S)  # a phase of dealing
        wait_for(
            "the witness's checkpoint is proved",
            lambda: any(r.get("source") == "witness" for r in results(out)),
            seen,
        )
        before = max(int(r["size"]) for r in results(out) if "size" in r)  # type: ignore[call-overload]
        dealt_before_kill = dealt[0]
        dealer.kill9()  # in the middle of dealing, of signing, of writing tiles
        waits.outlast(1.0)  # the tiles stay served (and proved) while the dealer is down
        dealer = DealerProcess(data, tmp_path / "dealer.log", *flags, forker=serve_forker)
        point_at(target_file, dealer.target)
        dealt_at_restart = dealt[0]
        waits.pace(PHASE_S)  # a phase of dealing
        wait_for(
            "checkpoints after the restart are proved from every source",
            lambda: (
                {str(r["source"]) for r in results(out) if "size" in r and int(r["size"]) > before}  # type: ignore[call-overload]
                >= {"rpc", "receipt", "witness", "tiles"}
            ),
            seen,
        )
    finally:
        dealing.clear()
        thread.join()
        stop.touch()
        collector.wait(timeout=60)
        dealer.terminate()
        witness.stop()
        nginx.stop()
    records = results(out)
    failures = [r["failure"] for r in records if "failure" in r]
    assert not failures, failures[:5]
    assert collector.returncode == 0, collector_said.read_text(errors="replace")[-4000:]
    proved = [r for r in records if "size" in r]
    by_source = {
        s: sum(1 for r in proved if r["source"] == s) for s in ("rpc", "receipt", "witness", "tiles")
    }
    assert all(by_source.values()), by_source
    assert any(r.get("down") for r in records), "the collector never saw the dealer down"
    # Hands were dealt before the kill and after the restart: checkpoints handed out while the log
    # grew. (A count of hands was a throughput bar: under load it fell short with every check met.)
    assert dealt_before_kill > 0, dealt_before_kill
    assert dealt[0] > dealt_at_restart, (dealt_at_restart, dealt[0])
