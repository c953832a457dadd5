"""The environment a test gives the processes it starts."""

from __future__ import annotations

import os


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without FAIRDECK_* variables (they would override the flags a test gives,
    and ``$FAIRDECK_SEED_KEY`` would replace the key file), unbuffered, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRDECK_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env
