"""fairdeck_server.cli: the server's commands of the ``fairdeck`` console script.

``serve``, ``init`` and ``key`` (``serve_commands``), ``token`` and ``rotate-key`` (``token_commands``),
``tiles``, ``witness``, ``codealer``, and the read-only log sources of ``fairdeck audit --data/--db``
(``audit_sources``). The client's command line never imports this package by name: it finds
``COMMANDS`` and the audit sources through the entry point groups ``fairdeck.commands`` and
``fairdeck.audit_sources`` (pyproject.toml). Importing this package loads no command: ``COMMANDS``
names each one's module, imported only when that command runs, so ``fairdeck verify`` never loads the
dealer and ``fairdeck codealer serve`` never loads ``serve``'s. ``register`` adds them all at once
(what an install made before the table finds through the entry point).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["COMMANDS", "register"]

COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "key",
        "fairdeck_server.cli.serve_commands:register",
        "print the transparency log's verifier key (signed-note form)",
    ),
    (
        "init",
        "fairdeck_server.cli.serve_commands:register",
        "make new keys and a new database (a new log); never replaces anything",
    ),
    ("serve", "fairdeck_server.cli.serve_commands:register", "run the dealer (gRPC)"),
    ("token", "fairdeck_server.cli.token_commands:register", "create, list and revoke API tokens"),
    (
        "rotate-key",
        "fairdeck_server.cli.token_commands:register",
        "rotate the seed key or the log signing key",
    ),
    (
        "tiles",
        "fairdeck_server.cli.tiles_command:register",
        "publish the log as C2SP tlog-tiles (static files) in a directory",
    ),
    (
        "witness",
        "fairdeck_server.witness.command:register",
        "run a C2SP transparency-log witness (tlog-witness add-checkpoint, cosignature/v1)",
    ),
    (
        "codealer",
        "fairdeck_server.cli.codealer_command:register",
        "run a co-dealer: an independent key holder of co-dealt hands",
    ),
)
"""(name, ``"module:function"``, one-line help), in ``--help`` order; the function adds the command's
parser (and its siblings in that module). The client's ``fairdeck.cli.dispatch`` reads it."""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add serve, key, init, token, rotate-key, tiles, witness, codealer to the ``fairdeck`` CLI."""
    from fairdeck_server.cli import codealer_command, serve_commands, tiles_command, token_commands
    from fairdeck_server.witness import command as witness_command

    serve_commands.register(sub)
    token_commands.register(sub)
    tiles_command.register(sub)
    witness_command.register(sub)
    codealer_command.register(sub)
