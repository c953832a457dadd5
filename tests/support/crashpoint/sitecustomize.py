"""Loaded at interpreter start when this directory is on PYTHONPATH: kill the process (as kill -9
would: ``os._exit``, nothing flushed, no cleanup) at the Nth call of one function, named in
``FAIRDECK_TEST_CRASH`` as ``module:attribute.path:N``. tests/publishing/test_crash_points.py uses
it to stop a dealer at each step of publishing a checkpoint with its tiles."""

from __future__ import annotations

import importlib
import os
from typing import Any

_spec = os.environ.get("FAIRDECK_TEST_CRASH")
if _spec:
    _module, _path, _count = _spec.split(":")
    _owner: Any = importlib.import_module(_module)
    _parts = _path.split(".")
    for _part in _parts[:-1]:
        _owner = getattr(_owner, _part)
    _original = getattr(_owner, _parts[-1])
    _calls = [0]

    def _crash(*args: Any, **kwargs: Any) -> Any:
        _calls[0] += 1
        if _calls[0] >= int(_count):
            os._exit(137)
        return _original(*args, **kwargs)

    setattr(_owner, _parts[-1], _crash)
