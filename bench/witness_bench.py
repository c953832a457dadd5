"""Witnesses and dealing: the two bars of bench/README.md, section 8.

1. Throughput. DealNewHand throughput of a dealer with 3 witnesses configured, one of them
   down, against a dealer with none. The runs alternate A/B/A/B, and the ratio is the median's.
   Bar: at least 0.95x.
2. Finality. The time from a hand's commit entry (DealNewHand returned) to a checkpoint
   covering it that k = 2 of the 3 witnesses cosigned, measured in a run of its own under the
   load of bar 1 (the sampler polls GetCheckpoint every 5 ms, so it is kept out of bar 1).
   Bar: median at most 2 s.
3. Request rate. add-checkpoint requests each live witness answered per second while the
   witnessed dealer dealt at full load (bar 1's runs), from the witness's own
   ``fairdeck_witness_requests_total``. Bar: at most 1 per second per witness (the public witness
   network's budget for a log; the dealer's default ``--witness-interval``).

Every process is real: two `fairdeck witness serve`, a third witness's port left closed, two
`fairdeck serve` on SQLite in a temporary directory, and the load generator (bench/loadgen.py)
in its own process.

    .venv/bin/python bench/witness_bench.py [--rounds 4] [--duration 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_process import PYTHON, Server, loadgen, serve_argv

from fairdeck.log.cosignature import CosignatureVerifier, WitnessPolicy
from fairdeck.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc

BAR_THROUGHPUT = 0.95
BAR_FINALITY_S = 2.0
BAR_RATE = 1.0


def witness_requests(w: Server) -> float:
    """The add-checkpoint requests a witness answered so far (its /metrics, every status)."""
    import urllib.request

    with urllib.request.urlopen(f"http://{w.target}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("fairdeck_witness_requests_total{")
    )


def cli(*args: str) -> str:
    done = subprocess.run([PYTHON, "-m", "fairdeck.cli", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dealer(data: Path, witnesses: list[str], k: int) -> Server:
    argv = serve_argv(data)
    for spec in witnesses:
        argv += ["--witness", spec]
    if witnesses:
        argv += ["--witness-threshold", str(k)]
    return Server(data.name, argv, data.with_suffix(".log"))


def finality_samples(target: str, policy: WitnessPolicy, n: int, stop: threading.Event) -> list[float]:
    """Seconds from DealNewHand's answer to a final checkpoint covering its commit entry."""
    samples: list[float] = []
    with grpc.insecure_channel(target) as channel:
        deal = dealer_pb2_grpc.DealerServiceStub(channel)
        audit = audit_pb2_grpc.AuditServiceStub(channel)
        while len(samples) < n and not stop.is_set():
            hand = deal.DealNewHand(dealer_pb2.DealNewHandRequest(deck="standard"), timeout=30).hand
            index = hand.commit_receipt.index
            t0 = time.perf_counter()
            while True:
                cp = audit.GetCheckpoint(audit_pb2.GetCheckpointRequest(), timeout=30)
                if cp.tree_size > index and policy.check(cp.signed_checkpoint).ok:
                    samples.append(time.perf_counter() - t0)
                    break
                if time.perf_counter() - t0 > 60:
                    raise RuntimeError(f"entry {index} never became final")
                time.sleep(0.005)
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--finality-samples", type=int, default=40)
    ap.add_argument("--json", type=Path)
    opts = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="witness-bench-") as tmp:
        root = Path(tmp)
        cli("init", "--data", str(root / "plain"))
        log_vkey = cli("init", "--data", str(root / "witnessed")).splitlines()[-1]
        witnesses: list[Server] = []
        specs: list[str] = []
        keys: dict[str, CosignatureVerifier] = {}
        for name in ("w1", "w2", "w3"):
            vkey = cli("witness", "init", "--dir", str(root / name), "--name", f"bench.witness/{name}")
            (root / name / "logs.conf").write_text(f"log {log_vkey}\n")
            keys[name] = CosignatureVerifier.parse(vkey)
            if name == "w3":  # down: a closed port
                specs.append(f"http://127.0.0.1:{free_port()}={vkey}")
                continue
            argv = [PYTHON, "-m", "fairdeck.cli", "witness", "serve", "--dir", str(root / name)]
            w = Server(name, [*argv, "--listen", "127.0.0.1:0"], root / f"{name}.log")
            witnesses.append(w)
            specs.append(f"http://{w.target}={vkey}")
        plain = dealer(root / "plain", [], 0)
        witnessed = dealer(root / "witnessed", specs, 2)
        policy = WitnessPolicy(keys, 2)
        runs: dict[str, list[float]] = {"none": [], "3 witnesses, 1 down": []}
        finality: list[float] = []
        rates: dict[str, list[float]] = {w.name: [] for w in witnesses}
        try:
            load = ["unary", "--concurrency", str(opts.concurrency), "--warmup", "1", "--duration"]
            for r in range(opts.rounds):
                pair = [("none", plain), ("3 witnesses, 1 down", witnessed)]
                for label, server in pair if r % 2 == 0 else pair[::-1]:
                    before = [(witness_requests(w), time.monotonic()) for w in witnesses]
                    result = loadgen([*load, str(opts.duration)], server)
                    if server is witnessed:
                        for w, (count, t0) in zip(witnesses, before, strict=True):
                            rates[w.name].append((witness_requests(w) - count) / (time.monotonic() - t0))
                    runs[label].append(result["calls_per_s"])
                    print(f"round {r}: {label}: {result['calls_per_s']:.0f} calls/s", file=sys.stderr)
            # Finality under the same load, in a run of its own (its polling is not in the ratio).
            stop = threading.Event()
            sampler = threading.Thread(
                target=lambda: finality.extend(
                    finality_samples(witnessed.target, policy, opts.finality_samples, stop)
                )
            )
            sampler.start()
            loadgen([*load, str(opts.duration)], witnessed)
            stop.set()
            sampler.join()
        finally:
            plain.stop()
            witnessed.stop()
            for w in witnesses:
                w.stop()

    base = statistics.median(runs["none"])
    with_w = statistics.median(runs["3 witnesses, 1 down"])
    report: dict[str, Any] = {
        "throughput_calls_per_s": runs,
        "throughput_ratio": round(with_w / base, 3),
        "throughput_bar": BAR_THROUGHPUT,
        "throughput_verdict": "PASS" if with_w / base >= BAR_THROUGHPUT else "MISS",
        "finality_seconds": {
            "n": len(finality),
            "median": round(statistics.median(finality), 3) if finality else None,
            "p90": round(sorted(finality)[int(0.9 * (len(finality) - 1))], 3) if finality else None,
            "max": round(max(finality), 3) if finality else None,
        },
        "finality_bar_s": BAR_FINALITY_S,
        "witness_requests_per_s": {name: [round(x, 3) for x in xs] for name, xs in rates.items()},
        "witness_rate_bar": BAR_RATE,
        "witness_rate_verdict": "PASS" if all(max(xs) <= BAR_RATE for xs in rates.values()) else "MISS",
    }
    if finality:
        report["finality_verdict"] = "PASS" if statistics.median(finality) <= BAR_FINALITY_S else "MISS"
    print(json.dumps(report, indent=2))
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
