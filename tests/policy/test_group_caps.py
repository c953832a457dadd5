"""Per-tenant caps hold across the processes of ``fairdeck serve --processes N``.

Each worker counted a tenant's streams, calls in flight and open hands on its own, so a tenant
whose connections the kernel spread over N workers got N times its cap. The workers now share
one table of counts (group_counts.py). The real console script, two workers, real connections
(one each, so the kernel spreads them), the default tenant (loopback needs no token).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from tests.support.groups import OWN, Group

CONNECTIONS = 16
"""Connections, each of its own: all on one of two workers with odds of 2 in 65,536."""


def test_a_tenants_stream_cap_holds_across_the_workers_of_a_group(tmp_path: Path) -> None:
    g = Group(tmp_path / "data", 2, tmp_path / "stderr", "--max-streams", "2", "--max-calls-in-flight", "0")
    clients = [DealerClient(g.target, options=OWN, retries=0, timeout=30) for _ in range(CONNECTIONS)]
    streams: list[Iterator[Any]] = []
    try:

        def one(c: DealerClient) -> bool:
            stream = c.deal_hands("standard", 100_000, close=True)
            try:
                next(stream)  # its first hands: the stream is open, and stays open unread
            except FairdeckError as e:
                assert e.reason == "TOO_MANY_STREAMS", e
                return False
            streams.append(stream)
            return True

        with ThreadPoolExecutor(CONNECTIONS) as pool:
            opened = sum(pool.map(one, clients))
        assert opened == 2, f"{opened} streams open at once for a cap of 2 (2 workers)"
    finally:
        for s in streams:
            with contextlib.suppress(Exception):
                s.close()  # type: ignore[attr-defined]
        for c in clients:
            c.close()
        code, _, err = g.stop()
    assert code == 0, err


def test_a_tenants_open_hands_cap_holds_across_the_workers_of_a_group(tmp_path: Path) -> None:
    cap = 40
    g = Group(tmp_path / "data", 2, tmp_path / "stderr", "--max-open-hands", str(cap))
    clients = [DealerClient(g.target, options=OWN, retries=0, timeout=30) for _ in range(CONNECTIONS)]
    try:

        def some(c: DealerClient) -> int:
            done = 0
            for _ in range(5):
                try:
                    c.open_hand("standard")
                    done += 1
                except FairdeckError as e:
                    assert e.reason == "TOO_MANY_OPEN_HANDS", e
            return done

        with ThreadPoolExecutor(CONNECTIONS) as pool:
            opened = sum(pool.map(some, clients))
        assert cap // 2 < opened <= cap, f"{opened} hands opened for a cap of {cap} (2 workers)"
    finally:
        for c in clients:
            c.close()
        code, _, err = g.stop()
    assert code == 0, err
