"""What one sweep of the connection warden costs (server/fairdeck_server/edge/connections.py), with
``--open`` connections held on the port and ``--closed`` more that the server side closed first
(TIME_WAIT, which the host's TCP table keeps for 60 s: the abuse table's connections row churns
about 700 a second through the per-address bound). Wall and CPU time per sweep, over ``--sweeps``.

    .venv/bin/python bench/warden_probe.py --open 800 --closed 20000
    PYTHONPATH=/path/to/other/checkout/server .venv/bin/python bench/warden_probe.py ...   # another version
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from pathlib import Path

from fairdeck_server.edge import connections


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--open", type=int, default=800)
    parser.add_argument("--closed", type=int, default=20000)
    parser.add_argument("--sweeps", type=int, default=20)
    opts = parser.parse_args()
    listener = socket.create_server(("127.0.0.1", 0), backlog=4096)
    port = listener.getsockname()[1]
    held: list[socket.socket] = []
    for i in range(opts.open + opts.closed):
        client = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0))
        served = listener.accept()[0]
        if i < opts.closed:
            served.close()  # the server closes first: TIME_WAIT on its side
            client.close()
        else:
            held += [client, served]
    warden = connections.ConnectionWarden(port, 10_000)
    warden.sweep()  # the first look at every connection
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(opts.sweeps):
        warden.sweep()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    tcp = len(Path("/proc/net/tcp").read_text().splitlines()) - 1
    print(json.dumps({
        "code": connections.__file__, "open": warden.open, "lines in /proc/net/tcp": tcp,
        "ms per sweep": round(wall / opts.sweeps * 1000, 2),
        "cpu ms per sweep": round(cpu / opts.sweeps * 1000, 2),
    }))  # fmt: skip
    for s in [listener, *held]:
        s.close()


if __name__ == "__main__":
    main()
