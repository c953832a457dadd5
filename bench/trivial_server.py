"""A do-nothing DealerService for the Deal-path benchmark (bench/deal_bench.py).

Same service and method path as the dealer (``/fairdeck.v1.DealerService/DealNewHand``),
same grpc.aio server and options, same generated servicer plumbing; its
DealNewHand returns a pre-built ``DealNewHandResponse`` read from a file (a
real response captured from the dealer, so the bytes on the wire are the same
size) and does no other work. Whatever the dealer costs beyond this is the
dealer's own work: validation, seed, commitment, derivation, sealing, storage.

    .venv/bin/python bench/trivial_server.py --listen 127.0.0.1:0 --response FILE

Prints ``trivial dealer listening on HOST:PORT`` first; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path
from typing import Any

import grpc

from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # as the dealer's default (ServerConfig.max_message_bytes)


class TrivialDealer(dealer_pb2_grpc.DealerServiceServicer):
    def __init__(self, response: pb.DealNewHandResponse) -> None:
        self.response = response

    async def DealNewHand(self, request: pb.DealNewHandRequest, context: Any) -> pb.DealNewHandResponse:
        return self.response


async def serve(listen: str, response: pb.DealNewHandResponse) -> None:
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
    )
    dealer_pb2_grpc.add_DealerServiceServicer_to_server(TrivialDealer(response), server)
    port = server.add_insecure_port(listen)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"trivial dealer listening on {listen.rsplit(':', 1)[0]}:{port}", flush=True)
    await stop.wait()
    await server.stop(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--response", required=True, type=Path, help="serialized DealNewHandResponse")
    args = ap.parse_args()
    response = pb.DealNewHandResponse.FromString(args.response.read_bytes())
    asyncio.run(serve(args.listen, response))


if __name__ == "__main__":
    main()
