"""The verifier page's verification time in headless Chromium (bench/README.md, section 10): a
52-card hand and an 8-deck shoe, from hand proofs of docs/vectors, with the Python reference
beside it in the same run.

    .venv/bin/python bench/page_bench.py [--rounds 50] [--json FILE]

Needs Node.js, `npm ci --prefix client/web` and Chromium (as the browser tests). Each figure is
the time of `fairdeck.verifyBytes` inside the page (every check: strict reading, the commitment,
the derivation, the log entries, the checkpoint's Ed25519 signature and both inclusion proofs),
after one warm-up call; the Python column is `HandProof.from_json(...).verify(key)`, the same
checks, in this process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fairdeck.log.handproof import HandProof  # noqa: E402
from fairdeck.log.note import Verifier  # noqa: E402
from tests.support import browser  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    why = browser._missing()
    if why:
        print(f"page_bench: {why}", file=sys.stderr)
        return 2
    vectors = json.loads((ROOT / "docs" / "vectors" / "fairdeck-hand-proofs-v1.json").read_text())
    key = vectors["log_key"]
    texts = {v["name"]: v["text"] for v in vectors["valid"]}
    cases = {"standard (52 cards)": texts["a standard hand"], "shoe-8 (416 cards)": texts["a shoe-8 hand"]}
    job = {
        "bench": {
            "rounds": args.rounds,
            "cases": [
                {"id": name, "bytes_b64": browser.b64(text.encode()), "key": key}
                for name, text in cases.items()
            ],
        }
    }
    with tempfile.TemporaryDirectory() as tmp:
        page = browser.run(job, Path(tmp), timeout=600)["bench"]
    verifier = Verifier.parse(key)
    rows = []
    for name, text in cases.items():
        HandProof.from_json(text).verify(verifier)  # warm-up
        py = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            HandProof.from_json(text).verify(verifier)
            py.append((time.perf_counter() - t0) * 1000)
        times = page[name]["times"]
        assert page[name]["ok"], f"{name}: the page did not verify the proof"
        rows.append(
            {
                "case": name,
                "page_median_ms": statistics.median(times),
                "page_p90_ms": sorted(times)[int(0.9 * (len(times) - 1))],
                "page_max_ms": max(times),
                "python_median_ms": statistics.median(py),
            }
        )
    head = ("hand", "page median", "page p90", "page max", "python median", "page/python")
    print(f"{head[0]:<20} {head[1]:>12} {head[2]:>10} {head[3]:>10} {head[4]:>14} {head[5]:>12}")
    for r in rows:
        print(
            f"{r['case']:<20} {r['page_median_ms']:>10.2f}ms {r['page_p90_ms']:>8.2f}ms"
            f" {r['page_max_ms']:>8.2f}ms {r['python_median_ms']:>12.2f}ms"
            f" {r['page_median_ms'] / r['python_median_ms']:>11.2f}x"
        )
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
