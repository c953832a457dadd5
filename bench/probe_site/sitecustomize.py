"""Loaded by every Python process started with this folder on PYTHONPATH (bench/victim_probe.py
puts it there for the dealer only). With FAIRDECK_PROBE_DIR set, a ``fairdeck serve`` process
records, until it exits: each garbage collection longer than 1 ms (its generation and length),
and for each call whose request id starts with ``victim-``, how long each awaited step of its
way took (authentication, the limits, admission, the dealer, the storage write). Written as
JSON to FAIRDECK_PROBE_DIR/dealer-PID.json. A measuring aid only: never loaded by the dealer
otherwise."""

from __future__ import annotations

import os
import sys

if os.environ.get("FAIRDECK_PROBE_DIR") and "serve" in sys.argv:
    import atexit
    import functools
    import gc
    import json
    import threading
    import time

    _gc: list[tuple[float, int, float]] = []
    _steps: dict[str, list[tuple[str, float, float]]] = {}
    _began: dict[str, float] = {}

    def _collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _began["gc"] = time.perf_counter()
            return
        took = time.perf_counter() - _began.get("gc", time.perf_counter())
        if took > 0.001:
            _gc.append((time.time(), info["generation"], round(took * 1000, 2)))

    gc.callbacks.append(_collected)

    def _timed(cls: type, name: str) -> None:
        from fairdeck_server import logging_setup

        inner = getattr(cls, name)

        @functools.wraps(inner)
        async def step(*args: object, **kwargs: object) -> object:
            call = logging_setup.current_call()
            rid = call.request_id if call is not None else ""
            if not rid.startswith("victim-"):
                return await inner(*args, **kwargs)
            began = time.perf_counter()
            try:
                return await inner(*args, **kwargs)
            finally:
                took = round((time.perf_counter() - began) * 1000, 2)
                _steps.setdefault(rid, []).append((f"{cls.__name__}.{name}", round(began, 5), took))

        setattr(cls, name, step)

    def _patch() -> None:
        while "fairdeck_server.app" not in sys.modules:
            time.sleep(0.02)
        time.sleep(0.2)  # the app module's own imports done
        from fairdeck_server import dealer, fair, limits
        from fairdeck_server.edge import interceptors
        from fairdeck_server.storage.sqlite import engine

        for cls, name in (
            (interceptors.AuthInterceptor, "_admit"),
            (interceptors.LimitsInterceptor, "_admit"),
            (limits.OpenHandsCap, "reserve"),
            (fair.Admission, "enter"),
            (dealer.Dealer, "deal_new_hand"),
            (engine.SqliteStorage, "create_hands"),
        ):
            _timed(cls, name)

    threading.Thread(target=_patch, daemon=True).start()

    def _write() -> None:
        path = os.path.join(os.environ["FAIRDECK_PROBE_DIR"], f"dealer-{os.getpid()}.json")
        with open(path, "w") as out:
            json.dump({"gc": _gc, "steps": _steps}, out)

    atexit.register(_write)
