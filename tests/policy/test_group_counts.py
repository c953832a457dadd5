"""The per-tenant counts the processes of ``serve --processes N`` share (group_counts.py).

Two views of one table stand for two workers: a take sees the other's counts, the last unit goes
to one of them, a replacement frees what the dead one held, a tenant's row goes to another once
idle, and a tenant that finds no free row is counted in its own process (never refused for it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fairdeck_server.policy import group_counts
from fairdeck_server.policy.group_counts import CALLS, HANDS, OPENED, STREAMS, GroupCounts


@pytest.fixture
def pair() -> Iterator[tuple[GroupCounts, GroupCounts]]:
    fd = group_counts.make(2)
    a, b = GroupCounts(fd, 0, 2), GroupCounts(fd, 1, 2)
    yield a, b
    a.close()
    b.close()
    os.close(fd)


def test_a_cap_counts_both_workers_and_the_last_unit_goes_to_one(
    pair: tuple[GroupCounts, GroupCounts],
) -> None:
    a, b = pair
    assert a.take("t", STREAMS, 1, 2) and b.take("t", STREAMS, 1, 2)
    assert not a.take("t", STREAMS, 1, 2) and not b.take("t", STREAMS, 1, 2)
    assert a.take("other", STREAMS, 1, 2)  # another tenant's count is its own
    b.give("t", 1, STREAMS)
    assert a.take("t", STREAMS, 1, 2) and a.totals("t", STREAMS) == (2,)
    # A base (what storage holds) counts against the limit too; ``also`` moves with the take.
    assert not b.take("t", OPENED, 5, 10, base=6, also=(HANDS,))
    assert b.take("t", OPENED, 4, 10, base=6, also=(HANDS,)) and b.totals("t", OPENED, HANDS) == (4, 4)


def test_a_replacement_frees_what_the_dead_worker_held(pair: tuple[GroupCounts, GroupCounts]) -> None:
    a, b = pair
    for _ in range(3):
        assert b.take("t", CALLS, 1, 3)
    assert not a.take("t", CALLS, 1, 3)
    b.reset_own()  # worker 1 replaced: its new process starts clean
    assert a.take("t", CALLS, 1, 3) and a.totals("t", CALLS) == (1,)


def test_a_row_goes_to_another_tenant_only_once_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_counts, "SLOTS", 4)
    monkeypatch.setattr(group_counts, "PROBE", 4)
    fd = group_counts.make(2)
    a = GroupCounts(fd, 0, 2)
    tenants = [f"t{i}" for i in range(4)]
    for t in tenants:
        assert a.take(t, CALLS, 1, 1)
    # Every row busy: a fifth tenant is counted in this process only, and not refused for it.
    assert a.take("late", CALLS, 1, 1) and not a.take("late", CALLS, 1, 1)
    a.give("late", 1, CALLS)
    a.give("t0", 1, CALLS)
    a.take("t0", OPENED, 1, 0)  # t0 opened a hand: its row stays its own while recently used
    assert a.take("late", CALLS, 1, 1)  # still no free row: counted here
    a.give("late", 1, CALLS)
    monkeypatch.setattr(group_counts, "IDLE_S", -1.0)  # time passed: t0's row is idle
    assert a.take("late", CALLS, 1, 1) and a.totals("late", OPENED) == (0,)
    a.close()
    os.close(fd)
