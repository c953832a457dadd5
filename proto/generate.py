"""Regenerate the Python code for proto/fairdeck/v1 into client/fairdeck/v1.

Usage: python proto/generate.py [OUT_DIR]   (default: client/)

Runs grpc_tools.protoc with --python_out and --grpc_python_out, and
mypy-protobuf's plugins for typed stubs (.pyi) of both. The proto package
fairdeck.v1 equals the import path, so generated imports work untouched.
tests/test_generated.py regenerates into a temporary folder and fails on any
difference, so never edit the output by hand.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"


def generate(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(sys.executable).parent
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in (PROTO_DIR / "fairdeck").rglob("*.proto"))
    well_known = str(resources.files("grpc_tools") / "_proto")
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for package in {Path(p).parent for p in protos}:
        init = out_dir / package / "__init__.py"
        init.write_text('"""Generated code for the fairdeck.v1 contract (see proto/). Do not edit."""\n')


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "client")
