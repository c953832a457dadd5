"""The package's layers are import rules, checked here beside the lint and type checks.

- ``fairdeck`` never imports ``fairdeck_server`` (the client is installable and
  usable without the dealer; the server's commands come by entry point).
- ``fairdeck.core`` and ``fairdeck.log`` import no grpc and no protobuf: a
  verifier or an auditor needs only the standard library and ``cryptography``.
- ``fairdeck.codeal`` (co-dealt decks) imports only what ``core`` may, plus ``pysodium``
  (libsodium), ``fairdeck.core`` and ``fairdeck.log`` (which imports no more than core: the
  co-dealt proof's receipts are the log's own); nothing else loads it, so the ordinary mode
  and its verifier never need libsodium.
- ``fairdeck verify`` and ``fairdeck replay`` do not load the dealer, prometheus_client or
  grpc.

Each rule is checked twice: statically, on every import statement of the
source (so a lazy import inside a function is caught too), and at run time, in
a fresh interpreter (so an import through a third module is caught too).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck import DeckSpec, deal_local, server_seed_length
from tests.support.cli_modules import loaded_by

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "client" / "fairdeck"

# Top-level modules that are the transport and its wire format.
RPC_STACK = ("grpc", "grpc_health", "grpc_reflection", "grpc_status", "google")
# What the dealer loads and a verifier must not need.
SERVER_STACK = ("fairdeck_server", "prometheus_client", "grpc_reflection.v1alpha", "psycopg")


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in a file, including those inside functions."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.ImportFrom):  # relative: resolve against the file's package
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts[: -node.level]
            yield node.lineno, ".".join([*parts, *(node.module or "").split(".")]).rstrip(".")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def sources(*subpackages: str) -> list[Path]:
    roots = [PACKAGE / s for s in subpackages] if subpackages else [PACKAGE]
    return sorted(p for r in roots for p in r.rglob("*.py"))


def test_the_client_package_never_imports_the_server() -> None:
    bad = [
        f"{p.relative_to(ROOT)}:{line}: {m}"
        for p in sources()
        for line, m in imports(p)
        if under(m, ("fairdeck_server",))
    ]
    assert bad == []


@pytest.mark.parametrize("layer", ["core", "log"])
def test_core_and_log_import_only_the_standard_library_cryptography_and_lower_layers(layer: str) -> None:
    allowed = {"core": ("fairdeck.core",), "log": ("fairdeck.core", "fairdeck.log")}[layer]
    expected = {"core": {"verify.py", "derivation.py", "transcript.py"}, "log": {"merkle.py", "receipts.py"}}
    assert expected[layer] <= {p.name for p in sources(layer)}  # the rule is about real files
    bad = []
    for path in sources(layer):
        for line, m in imports(path):
            top = m.split(".")[0]
            if top == "__future__" or top in sys.stdlib_module_names or top == "cryptography":
                continue
            if not under(m, allowed):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {m}")
    assert bad == []


def test_codeal_imports_only_the_standard_library_cryptography_libsodium_core_and_log() -> None:
    assert {"group.py", "proof.py", "verify.py"} <= {p.name for p in sources("codeal")}
    bad = []
    for path in sources("codeal"):
        for line, m in imports(path):
            top = m.split(".")[0]
            if top == "__future__" or top in sys.stdlib_module_names or top in ("cryptography", "pysodium"):
                continue
            if not under(m, ("fairdeck.core", "fairdeck.log", "fairdeck.codeal")):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {m}")
    assert bad == []


def test_the_ordinary_mode_does_not_load_libsodium() -> None:
    modules = loaded_after("import fairdeck, fairdeck.core, fairdeck.log, fairdeck.client")
    assert sorted(m for m in modules if under(m, ("pysodium", "fairdeck.codeal"))) == []


def test_a_dealer_without_a_codealer_does_not_load_libsodium() -> None:
    """The dealer, its servicers and the whole command line (codealer included) start without the
    co-dealt code: a machine without libsodium still runs the ordinary mode."""
    code = (
        "import fairdeck_server.run.app, fairdeck_server.cli\nimport fairdeck.cli\n"
        "fairdeck.cli.build_parser()"
    )
    modules = loaded_after(code)
    assert "fairdeck_server.edge.codeal_edge" in modules
    assert sorted(m for m in modules if under(m, ("pysodium", "fairdeck.codeal"))) == []


def loaded_after(code: str, *args: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code`` (which may use sys.argv)."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_core_and_log_load_no_grpc_and_no_protobuf() -> None:
    modules = loaded_after("import fairdeck, fairdeck.core, fairdeck.log")
    assert {"fairdeck.core.verify", "fairdeck.log.receipts", "fairdeck.log.audit"} <= modules
    assert sorted(m for m in modules if under(m, (*RPC_STACK, "fairdeck.client", "fairdeck_server"))) == []


def test_the_sdk_does_not_load_the_server() -> None:
    modules = loaded_after("from fairdeck.client import *")  # every name of the SDK, loaded
    assert {"fairdeck.client.dealer_client", "fairdeck.client.audit_client"} <= modules
    assert sorted(m for m in modules if under(m, SERVER_STACK)) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "--help"],
        ["verify", "{transcript}"],
        ["verify", "{proof}", "--key", "{key}"],
        [
            "replay",
            "--hand-id",
            "h",
            "--server-seed",
            "00" * server_seed_length(DeckSpec.parse("standard")),
            "--client-seed",
            "a",
        ],
    ],
    ids=["verify --help", "verify TRANSCRIPT", "verify PROOF", "replay"],
)
def test_verify_and_replay_load_neither_the_dealer_nor_grpc(argv: list[str], tmp_path: Path) -> None:
    transcript = tmp_path / "hand.json"
    transcript.write_text(deal_local("standard", "boundary-1", ["alice"]).transcript.to_json())
    vectors = json.loads((ROOT / "docs" / "vectors" / "fairdeck-hand-proofs-v3.json").read_text())
    case = vectors["valid"][0]
    proof = tmp_path / "proof.json"
    proof.write_text(case["text"])
    key = vectors["keys"][case["keys"][0]]
    modules = loaded_by(*(a.format(transcript=transcript, proof=proof, key=key) for a in argv))
    assert "fairdeck.cli.commands" in modules
    # grpc's own __init__ imports the bare grpc_reflection package (an alias for
    # grpc.reflection); the reflection service is grpc_reflection.v1alpha.
    assert sorted(m for m in modules if under(m, SERVER_STACK)) == []
    # A verifier needs no channel: the SDK's names load on first use (fairdeck.client).
    assert sorted(m for m in modules if under(m, ("grpc", "grpc_status", "grpc_health"))) == []


def test_the_server_commands_are_still_offered() -> None:
    """The other side of the split: the console script still has serve, key, token and rotate-key."""
    out = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for command in ("serve", "key", "token", "rotate-key", "verify", "audit"):
        assert f"    {command} " in out.stdout or f"    {command}\n" in out.stdout, command


def test_every_name_the_sdk_exports_loads_from_its_home() -> None:
    """fairdeck.client's names load on first use: each one named in __all__ has a home module
    that defines it, and nothing else is offered."""
    import fairdeck.client as sdk

    assert sorted(sdk._HOMES) == sorted(sdk.__all__)
    modules = {p.stem for p in (PACKAGE / "client").glob("*.py") if p.stem != "__init__"}
    assert sorted(sdk._SUBMODULES) == sorted(modules)
    for name in sdk.__all__:
        assert getattr(sdk, name).__module__.startswith("fairdeck.client."), name
    with pytest.raises(AttributeError, match="no attribute 'DealerServer'"):
        sdk.DealerServer


def test_the_sdks_modules_are_still_attributes_of_the_package() -> None:
    """As after an eager import: ``fairdeck.client.exceptions.BY_REASON`` (the docs name it so),
    in a fresh interpreter where nothing imported the module first."""
    modules = loaded_after(
        "import fairdeck.client\n"
        "assert fairdeck.client.exceptions.BY_REASON\n"
        "assert fairdeck.client.models.HandState\n"
        "assert fairdeck.client.local_files.MAX_BYTES"
    )
    assert "fairdeck.client.exceptions" in modules
