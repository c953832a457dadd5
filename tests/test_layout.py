"""The package layout as an API: each layer's ``__all__`` is pinned, every
import the README, the docs and the examples show still works, and no two
public classes share a name (one class per concept in each layer)."""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import libsodium_left_out

ROOT = Path(__file__).resolve().parent.parent

# Pinned on purpose: adding or removing a public name is an API change; update the list with it.
# (fairdeck.__all__ itself is pinned in tests/client/test_client_surface.py.)
PINNED = {
    "fairdeck.core": [
        "CURRENT_VERSION",
        "MAX_CLIENT_SEEDS",
        "MAX_CLIENT_SEED_BYTES",
        "MAX_HAND_ID_LENGTH",
        "SPEC_NAMES",
        "SUPPORTED_VERSIONS",
        "Card",
        "CardError",
        "DeckSpec",
        "DeckSpecError",
        "InvalidInput",
        "LocalHand",
        "SealedHand",
        "SeedError",
        "Transcript",
        "UnknownVersion",
        "VerificationError",
        "commit",
        "deal_local",
        "derive_deck",
        "normalize_client_seed",
        "open_local",
        "reveal_local",
        "server_seed_length",
        "verify",
    ],
    "fairdeck.codeal": [
        "CodealError",
        "CodealHand",
        "DealtPosition",
        "codeal_local",
        "final_order",
        "verify_hand",
    ],
    "fairdeck.log": [
        "AuditReport",
        "Auditor",
        "Checkpoint",
        "CheckpointError",
        "CommitEntry",
        "EntryError",
        "Finding",
        "InclusionProof",
        "NoteError",
        "ProofError",
        "RevealEntry",
        "Signer",
        "Verifier",
        "WitnessPolicy",
        "decode",
        "open_checkpoint",
        "sign_checkpoint",
    ],
    "fairdeck.client": [
        "AsyncAuditClient",
        "AsyncDealerClient",
        "AuditClient",
        "ClientConfig",
        "Deal",
        "DealerClient",
        "DealtHand",
        "Draw",
        "FairdeckError",
        "Hand",
        "HandState",
        "LogReceipt",
        "PlayerSeed",
        "SeedOrderError",
        "SeedRound",
        "tls_credentials",
    ],
    "fairdeck.cli": ["build_parser", "main"],
    "fairdeck.stats": [],
    "fairdeck.wire": [
        "AUTHORIZATION",
        "ERROR_DOMAIN",
        "STATUS",
        "STATUS_DETAILS_KEY",
        "Reason",
        "is_loopback",
    ],
    "fairdeck_server.cli": ["COMMANDS", "register"],
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_each_layer_pins_its_all_and_says_what_it_owns(name: str) -> None:
    if name == "fairdeck.codeal" and libsodium_left_out():
        pytest.skip("libsodium is not installed (the co-dealt mode; see the run's last lines)")
    module = importlib.import_module(name)
    assert module.__all__ == PINNED[name]
    for attr in module.__all__:
        assert getattr(module, attr) is not None, attr
    doc = module.__doc__ or ""
    assert len(doc) > 200 or name in ("fairdeck.wire",), "a paragraph on what it owns and may import"
    assert "import" in doc


# Dotted names in the docs that are not Python: the error domain, the database file, a logger.
NOT_PYTHON = {"fairdeck.dev", "fairdeck.db", "fairdeck.access"}


def documented_imports() -> list[tuple[str, str, str]]:
    """(where, module, name) for every ``from fairdeck... import ...`` and every
    dotted ``fairdeck.x.y`` name in backticks in the README, docs and examples."""
    found: list[tuple[str, str, str]] = []
    files = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "examples").rglob("*")),
    ]
    for path in files:
        if path.suffix not in (".md", ".py"):
            continue
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        for m in re.finditer(r"^\s*(?:>>> )?from (fairdeck[\w.]*) import (\([^)]*\)|[^\n#]+)", text, re.M):
            names = m.group(2).strip("()").replace("\n", " ")
            for n in filter(None, (x.strip().split(" as ")[0] for x in names.split(","))):
                found.append((where, m.group(1), n))
        if path.suffix == ".md":
            for m in re.finditer(r"`(fairdeck(?:_server)?(?:\.\w+)+)`", text):
                if not m.group(1).startswith("fairdeck.v1.") and m.group(1) not in NOT_PYTHON:
                    found.append((where, m.group(1), ""))
    return found


def resolve(dotted: str) -> object:
    """Import the longest module prefix of ``dotted`` and get the rest as attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_the_docs_show_some_imports() -> None:
    """The check below is about real text: it found the README's SDK imports."""
    shown = {(m, n) for _, m, n in documented_imports()}
    assert ("fairdeck.client", "DealerClient") in shown
    assert ("fairdeck.client", "tls_credentials") in shown


@pytest.mark.parametrize("where, module, name", documented_imports(), ids=lambda v: str(v))
def test_every_import_the_docs_show_works(where: str, module: str, name: str) -> None:
    if module.startswith("fairdeck.codeal") and libsodium_left_out():
        pytest.skip("libsodium is not installed (the co-dealt mode; see the run's last lines)")
    resolve(f"{module}.{name}" if name else module)


def test_no_two_public_classes_share_a_name() -> None:
    """One class per concept in each layer (DealtHand, HandState, Checkpoint and Draw were defined twice)."""
    defined: dict[str, list[str]] = defaultdict(list)
    for package in (ROOT / "client" / "fairdeck", ROOT / "server" / "fairdeck_server"):
        for path in sorted(package.rglob("*.py")):
            if "v1" in path.relative_to(package).parts:
                continue  # generated from the proto, which has its own namespace
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    defined[node.name].append(str(path.relative_to(ROOT)))
    assert {name: where for name, where in defined.items() if len(where) > 1} == {}
