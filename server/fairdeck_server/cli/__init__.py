"""fairdeck_server.cli: the server's commands of the ``fairdeck`` console script.

``serve`` and ``key`` (``commands``), ``token`` and ``rotate-key`` (``token_commands``), and the
read-only log sources of ``fairdeck audit --data/--db`` (``audit_sources``). The client's command line
never imports this package by name: it finds ``register`` and the audit sources through the entry
point groups ``fairdeck.commands`` and ``fairdeck.audit_sources`` (pyproject.toml), and loads them only
when a server command, ``--data``/``--db`` or the top-level ``--help`` asks for them, so ``fairdeck
verify`` never loads the dealer.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add serve, key, init, token, rotate-key, tiles, witness, codealer to the ``fairdeck`` CLI."""
    from fairdeck_server.cli import codealer_command, serve_commands, tiles_command, token_commands
    from fairdeck_server.witness import command as witness_command

    serve_commands.register(sub)
    token_commands.register(sub)
    tiles_command.register(sub)
    witness_command.register(sub)
    codealer_command.register(sub)
