"""The generated code in client/fairdeck/v1 is exactly what proto/generate.py
makes from proto/ today: regenerate into a temporary folder and compare every
file byte for byte, with no file missing or extra on either side."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED_IN = ROOT / "client" / "fairdeck" / "v1"


def files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Nothing is written outside the package folder.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fairdeck"]
    assert sorted(p.name for p in (tmp_path / "fairdeck").iterdir()) == ["v1"]

    fresh, checked_in = files(tmp_path / "fairdeck" / "v1"), files(CHECKED_IN)
    assert fresh, "generate.py produced nothing"
    protos = sorted(p.stem for p in (ROOT / "proto" / "fairdeck" / "v1").glob("*.proto"))
    for stem in protos:  # every proto has its four outputs
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi"):
            assert stem + suffix in fresh
    missing, extra = sorted(set(fresh) - set(checked_in)), sorted(set(checked_in) - set(fresh))
    assert not missing and not extra, f"missing from client/fairdeck/v1: {missing}; stale there: {extra}"
    differ = sorted(name for name in fresh if fresh[name] != checked_in[name])
    assert not differ, f"client/fairdeck/v1 is stale; run `python proto/generate.py`: {differ}"
