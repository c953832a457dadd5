"""Where a fuzzed call's CPU goes (tests/fuzz/test_fuzz.py): the fuzz loop without hypothesis
against a dealer started as the test's fixture starts it, the fuzzer's and the dealer's CPU per
call (process time here, /proc for the dealer); the same answers judged again offline (the
oracle alone); and the floor, a bare grpc.aio server answering every call NOT_FOUND with a
google.rpc.Status trailer, called the same way (sync futures, 16 in flight).

    .venv/bin/python bench/fuzz_call_cost.py [BATCHES]   # 320: as many batches as the test
"""

import asyncio
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fairdeck.log.note import Signer
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck_server.edge.status import status_metadata
from tests.fuzz import test_fuzz as tf
from tests.support import fuzz_wire as wire
from tests.support.dealers import DealerProcess
from tests.support.fuzz_oracle import WINDOW, Fuzzer, Outcome, Outgoing, Rpc
from tests.support.fuzz_plausible import World

FLAGS = ("--rate-limit", "0", "--max-open-hands", "0", "--max-streams", "0", "--log-level", "WARNING")
GET_HAND = "/fairdeck.v1.DealerService/GetHand"


class Recording(Fuzzer):
    """A Fuzzer that keeps every answer it judged, to judge them again."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.seen: list[tuple[Rpc, Outgoing, Outcome]] = []

    def _judge(self, rpc: Rpc, out: Outgoing, o: Outcome) -> None:
        self.seen.append((rpc, out, o))
        super()._judge(rpc, out, o)


def fuzz(batches: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="fuzz-call-cost-"))
    dealer = DealerProcess(root / "data", root / "dealer.log", *FLAGS)
    try:
        world = World()
        signer = Signer.parse((dealer.data_dir / "log.key").read_text().strip())
        tf._prime(dealer.target, world, signer)
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        with grpc.insecure_channel(dealer.target, options=options) as channel:
            fuzzer = Recording(channel, world, signer.verifier)
            for name in tf.RPCS:
                made, genome = tf.makers(fuzzer.rpcs[name], world), wire.Genome(name.encode())
                cpu, dealer_cpu = time.process_time(), dealer.cpu_seconds() or 0.0
                for _ in range(batches):
                    fuzzer.send(fuzzer.rpcs[name], tf.batch(made, genome))
                fuzzer.drain()
                cpu, dealer_cpu = time.process_time() - cpu, (dealer.cpu_seconds() or 0.0) - dealer_cpu
                n = fuzzer.sent[name]
                per = f"fuzzer {1000 * cpu / n:.3f} ms, dealer {1000 * dealer_cpu / n:.3f} ms"
                print(f"{name:20} {n:5} calls: {per} a call")
            again = Fuzzer(channel, World(), signer.verifier)
        problems = sum(len(v) for v in fuzzer.violations.values())
        cpu = time.process_time()
        for rpc, out, o in fuzzer.seen:
            again._judge(rpc, out, o)
        cpu = time.process_time() - cpu
        print(f"judged again offline: {1e6 * cpu / len(fuzzer.seen):.1f} us a call; problems {problems}")
    finally:
        dealer.terminate()


async def _bare_server() -> None:
    trailer = status_metadata(grpc.StatusCode.NOT_FOUND, "no such hand", "HAND_NOT_FOUND", "hand_id")

    async def get_hand(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such hand", trailing_metadata=trailer)
        raise AssertionError("unreachable")

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(get_hand)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("fairdeck.v1.DealerService", {"GetHand": handler}),)
    )
    print(server.add_insecure_port("127.0.0.1:0"), flush=True)
    await server.start()
    await server.wait_for_termination()


def floor(n: int = 4000) -> None:
    server = subprocess.Popen([sys.executable, __file__, "--bare-server"], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(GET_HAND, request_serializer=None, response_deserializer=None)
            for _ in range(3):
                cpu, server_cpu = time.process_time(), _cpu(server.pid)
                in_flight: collections.deque[Any] = collections.deque()
                for i in range(n):
                    in_flight.append(call.future(pb.GetHandRequest(hand_id=f"h{i}").SerializeToString()))
                    while len(in_flight) > (WINDOW if i < n - 1 else 0):
                        done = in_flight.popleft()
                        assert done.code() == grpc.StatusCode.NOT_FOUND
                        done.trailing_metadata()
                cpu, server_cpu = time.process_time() - cpu, _cpu(server.pid) - server_cpu
                per = f"client {1000 * cpu / n:.3f} ms, server {1000 * server_cpu / n:.3f} ms"
                print(f"bare grpc.aio: {per} a call")
    finally:
        server.kill()
        server.wait()


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    if sys.argv[1:] == ["--bare-server"]:
        asyncio.run(_bare_server())
    else:
        floor()
        fuzz(int(sys.argv[1]) if len(sys.argv) > 1 else 320)
