"""Run the ``fairdeck`` command line with only what the image installs importable.

The image holds fairdeck plus the runtime dependencies pinned in
deploy/constraints.txt, not the test, stats or examples extras. The test
venv has all of them, so an import of, say, numpy on the serve path would pass
every test and still crash the container. Run as
``python tests/support/runtime_only.py ARGS...``: the same as ``fairdeck ARGS...``,
except that importing any module outside the standard library, fairdeck and
those distributions raises ImportError.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import re
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

CONSTRAINTS = Path(__file__).resolve().parents[2] / "deploy" / "constraints.txt"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_modules() -> set[str]:
    """Top-level modules of the distributions pinned for the image, and fairdeck's own."""
    pinned = set()
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pinned.add(_normal(line.split("==")[0]))
    modules = {"fairdeck", "fairdeck_server"}
    for module, dists in importlib.metadata.packages_distributions().items():
        if any(_normal(dist) in pinned for dist in dists):
            modules.add(module)
    return modules


class OnlyImageModules(importlib.abc.MetaPathFinder):
    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed | set(sys.stdlib_module_names) | set(sys.builtin_module_names)
        # Private stdlib modules (such as _sysconfigdata_*) are not in stdlib_module_names.
        stdlib = sysconfig.get_path("stdlib")
        self.stdlib_dirs = [stdlib, sysconfig.get_path("platstdlib"), f"{stdlib}/lib-dynload"]

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        top = fullname.partition(".")[0]
        if top in self.allowed or top.startswith("__editable__"):
            return None
        if importlib.machinery.PathFinder.find_spec(top, self.stdlib_dirs) is not None:
            self.allowed.add(top)
            return None
        raise ImportError(f"{top} is not installed in the image (deploy/constraints.txt)", name=fullname)


def main() -> int:
    sys.meta_path.insert(0, OnlyImageModules(image_modules()))
    from fairdeck.cli import main as fairdeck_main

    return fairdeck_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
