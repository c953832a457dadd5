"""CPU of one `fairdeck verify PROOF --key K` process, two source trees side by side (old, new):
each tree's client/ on PYTHONPATH, 10 runs each, alternating, twice.

    git worktree add /tmp/old-verify <old commit>
    .venv/bin/python bench/verify_cli_cpu.py /tmp/old-verify/client client
"""

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

VECTORS = Path(__file__).resolve().parent.parent / "docs" / "vectors" / "fairdeck-hand-proofs-v3.json"


def main() -> None:
    old, new = sys.argv[1:3]
    vectors = json.loads(VECTORS.read_text())
    case = vectors["valid"][0]
    proof = Path("/tmp/verify_cli_cpu_proof.json")
    proof.write_text(case["text"])
    key = vectors["keys"][case["keys"][0]]

    def run(path: str) -> float:
        env = dict(os.environ, PYTHONPATH=str(Path(path).resolve()))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(10):
            argv = [sys.executable, "-m", "fairdeck.cli", "verify", str(proof), "--key", key]
            subprocess.run(argv, env=env, capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / 10

    for _ in range(2):
        print(f"old {run(old):.3f} s CPU a run, new {run(new):.3f} s")


if __name__ == "__main__":
    main()
