"""What the packages ship beside their code: the license text they name. The Python wheel and
the npm tarball (tests/web/test_package.py) each carry the Apache-2.0 text."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_the_license_it_names(tmp_path: Path) -> None:
    """pyproject.toml said Apache-2.0 and the repository had no LICENSE: the wheel carried no
    license text, which the license asks to go with every copy (section 4(a))."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
         "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("fairdeck-*.whl")
    with zipfile.ZipFile(wheel) as z:
        licenses = [n for n in z.namelist() if "/licenses/" in n]
        assert [n.rsplit("/", 1)[1] for n in licenses] == ["LICENSE"], z.namelist()[-10:]
        text = z.read(licenses[0]).decode()
        metadata = z.read(next(n for n in z.namelist() if n.endswith("/METADATA"))).decode()
    assert text == (ROOT / "client" / "web" / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "License-Expression: Apache-2.0" in metadata
