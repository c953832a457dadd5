"""The repository's Python source as the house tests read it: its root, the files git tracks or
would track (the generated ``fairdeck.v1`` aside), and a syntax tree read robustly."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def parse(path: Path) -> ast.Module:
    """``path``'s syntax tree. CPython 3.11 keeps the AST builder's recursion count per
    interpreter, not per thread: a traceback formatted in another thread at the same moment (3.11's
    traceback module parses source lines for its carets) can make ``ast.parse`` raise SystemError
    "AST constructor recursion depth mismatch" (seen once in a full CI run, beside a storage test's
    leaked tasks logging tracebacks). That error says nothing of the file: parse it again."""
    try:
        return ast.parse(path.read_text(), filename=str(path))
    except SystemError as e:
        if "recursion depth mismatch" not in str(e):
            raise
        return ast.parse(path.read_text(), filename=str(path))


def python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / f for f in listed if not f.startswith("client/fairdeck/v1/") and (ROOT / f).is_file()]
