"""One error contract: ``fairdeck.wire.Reason`` and ``STATUS`` are the only list of
reasons. The SDK's exception table and the reason table of docs/api.md agree with
it, and the dealer refuses only through it: no module spells a reason as a string,
every refusal is a ``DealerError`` built in ``refusals.py``, and only the edge's status module's
``abort`` ends a call with an error."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grpc
from grpc_status import rpc_status

from fairdeck.client import exceptions
from fairdeck.wire import ERROR_DOMAIN, STATUS, STATUS_DETAILS_KEY, Reason
from fairdeck_server import refusals

ROOT = Path(__file__).resolve().parent.parent.parent
SERVER = ROOT / "server" / "fairdeck_server"
CLIENT = ROOT / "client" / "fairdeck"
CONTRACT = CLIENT / "wire.py"


def test_every_reason_has_a_status_code() -> None:
    assert set(STATUS) == set(Reason)
    assert all(status in grpc.StatusCode.__members__ for status in STATUS.values())
    assert all(reason.value == reason.name for reason in Reason)


def test_the_details_key_is_the_one_grpcio_status_reads() -> None:
    assert STATUS_DETAILS_KEY == rpc_status.GRPC_DETAILS_METADATA_KEY
    assert ERROR_DOMAIN == "fairdeck.dev"


def test_the_sdk_has_a_class_for_every_reason_and_no_other() -> None:
    assert set(exceptions.BY_REASON) == set(Reason)
    for reason, cls in exceptions.BY_REASON.items():
        code = grpc.StatusCode[STATUS[reason]]
        # A reason's class is its code's class or a subclass of it, except the log's
        # NOT_FOUND, which is no HandNotFound (a hand and a log entry are not the same thing).
        assert issubclass(cls, exceptions.BY_CODE[code]) or cls is exceptions.NotInLog, reason


def test_a_dealer_error_takes_its_status_from_the_contract() -> None:
    for reason in Reason:
        assert refusals.DealerError(reason, "m").status.name == STATUS[reason]


def documented_reasons() -> list[tuple[str, str, str]]:
    """(status, reason, SDK class) for each reason in docs/api.md's Errors table."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.startswith("|") or set(cells[0]) <= {"-", " "} or cells[0] == "status":
            continue
        for reason in re.findall(r"`([A-Z][A-Z_]+)`", cells[1]):
            rows.append((cells[0], reason, cells[3].strip("`")))
    return rows


def test_the_docs_table_lists_every_reason_once_with_its_status_and_sdk_class() -> None:
    rows = documented_reasons()
    assert len(rows) > 20, "the table was found"
    reasons = [reason for _, reason, _ in rows]
    assert sorted(reasons) == sorted(Reason)  # each once, none outside the contract
    for status, reason, cls in rows:
        assert (status, cls) == (STATUS[Reason(reason)], exceptions.BY_REASON[reason].__name__), reason


def modules(*packages: Path) -> list[Path]:
    return [p for package in packages for p in sorted(package.rglob("*.py")) if "v1" not in p.parts]


def test_no_module_spells_a_reason_but_the_contract() -> None:
    """A reason is written once, in fairdeck.wire; everywhere else it is ``Reason.X``."""
    names = {reason.value for reason in Reason}
    found = []
    for path in modules(SERVER, CLIENT):
        if path == CONTRACT:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []


def calls(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every call of a plain or dotted name in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            out.append((node.lineno, name))
    return out


def test_every_refusal_is_a_dealer_error_built_by_a_named_constructor() -> None:
    built = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in modules(SERVER)
        if path.name != "refusals.py"
        for line, name in calls(path)
        if name == "DealerError"
    ]
    assert built == []
    # And no refusal type of its own beside it (auth had one, Refused).
    for path in modules(SERVER):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and path.name != "refusals.py":
                assert node.name not in ("Refused", "Refusal"), f"{path}: class {node.name}"


def test_only_the_edge_status_module_ends_a_call_with_an_error() -> None:
    """Interceptors and servicers refuse through edge/status.py's abort, which writes the
    status, the ErrorInfo and the RetryInfo the same way for every refusal."""
    aborting = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in modules(SERVER)
        for line, name in calls(path)
        if name in ("abort", "abort_with_status", "set_code", "set_trailing_metadata")
        and path.relative_to(SERVER).as_posix() != "edge/status.py"
    ]
    assert all(entry.endswith(": abort") for entry in aborting), aborting
    for path in modules(SERVER):
        if path.relative_to(SERVER).as_posix() == "edge/status.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                assert node.func.attr not in ("abort", "abort_with_status", "set_code"), (
                    f"{path.relative_to(ROOT)}:{node.lineno}: context.{node.func.attr}; use edge.status.abort"
                )
