"""A probe of the dealer's garbage collections, loaded by every interpreter on PYTHONPATH.

Only in a process whose arguments include ``serve`` and with ``GCPROBE_OUT`` set: each
collection that takes over 0.5 ms appends ``<unix time> <generation> <ms> <objects collected>``
to ``$GCPROBE_OUT/gc-<pid>.txt``, to be lined up with the abuse benchmark's windows and the
victim's slowest calls. ``GCPROBE_T0`` (and ``GCPROBE_T1``) set the first two thresholds before
the dealer starts (the dealer then raises only the third). bench/README.md, section 13.
"""

import gc
import os
import sys
import time

if "serve" in sys.argv and os.environ.get("GCPROBE_OUT"):
    _start = [0.0]
    _out = open(  # noqa: SIM115 - kept open for the process's life, line-buffered
        os.path.join(os.environ["GCPROBE_OUT"], f"gc-{os.getpid()}.txt"), "a", buffering=1
    )

    def _timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _start[0] = time.perf_counter()
            return
        ms = (time.perf_counter() - _start[0]) * 1000
        if ms > 0.5:
            _out.write(f"{time.time():.3f} {info['generation']} {ms:.2f} {info['collected']}\n")

    gc.callbacks.append(_timed)
    if os.environ.get("GCPROBE_T0"):
        gc.set_threshold(int(os.environ["GCPROBE_T0"]), int(os.environ.get("GCPROBE_T1", "10")), 10)
