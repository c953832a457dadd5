"""The co-dealt verifier in JavaScript (client/web/src/codeal/): a whole co-dealt hand proof in
the verifier page in headless Chromium and Firefox, the same hand on Node.js and in the Python
reference, and one shuffle proof's check (bench/README.md, "The co-dealt verifier in the page").

    .venv/bin/python bench/codeal_page_bench.py [--rounds 10] [--json FILE]

The hand: 52 cards (standard), 2 key holders, 9 seats of Hold'em (23 cards opened: 18 hole cards
and 5 on the board), seeds revealed: every check of docs/codealing-spec.md section 10. "page" is
`fairdeck.verifyBytes` on the whole hand proof (the ordinary checks and the log's too), with the
ordinary proof of the same hand beside it; "shuffle proof" is step 10.4 for one holder (freshness,
the proof of shuffle and the record's signature), from the time of the shuffle step over 2.
Each figure is the median of --rounds runs after one warm-up.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fairdeck.codeal import verify_hand  # noqa: E402
from fairdeck.codeal.elgamal import initial_deck  # noqa: E402
from fairdeck.codeal.proof import verify_shuffle  # noqa: E402
from fairdeck.codeal.record import ShuffleRecord  # noqa: E402
from tests.support import browser  # noqa: E402
from tests.support.codeal_vectors import VECTORS, as_hand  # noqa: E402
from tests.support.page_vectors import PROOFS_V2  # noqa: E402

GENERATOR = ROOT / "docs" / "vectors" / "generate_codeal_proofs.py"

NODE = """
import { readFileSync } from "node:fs";
import { vectorApi } from "./src/codeal/index.js";
const { hand, rounds } = JSON.parse(readFileSync(process.argv[1], "utf8"));
const h = vectorApi.codealHandFromVector(hand);
const run = () => {
  const times = {};
  let t = performance.now();
  const start = t;
  vectorApi.verifyCodealHand(h, (step) => { const now = performance.now(); times[step] = now - t; t = now; });
  times.total = performance.now() - start;
  return times;
};
run();
process.stdout.write(JSON.stringify(Array.from({ length: rounds }, run)));
"""


def codeal_proof() -> tuple[str, str]:
    """The bench hand's whole co-dealt proof (format 4: every position, both seeds) and its
    co-dealer's identity key (hex), made as docs/vectors/generate_codeal_proofs.py makes its cases."""
    spec = importlib.util.spec_from_file_location("generate_codeal_proofs", GENERATOR)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    text, keys = generator.proof("standard", "bench-holdem-9-seats", 2, range(23), "bench")
    return text, keys[0]


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def python_runs(hand: dict[str, Any], rounds: int) -> tuple[list[float], list[float]]:
    """(whole hand, one shuffle proof), in ms."""
    h = as_hand(hand)
    verify_hand(h)
    whole, shuffle = [], []
    from fairdeck.codeal.context import HandContext
    from fairdeck.codeal.keys import KeyRecord
    from fairdeck.core.decks import DeckSpec

    spec = DeckSpec.parse(h.deck)
    records = [KeyRecord.decode(k, i) for i, k in enumerate(h.keys)]
    ctx = HandContext(spec, h.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
    first = ShuffleRecord.decode(h.shuffles[0], spec.size, 0)
    for _ in range(rounds):
        t0 = time.perf_counter()
        verify_hand(h)
        whole.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        verify_shuffle(ctx, 0, initial_deck(spec), first.deck, first.proof)
        shuffle.append((time.perf_counter() - t0) * 1000)
    return whole, shuffle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    hand = VECTORS["hands"]["holdem-9-seats"]
    key = PROOFS_V2["log_key"]
    ordinary = next(v["text"] for v in PROOFS_V2["valid"] if v["name"] == "a standard hand")
    codealt, codealer_key = codeal_proof()
    cases = [
        {"id": "ordinary", "bytes_b64": browser.b64(ordinary.encode()), "key": key},
        {
            "id": "co-dealt",
            "bytes_b64": browser.b64(codealt.encode()),
            "key": key,
            "codealer_key": codealer_key,
        },
    ]
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        job_path = Path(tmp) / "node.json"
        job_path.write_text(json.dumps({"hand": hand, "rounds": args.rounds}))
        done = subprocess.run(
            ["node", "--input-type=module", "-e", NODE, str(job_path)],
            cwd=browser.WEB,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        node = json.loads(done.stdout)
        rows["node"] = {"hand_ms": median(node, "total"), "shuffle_proof_ms": median(node, "shuffle") / 2}
        for engine in browser.ENGINES:
            job = {
                "bench": {"cases": cases, "rounds": args.rounds},
                "codeal_bench": {"hand": hand, "rounds": args.rounds},
            }
            got = browser.run(job, Path(tmp), engine=engine, timeout=600)
            assert got["bench"]["co-dealt"]["ok"] and got["bench"]["ordinary"]["ok"], got["bench"]
            steps = got["codeal_bench"]
            rows[engine] = {
                "page_proof_ms": statistics.median(got["bench"]["co-dealt"]["times"]),
                "page_ordinary_ms": statistics.median(got["bench"]["ordinary"]["times"]),
                "hand_ms": median(steps, "total"),
                "shuffle_proof_ms": median(steps, "shuffle") / 2,
            }
    whole, shuffle = python_runs(hand, args.rounds)
    rows["python"] = {"hand_ms": statistics.median(whole), "shuffle_proof_ms": statistics.median(shuffle)}
    head = ("where", "co-dealt proof in page", "ordinary proof", "codeal checks", "one shuffle proof")
    print(f"{head[0]:<10} {head[1]:>23} {head[2]:>15} {head[3]:>14} {head[4]:>18}")
    for where, r in rows.items():
        page = f"{r['page_proof_ms']:.0f} ms" if "page_proof_ms" in r else "-"
        plain = f"{r['page_ordinary_ms']:.1f} ms" if "page_ordinary_ms" in r else "-"
        print(
            f"{where:<10} {page:>23} {plain:>15} {r['hand_ms']:>11.0f} ms {r['shuffle_proof_ms']:>15.1f} ms"
        )
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
