"""A dealer's start for tests, two ways (tests/support/forked_serve.py): N `DealerProcess`es each a
new `python -m fairdeck.cli serve`, then N forked from one `ServeForker`, alternating in rounds.
Prints the wall time of a start and stop, and the dealer's CPU by the time it printed its
listening line (from /proc), per start.

    .venv/bin/python bench/forked_serve_starts.py 5
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker


def starts(n: int, root: Path, forker: ServeForker | None) -> tuple[float, float]:
    """Wall seconds and the dealers' CPU seconds at listening, per start."""
    wall, cpu = time.monotonic(), 0.0
    for i in range(n):
        where = root / f"{'forked' if forker else 'new'}-{i}"
        where.mkdir(parents=True)
        dealer = DealerProcess(where / "data", where / "stderr", "--log-level", "WARNING", forker=forker)
        cpu += dealer.cpu_seconds() or 0.0
        assert dealer.terminate() == 0
    return (time.monotonic() - wall) / n, cpu / n


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    root = Path(tempfile.mkdtemp(prefix="forked-serve-bench-"))
    forker = ServeForker()
    try:
        for round_ in range(2):
            for name, way in (("new interpreter", None), ("forked", forker)):
                wall, cpu = starts(n, root / str(round_), way)
                said = f"{wall:.2f} s wall a start and stop, {cpu:.3f} s CPU at listening"
                print(f"round {round_ + 1}, {name}: {said}")
    finally:
        forker.close()


if __name__ == "__main__":
    main()
