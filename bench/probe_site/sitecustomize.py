"""Loaded by every Python process started with this folder on PYTHONPATH (bench/victim_probe.py
puts it there for the dealer only). With FAIRDECK_PROBE_DIR set, a ``fairdeck serve`` process
records, until it exits: each garbage collection longer than 1 ms (its generation and length),
and for each call whose request id starts with ``victim-``, how long each awaited step of its
way took (authentication, the limits, admission, the dealer, the storage write) and when the
storage thread's batch that held it ran (``writer.batch[N]``, ``reader.batch[N]``: N operations),
and the batch just before it on that thread (``writer.batch.before[N](cpu MS)``).
FAIRDECK_PROBE_PHASES=1 adds the writer batch's inserts and COMMIT with the thread's CPU time in
them; FAIRDECK_PROBE_HEAP=1 the tracked objects at exit by type; FAIRDECK_PROBE_SWITCH=S runs the
dealer with that GIL switch interval; FAIRDECK_PROBE_GC=T0,T1 its collector's first two
thresholds (the dealer raises only the third). Written as JSON to
FAIRDECK_PROBE_DIR/dealer-PID.json, at exit. With bench/abuse_bench.py too (put this folder on
its PYTHONPATH): each collection's wall time lines up with the rows' windows. A measuring aid
only: never loaded by the dealer otherwise."""

from __future__ import annotations

import os
import sys

if os.environ.get("FAIRDECK_PROBE_SWITCH") and "serve" in sys.argv:  # with or without the probe
    sys.setswitchinterval(float(os.environ["FAIRDECK_PROBE_SWITCH"]))  # an experiment, seconds

if os.environ.get("FAIRDECK_PROBE_GC") and "serve" in sys.argv:  # an experiment: T0,T1
    import gc as _thresholds

    _young, _, _middle = os.environ["FAIRDECK_PROBE_GC"].partition(",")
    _thresholds.set_threshold(int(_young), int(_middle or 10))

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
        from fairdeck_server.observe import logging_setup

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
        while "fairdeck_server.run.app" not in sys.modules:
            time.sleep(0.02)
        time.sleep(0.2)  # the app module's own imports done
        from fairdeck_server import fair
        from fairdeck_server.dealing import dealer
        from fairdeck_server.edge import interceptors
        from fairdeck_server.policy import limits
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
        _threads()

    _rid_of: dict[int, str] = {}  # id(an operation's future) -> the victim's request id

    def _threads() -> None:
        """The storage threads' side of the victim's operations: when each batch that held one
        began on its thread and how long it took (``writer.batch`` / ``reader.batch`` steps,
        named with the batch's size), so that a slow storage step splits into waiting for the
        thread, the batch itself, and the way back through the event loop."""
        from fairdeck_server.observe import logging_setup
        from fairdeck_server.storage.sqlite import batches, handoff

        made = handoff.Op.__init__

        def op_init(self: object, fn: object, loop: object, fut: object, *args: object, **kw: object) -> None:
            made(self, fn, loop, fut, *args, **kw)  # type: ignore[arg-type]
            call = logging_setup.current_call()
            if call is not None and call.request_id.startswith("victim-"):
                _rid_of[id(fut)] = call.request_id

        handoff.Op.__init__ = op_init  # type: ignore[method-assign]

        def _name_of(op: object) -> str:  # whose, and what: the function (or its partial's)
            fn = getattr(op, "fn", None)
            fn = getattr(fn, "func", fn)
            return f"{getattr(op, 'whose', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}"

        def batch_timer(cls: type, name: str, label: str) -> None:
            inner = getattr(cls, name)
            before: list[tuple[str, float, float]] = []  # the batch before, on this thread

            def run(self: object, conn: object, batch: list) -> object:  # type: ignore[type-arg]
                mine = [_rid_of.pop(id(op.fut)) for op in batch if id(op.fut) in _rid_of]
                began, cpu = time.perf_counter(), time.thread_time()
                try:
                    return inner(self, conn, batch)
                finally:
                    took = round((time.perf_counter() - began) * 1000, 2)
                    used = round((time.thread_time() - cpu) * 1000, 2)
                    for rid in mine:
                        # The batch just before (what this one may have waited for), then this one.
                        _steps.setdefault(rid, []).extend(before)
                        _steps[rid].append((f"{label}[{len(batch)}]", round(began, 5), took))
                    what = ",".join(sorted({_name_of(op) for op in batch}))
                    before[:] = [(f"{label}.before[{len(batch)}](cpu {used}; {what})", round(began, 5), took)]

            setattr(cls, name, run)

        batch_timer(batches.SqliteWriter, "_run_batch", "writer.batch")
        if os.environ.get("FAIRDECK_PROBE_PHASES"):  # the writer batch's phases, as steps too
            mark = threading.local()

            def phase(name: str, label: str) -> None:
                inner = getattr(batches.SqliteWriter, name)

                def run(self: object, *args: object) -> object:
                    began, cpu = time.perf_counter(), time.thread_time()
                    try:
                        return inner(self, *args)
                    finally:
                        for rid in getattr(mark, "rids", ()):
                            took = round((time.perf_counter() - began) * 1000, 2)
                            used = round((time.thread_time() - cpu) * 1000, 2)
                            _steps.setdefault(rid, []).append((f"{label}(cpu {used})", round(began, 5), took))

                setattr(batches.SqliteWriter, name, run)

            phase("_create_together", "w.inserts")
            phase("_count", "w.count(after COMMIT)")
            inner_batch = batches.SqliteWriter._run_batch

            def run_batch(self: object, conn: object, batch: list) -> object:  # type: ignore[type-arg]
                mark.rids = [_rid_of[id(op.fut)] for op in batch if id(op.fut) in _rid_of]
                try:
                    return inner_batch(self, conn, batch)
                finally:
                    mark.rids = []

            batches.SqliteWriter._run_batch = run_batch  # type: ignore[method-assign]
        batch_timer(batches.SqliteReader, "_read", "reader.batch")

    threading.Thread(target=_patch, daemon=True).start()

    def _write() -> None:
        path = os.path.join(os.environ["FAIRDECK_PROBE_DIR"], f"dealer-{os.getpid()}.json")
        heap: dict[str, int] = {}
        if os.environ.get("FAIRDECK_PROBE_HEAP"):  # the tracked objects at exit, by type
            import collections

            counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
            heap = {"total": sum(counts.values()), **dict(counts.most_common(25))}
        with open(path, "w") as out:
            json.dump({"gc": _gc, "steps": _steps, "heap": heap}, out)

    atexit.register(_write)
