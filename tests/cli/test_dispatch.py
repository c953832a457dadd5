"""The console script loads only the command that runs (fairdeck.cli.dispatch): ``--help`` lists every
command from the tables alone, a command imports its own module and not its neighbours', and every
table entry names a function that exists, with the help its module registers."""

from __future__ import annotations

import argparse

import pytest

from fairdeck.cli import build_parser
from fairdeck.cli.dispatch import COMMANDS, parser_for, resolve, server_tables
from tests.support.cli_modules import loaded_by

COMMAND_MODULES = (
    "fairdeck.cli.commands",
    "fairdeck.cli.deal_command",
    "fairdeck.cli.hand_command",
    "fairdeck.cli.audit_command",
    "fairdeck.cli.health_command",
    "fairdeck.cli.stats_command",
    "fairdeck.cli.lab_command",
    "fairdeck.cli.verifier_page_command",
    "fairdeck_server.cli.serve_commands",
    "fairdeck_server.cli.token_commands",
    "fairdeck_server.cli.tiles_command",
    "fairdeck_server.witness.command",
    "fairdeck_server.cli.codealer_command",
)


def table() -> list[tuple[str, str, str]]:
    """Every command of both tables, in ``--help`` order."""
    rows: list[tuple[str, str, str]] = list(COMMANDS)
    for found in server_tables():
        assert not callable(found), "the server's entry point should name its table (reinstall?)"
        rows.extend(found)
    return rows


@pytest.mark.parametrize(
    ("argv", "own"),
    [
        (["--help"], set()),
        (["verify", "--help"], {"fairdeck.cli.commands"}),
        (["serve", "--help"], {"fairdeck_server.cli.serve_commands"}),
        (["codealer", "--help"], {"fairdeck_server.cli.codealer_command"}),
        (["witness", "--help"], {"fairdeck_server.witness.command"}),
    ],
    ids=["--help", "verify", "serve", "codealer", "witness"],
)
def test_a_command_loads_its_own_module_and_no_other_commands(argv: list[str], own: set[str]) -> None:
    modules = loaded_by(*argv)
    assert own <= modules
    assert sorted(m for m in modules & set(COMMAND_MODULES) if m not in own) == []


def test_help_and_verify_load_no_grpc() -> None:
    """Before the table, ``fairdeck --help`` and ``fairdeck verify`` imported grpc (through the audit
    command's SDK) and ``--help`` every server command's module, the dealer's included."""
    tables = {"fairdeck_server", "fairdeck_server.cli"}  # the server's table, for --help to list
    for argv in (["--help"], ["verify", "--help"]):
        modules = loaded_by(*argv) - tables
        assert sorted(m for m in modules if m.split(".")[0] in ("grpc", "fairdeck_server")) == [], argv


def test_codealer_does_not_load_the_dealer() -> None:
    modules = loaded_by("codealer", "--help")
    assert "fairdeck_server.run.app" not in modules
    assert "fairdeck.client.audit_client" not in modules


def test_every_table_entry_resolves_to_its_module_s_parser_with_the_same_help() -> None:
    """A typo in a target, or a help line that drifted from its module's, fails here, not when a
    user runs the command."""
    rows = table()
    assert len({name for name, _, _ in rows}) == len(rows)
    for _, target, _ in rows:
        assert callable(resolve(target)), target
    full = build_parser()
    (sub,) = [a for a in full._actions if isinstance(a, argparse._SubParsersAction)]
    registered = [(a.dest, a.help) for a in sub._choices_actions]
    assert registered == [(name, help) for name, _, help in rows]
    modules = {target.split(":")[0] for _, target, _ in rows}
    assert modules == set(COMMAND_MODULES)  # each command module is in this file's list too


@pytest.mark.parametrize("argv", [[], ["--help"], ["bogus"], ["serve", "--help"]])
def test_the_lazy_parser_reads_as_the_full_one(argv: list[str]) -> None:
    """What ``--help`` lists, and the choices an unknown command is told, come from the tables alone
    and read exactly as the full parser's."""
    assert parser_for(argv).format_help() == build_parser().format_help()
    assert parser_for(argv).format_usage() == build_parser().format_usage()
