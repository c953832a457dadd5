"""A refused call leaves no reference cycle behind: it is freed as it ends, not by the garbage
collector (regression: each one stayed in a cycle through gRPC's AbortError, its traceback's
frames, the context and the call's state; under a flood of held refusals the full collections
that freed them stopped the event loop for up to 92 ms; edge/status.py, ``acyclic``). And a
serving process makes full collections rare (heap.tune_collector): the calls in flight during a
flood had started one every few seconds, 40-60 ms each."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from fairdeck_server.observe.heap import FULL_COLLECTION_AFTER
from fairdeck_server.run.processes import WORKER_ENV
from tests.support.dealers import DealerProcess, RunningDealer
from tests.support.ops import dealer_tokens, read_stalled
from tests.support.waits import wait_for

REFUSED = {
    "unary": lambda c: c.get("no-such-hand"),
    "stream": lambda c: list(c.deal_hands("standard-52", 1)),
}


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def unreachable_aborts() -> int:
    """AbortErrors that only the garbage collector could free now."""
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds is kept in gc.garbage, not freed
    gc.collect()
    found = sum(isinstance(o, grpc.aio.AbortError) for o in gc.garbage)
    gc.set_debug(0)
    gc.garbage.clear()
    return found


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_refused_call_is_freed_as_it_ends(client: DealerClient, collector_off: None, kind: str) -> None:
    refuse: Callable[[DealerClient], object] = REFUSED[kind]
    for _ in range(20):
        with pytest.raises(FairdeckError):
            refuse(client)
    # The dealer's task ends just after the client has its answer.
    wait_for(
        f"no refused {kind} call left in a reference cycle", lambda: unreachable_aborts() == 0, timeout=5
    )


def test_a_call_cut_by_the_default_deadline_or_refused_by_auth_is_freed_as_it_ends(
    dealer_factory: Callable[..., RunningDealer], collector_off: None
) -> None:
    """The other AbortErrors: the default deadline's, raised while handling the TimeoutError
    (whose context is the CancelledError of the stream's own frames: about 1,500 objects a call),
    and the auth layer's, before any servicer runs."""
    running = dealer_factory(default_deadline=0.3, require_auth=True, rate_limit=0)
    token = dealer_tokens(running, "acme")["acme"]
    # No BDP probe: the stream's window stays small, so a reader that stops stops the writes.
    with grpc.insecure_channel(running.target, options=[("grpc.http2.bdp_probe", 0)]) as channel:
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        for metadata, code in [
            ((("authorization", f"Bearer {token}"),), grpc.StatusCode.DEADLINE_EXCEEDED),
            ((), grpc.StatusCode.UNAUTHENTICATED),
        ]:
            for _ in range(3):
                stream = stub.DealHands(
                    pb.DealHandsRequest(deck="standard", hand_count=100_000, close=True),
                    metadata=metadata,
                    timeout=20,
                )
                with pytest.raises(grpc.RpcError) as ended:
                    read_stalled(stream, 1.0) if metadata else list(stream)
                assert ended.value.code() == code
            wait_for(
                f"no {code.name} call left in a reference cycle", lambda: unreachable_aborts() == 0, timeout=5
            )


# Loaded by every interpreter of the dealer (PYTHONPATH): at exit, its collector's thresholds,
# in a file named after its pid and whether it was a supervisor's worker.
THRESHOLDS_AT_EXIT = """
import atexit, gc, json, os
role = "worker" if os.environ.get("{worker}") else "dealer"
path = os.path.join(os.environ["THRESHOLDS_DIR"], f"{{role}}-{{os.getpid()}}.json")
atexit.register(lambda: open(path, "w").write(json.dumps(gc.get_threshold())))
"""


@pytest.mark.parametrize("processes", [1, 2])
def test_a_serving_process_collects_everything_only_after_many_younger_collections(
    tmp_path: Path, processes: int
) -> None:
    """The real console script, alone or as a supervisor's workers: every interpreter that serves
    runs with the third threshold raised, the first two as Python has them."""
    site, out = tmp_path / "site", tmp_path / "thresholds"
    site.mkdir()
    out.mkdir()
    (site / "sitecustomize.py").write_text(THRESHOLDS_AT_EXIT.format(worker=WORKER_ENV))
    dealer = DealerProcess(
        tmp_path / "data",
        tmp_path / "stderr.log",
        "--processes",
        str(processes),
        env={"PYTHONPATH": str(site), "THRESHOLDS_DIR": str(out)},
    )
    assert dealer.terminate() == 0, dealer.stderr()
    serving = sorted(p.name.split("-")[0] for p in out.glob("*.json"))
    assert serving == (["dealer"] if processes == 1 else ["dealer", "worker", "worker"])
    for path in out.glob("worker-*.json" if processes > 1 else "*.json"):
        young, middle, full = json.loads(path.read_text())
        assert [young, middle] == list(gc.get_threshold()[:2]), path.name  # Python's own
        assert full == FULL_COLLECTION_AFTER == 100, path.name
