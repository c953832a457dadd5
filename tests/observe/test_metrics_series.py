"""What the dealer's /metrics holds besides its counters: no ``*_created`` series (regression:
prometheus_client adds a creation timestamp to every counter and histogram, 13% of the series,
that nobody asked for and that change on each restart), and one ``fairdeck_build_info`` that says
what runs (the Prometheus convention for a build's version, as labels on a constant 1)."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

import grpc

from fairdeck.client import DealerClient
from fairdeck.core.versions import CURRENT_VERSION
from tests.support.dealers import RunningDealer
from tests.support.ops import scrape


def test_no_created_series_and_one_build_info(tmp_path: Path) -> None:
    dealer_factory = RunningDealer(tmp_path / "d", metrics_listen="127.0.0.1:0")
    with dealer_factory as running, DealerClient(running.target) as c:
        c.close_hand(c.open_hand().hand_id)  # counters and a histogram with samples
        samples = scrape(running)
    names = {name for name, _ in samples}
    assert "fairdeck_rpcs_total" in names and "fairdeck_rpc_duration_seconds_count" in names
    assert not {n for n in names if n.endswith("_created")}, sorted(
        n for n in names if n.endswith("_created")
    )
    info = [(labels, value) for (name, labels), value in samples.items() if name == "fairdeck_build_info"]
    assert info == [
        (
            tuple(sorted({
                "version": metadata.version("fairdeck"),
                "algorithm": CURRENT_VERSION,
                "python": platform.python_version(),
                "grpcio": grpc.__version__,  # the distribution is the module
            }.items())),
            1.0,
        )
    ]  # fmt: skip
