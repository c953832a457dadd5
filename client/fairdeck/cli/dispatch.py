"""The ``fairdeck`` console script's entry: which module owns each command, and its one-line help.

``COMMANDS`` (and the server's table, found through the ``fairdeck.commands`` entry point group) name
each command's module as ``"module:function"``, the function adding its parser (and its siblings'
in that module). ``main`` imports only the module of the command that runs; every other command is
a parser with its help and nothing else, so ``--help`` and the refusal of an unknown command read as
before while ``fairdeck verify`` never loads grpc and ``fairdeck serve`` never loads the auditor.
``build_parser`` builds every command in full (tests read options from it). Invariant: a table's
help is the help its module registers, and every target resolves (tests/cli checks both).
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeAlias

from fairdeck.core.errors import InvalidInput

Handler = Callable[[argparse.Namespace], int]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class Command(NamedTuple):
    name: str
    target: str
    """``"module:function"``: the function, given the subparsers, adds this command's parser."""
    help: str
    """The one line ``fairdeck --help`` shows, the same as the module's own."""


COMMANDS: tuple[Command, ...] = (
    Command("replay", "fairdeck.cli.commands:register", "re-derive a deck from revealed seeds"),
    Command(
        "verify",
        "fairdeck.cli.commands:register",
        "verify a revealed hand's transcript, or a hand proof (JSON)",
    ),
    Command(
        "deal",
        "fairdeck.cli.deal_command:register",
        "deal a demo hold'em hand from a running dealer and verify it",
    ),
    Command(
        "hand", "fairdeck.cli.hand_command:register", "a hand's one-file proof, for a player to check offline"
    ),
    Command("audit", "fairdeck.cli.audit_command:register", "audit a dealer's transparency log"),
    Command(
        "health", "fairdeck.cli.health_command:register", "check a server's gRPC health (exit 0 when SERVING)"
    ),
    Command(
        "stats",
        "fairdeck.cli.stats_command:register",
        "deal many decks, test them and the known-broken shuffles, write an HTML report",
    ),
    Command(
        "lab",
        "fairdeck.cli.lab_command:register",
        "the certification kit: collect raw, scaled and final outputs; run the standard batteries",
    ),
    Command(
        "verifier-page",
        "fairdeck.cli.verifier_page_command:register",
        "write the browser verifier page (one HTML file that checks hand proofs offline)",
    ),
)
"""The client's own commands, in ``--help`` order; the server's follow them."""


def resolve(target: str) -> Callable[[Subparsers], None]:
    """The function a ``"module:function"`` target names (its module imported now)."""
    module, _, function = target.partition(":")
    register: Callable[[Subparsers], None] = getattr(importlib.import_module(module), function)
    return register


def server_tables() -> list[Sequence[tuple[str, str, str]] | Callable[[Subparsers], None]]:
    """What the ``fairdeck.commands`` entry points give: a table of (name, target, help), or, from an
    install made before tables, a function that registers its commands at once.

    Found by entry point rather than by importing fairdeck_server: the client package never names the
    server. One that cannot be loaded is said on stderr; the client's commands still work.
    """
    from importlib.metadata import entry_points

    found: list[Sequence[tuple[str, str, str]] | Callable[[Subparsers], None]] = []
    for ep in entry_points(group="fairdeck.commands"):
        try:
            found.append(ep.load())
        except ImportError as e:
            print(f"fairdeck: the commands of {ep.value} are unavailable: {e}", file=sys.stderr)
    return found


def _build(full: Callable[[str], bool], *, server: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairdeck", description="Provably fair card decks.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    tables: list[Any] = [COMMANDS, *(server_tables() if server else ())]
    for table in tables:
        if callable(table):  # an install made before tables: its commands, all in full
            table(sub)
            continue
        wanted = {target for name, target, _ in table if full(name)}
        registered: set[str] = set()
        for name, target, help in table:
            if target not in wanted:
                sub.add_parser(name, help=help)
            elif target not in registered:
                registered.add(target)
                resolve(target)(sub)
    return parser


def build_parser(*, server: bool = True) -> argparse.ArgumentParser:
    """The whole command line, every command in full; ``server=False`` leaves out the server's
    commands (and does not load it)."""
    return _build(lambda name: True, server=server)


def _command_named(argv: Sequence[str]) -> str | None:
    """The command argv asks for: its first word that is not an option (the top level takes none but
    ``-h``), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The command line as ``argv`` needs it: the command named in full, the others by name and help.
    A client command loads no server table at all."""
    named = _command_named(argv)
    client = any(c.name == named for c in COMMANDS)
    return _build(lambda name: name == named, server=not client)


def _printable_stdout() -> None:
    """A line that holds a character the terminal's encoding cannot write (a policy file's name is
    opaque octets: one that is not UTF-8 is a lone surrogate) is written escaped, never a traceback.
    Only a strict stream is changed: under the C locale Python writes such octets back as they were."""
    stream = sys.stdout
    if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
        stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _printable_stdout()
    args = parser_for(argv).parse_args(argv)
    args.argv = argv  # what `serve --processes N` runs again in each of its processes
    handler: Handler = args.handler
    try:
        status = handler(args)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is handled below
        return status
    except InvalidInput as e:
        print(f"fairdeck {args.command}: {e}", file=sys.stderr)
        return 2
    except UnicodeEncodeError:
        # An argument that is not UTF-8 (Python holds its bytes as lone surrogates) reached a text
        # that must be UTF-8: a --target, a --token, a seed. File names may be any bytes; text not.
        print(f"fairdeck {args.command}: an argument is not UTF-8 text; give it as UTF-8", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`fairdeck deal | head -1`): stop quietly, as Unix tools do. Point
        # stdout at /dev/null so the interpreter's last flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
