"""The lab tests' one requirement beyond the package: Debian's dieharder.

Tests that need it skip with one line where it is missing, and fail instead when
CI_REQUIRE_DIEHARDER=1 (as .ci/run sets, after installing it).
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE_DIEHARDER = "CI_REQUIRE_DIEHARDER"


@pytest.fixture(scope="session")
def dieharder() -> str:
    found = shutil.which("dieharder")
    if found is None:
        reason = "dieharder is not installed (apt-get install dieharder)"
        if os.environ.get(REQUIRE_DIEHARDER) == "1":
            pytest.fail(f"{REQUIRE_DIEHARDER}=1 but {reason}")
        pytest.skip(reason)
    return found
