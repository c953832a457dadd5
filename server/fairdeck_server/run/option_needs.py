"""What options need of each other: checked by ``config.load`` once each value passed its own checks.

An option given (a flag, the environment or the config file: never a default) where the others
make it do nothing is refused, naming it, where it came from, and the fix: ``--codeal-pool 4``
without ``--codealer`` once started a dealer that pooled nothing and said nothing. The rules:
docs/operations.md ("Configuration").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

CODEALT = ("codealer_key", "codealer_token", "codeal_default", "codeal_pool", "replica_name")
"""Options that feed co-dealt dealing alone, which only ``codealer`` turns on."""


def problem(values: Mapping[str, Any], sources: Mapping[str, str], where: Callable[[str], str]) -> str | None:
    """What is wrong with how ``values`` go together, in one line that starts with the option's
    ``where`` (its flag, variable or file key and its source); None if nothing."""
    if values["rate_limit"] > 0 and values["rate_burst"] < 1:
        return f"{where('rate_burst')}: must be >= 1 while rate_limit is on (rate_limit 0 turns it off)"
    if values["witness_threshold"] > len(values["witnesses"]):
        named = len(values["witnesses"])
        return f"{where('witness_threshold')}: must be at most the {named} witnesses named with --witness"
    given = [name for name in CODEALT if sources[name] != "default"]
    if values["codealer"] is None and given:
        return (
            f"{where(given[0])}: is for co-dealt hands, which are off without --codealer: give --codealer "
            "HOST:PORT (with --codealer-key and --codealer-token), or drop it"
        )
    if values["db"] is None and "replica_name" in given:
        return (
            f"{where('replica_name')}: names this replica's claim of its co-dealt record on PostgreSQL, "
            "and SQLite has none: give --db URL too, or drop it"
        )
    return None
