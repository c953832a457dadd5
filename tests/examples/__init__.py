"""Tests of examples/: the scripts import each other as top-level modules
(``python examples/holdem_pokerkit.py`` puts examples/ first on the path), so
the tests put examples/ on the path the same way."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))
