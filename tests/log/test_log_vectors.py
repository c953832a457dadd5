"""Known-answer vectors of docs/log-format.md (docs/vectors/fairdeck-log-v1.json), both ways.

Every vector goes through the ``fairdeck`` package (logentry, merkle,
checkpoint, note, receipts) and through ``tests/core/log_reference``, which
was written from docs/ alone (a hand-written JSON reader, RFC 9162's recursive
definitions, Ed25519 from ``cryptography``). A reader re-implementing entry
parsing or receipt checking from the docs gets these answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fairdeck.core.decks import DeckSpec
from fairdeck.core.errors import VerificationError
from fairdeck.log import merkle
from fairdeck.log.checkpoint import CheckpointError, open_checkpoint
from fairdeck.log.logentry import CommitEntry, EntryError, RevealEntry, decode
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import InclusionProof
from tests.support import log_reference as logref
from tests.support import spec_reference as ref

ROOT = Path(__file__).resolve().parents[2]
LOG: dict[str, Any] = json.loads(
    (ROOT / "docs" / "vectors" / "fairdeck-log-v1.json").read_text(encoding="ascii")
)
HANDS = {
    v["name"]: v for v in json.loads((ROOT / "docs" / "vectors" / "fairdeck-v1.json").read_text())["valid"]
}
VKEY: str = LOG["key"]["verifier_key"]
VERIFIER = Verifier.parse(VKEY)
ORIGIN: str = LOG["key"]["origin"]
ENTRIES = [bytes.fromhex(e["entry"]) for e in LOG["entries"]]


def _id(vector: dict[str, Any]) -> str:
    if "name" in vector:
        return str(vector["name"])
    return "-".join(f"{k}{v}" for k, v in vector.items() if isinstance(v, int))


def cases(key: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("vector", LOG[key], ids=[_id(v) for v in LOG[key]])


# Entries and leaves


@cases("entries")
def test_entry_fields_and_leaf_hash_through_package(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["entry"])
    entry = decode(raw)
    assert entry.encode() == raw
    assert merkle.leaf_hash(raw).hex() == vector["leaf_hash"]
    assert (entry.time_ms, entry.hand_id) == (vector["time_ms"], vector["hand_id"])
    if vector["type"] == "commit":
        assert isinstance(entry, CommitEntry)
        assert (entry.version, entry.deck, entry.commitment.hex()) == (
            vector["version"],
            vector["deck"],
            vector["commitment"],
        )
    else:
        assert isinstance(entry, RevealEntry)
        assert entry.outcome == vector["outcome"]
        assert entry.server_seed.hex() == vector["server_seed"]
        assert [c.hex() for c in entry.client_seeds] == vector["client_seeds"]
        assert entry.deck_digest.hex() == vector["deck_digest"]


@cases("entries")
def test_entry_fields_and_leaf_hash_through_spec_reference(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["entry"])
    fields = logref.parse_entry(raw)
    assert fields is not None
    assert logref.leaf_hash(raw).hex() == vector["leaf_hash"]
    assert fields["type"] == vector["type"]
    for name, value in fields.items():
        shown = [c.hex() for c in value] if name == "client_seeds" else value
        assert (shown.hex() if isinstance(shown, bytes) else shown) == vector[name], name


@cases("entries")
def test_deck_digest_covers_the_whole_derived_deck(vector: dict[str, Any]) -> None:
    """log-format.md: SHA-256 over every card of the derived deck, top first, 2 bytes per id."""
    if vector["type"] != "reveal":
        return
    hand = HANDS[vector["cards_from"]]
    cards, _, _ = ref.derive(
        hand["version"],
        hand["deck"],
        hand["hand_id"],
        bytes.fromhex(vector["server_seed"]),
        [bytes.fromhex(c) for c in vector["client_seeds"]],
    )
    assert len(cards) == DeckSpec.parse(hand["deck"]).size
    assert logref.deck_digest(hand["deck"], cards).hex() == vector["deck_digest"]


@cases("invalid_entries")
def test_invalid_entry_rejected_by_package(vector: dict[str, Any]) -> None:
    with pytest.raises(EntryError):
        decode(bytes.fromhex(vector["entry"]))


@cases("invalid_entries")
def test_invalid_entry_rejected_by_spec_reference(vector: dict[str, Any]) -> None:
    assert logref.parse_entry(bytes.fromhex(vector["entry"])) is None


@pytest.mark.parametrize(
    "name",
    [
        "commitment-33-bytes",
        "deck-digest-31-bytes",
        "client-seeds-65",
        "version-unknown",
        "deck-unknown",
        "hand-id-space",
    ],
)
def test_entry_strictness_regressions(name: str) -> None:
    """Regression: the parser took any commitment or digest length, any k, any version,
    deck or ASCII hand id; log-format.md ("Parsing") now says which, and so does decode."""
    (vector,) = [v for v in LOG["invalid_entries"] if v["name"] == name]
    with pytest.raises(EntryError):
        decode(bytes.fromhex(vector["entry"]))


# The tree: roots and proofs


@cases("roots")
def test_root(vector: dict[str, Any]) -> None:
    leaves = [merkle.leaf_hash(e) for e in ENTRIES[: vector["size"]]]
    assert merkle.root(leaves).hex() == vector["root"]
    assert logref.mth(ENTRIES[: vector["size"]]).hex() == vector["root"]


def _root(size: int) -> bytes:
    (row,) = [r for r in LOG["roots"] if r["size"] == size]
    return bytes.fromhex(row["root"])


@cases("inclusion_proofs")
def test_inclusion_proof(vector: dict[str, Any]) -> None:
    index, size = vector["index"], vector["tree_size"]
    proof = [bytes.fromhex(h) for h in vector["proof"]]
    assert logref.inclusion_path(index, ENTRIES[:size]) == proof
    leaf = merkle.leaf_hash(ENTRIES[index])
    merkle.verify_inclusion(index, size, leaf, proof, _root(size))
    assert logref.root_from_inclusion(index, size, leaf, proof) == _root(size)


@cases("consistency_proofs")
def test_consistency_proof(vector: dict[str, Any]) -> None:
    m, n = vector["size1"], vector["size2"]
    proof = [bytes.fromhex(h) for h in vector["proof"]]
    assert logref.consistency_proof(m, ENTRIES[:n]) == proof
    merkle.verify_consistency(m, n, proof, _root(m), _root(n))


def test_consistency_from_size_0_and_between_equal_sizes() -> None:
    """log-format.md: equal sizes take the empty proof and equal roots; size 0 has no proof."""
    seven = _root(7)
    merkle.verify_consistency(7, 7, [], seven, seven)
    merkle.verify_consistency(0, 0, [], merkle.EMPTY_ROOT, merkle.EMPTY_ROOT)
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(0, 7, [], merkle.EMPTY_ROOT, seven)
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(7, 7, [seven], seven, seven)


# Checkpoints and signed notes


@cases("checkpoints")
def test_checkpoint_through_package(vector: dict[str, Any]) -> None:
    note = vector["note"].encode("utf-8")
    if vector["valid"]:
        cp = open_checkpoint(note, VERIFIER, ORIGIN)
        assert cp.root == _root(cp.size)
    else:
        with pytest.raises(CheckpointError):
            open_checkpoint(note, VERIFIER, ORIGIN)


@cases("checkpoints")
def test_checkpoint_through_spec_reference(vector: dict[str, Any]) -> None:
    opened = logref.open_checkpoint(vector["note"].encode("utf-8"), VKEY)
    assert (opened is not None) == vector["valid"]
    if opened is not None:
        assert opened[0] == ORIGIN
        assert opened[2] == _root(opened[1])


def test_the_verifier_key_is_the_signer_seeds() -> None:
    from fairdeck.log.note import Signer

    signer = Signer.from_seed(ORIGIN, bytes.fromhex(LOG["key"]["signer_seed"]))
    assert signer.verifier.to_string() == VKEY
    assert logref.verifier_key(VKEY) is not None


def test_the_reference_reads_a_verifier_key_whose_base64_holds_a_plus() -> None:
    """signed-note: the name holds no "+", the base64 may; splitting on every "+" lost this key."""
    from fairdeck.log.note import Signer

    vkey = Signer.from_seed("example.com/log", (9).to_bytes(32, "big")).verifier.to_string()
    assert vkey.split("+", 2)[2].count("+") == 2  # the case under test, made by this seed
    name, key_id, public = logref.verifier_key(vkey) or ("", b"", b"")
    assert (name, key_id.hex()) == ("example.com/log", vkey.split("+")[1])
    assert public == Verifier.parse(vkey).public_key


# Receipts


@cases("receipts")
def test_receipt_through_package(vector: dict[str, Any]) -> None:
    if vector["valid"]:
        proof = InclusionProof.from_json(vector["text"])
        cp = proof.verify(VERIFIER)
        decode(proof.entry)
        assert json.loads(proof.to_json()) == json.loads(vector["text"])
        assert cp.size == proof.tree_size
    else:
        with pytest.raises(VerificationError):
            InclusionProof.from_json(vector["text"]).verify(VERIFIER)


@cases("receipts")
def test_receipt_through_spec_reference(vector: dict[str, Any]) -> None:
    assert (logref.check_receipt(vector["text"].encode("utf-8"), VKEY) is None) == vector["valid"]


@pytest.mark.parametrize("name", ["index-as-string", "index-float", "hash-hex", "extra-name"])
def test_receipt_json_strictness_regressions(name: str) -> None:
    """Regression: a receipt's from_json took int("2"), 2.0, hex hashes and unknown names."""
    (vector,) = [v for v in LOG["receipts"] if v["name"] == name]
    with pytest.raises(VerificationError):
        InclusionProof.from_json(vector["text"]).verify(VERIFIER)


def test_log_vectors_cover_every_entry_kind_extensions_the_empty_tree_and_equal_sizes() -> None:
    kinds = {(e["type"], e.get("outcome")) for e in LOG["entries"]}
    assert kinds == {("commit", None), ("reveal", 1), ("reveal", 2)}
    assert any(c["valid"] and "extension" in c["name"] for c in LOG["checkpoints"])
    assert any(c["note"].split("\n")[1] == "0" for c in LOG["checkpoints"])
    assert {p["size1"] for p in LOG["consistency_proofs"] if p["size1"] == p["size2"]}
    assert sum(r["valid"] for r in LOG["receipts"]) >= 2


def test_log_format_doc_states_the_worked_example_deck_digest() -> None:
    (reveal,) = [e for e in LOG["entries"] if e["name"] == "reveal/worked-example"]
    text = (ROOT / "docs" / "log-format.md").read_text(encoding="utf-8")
    assert reveal["deck_digest"] in text
    assert len(HANDS["short/worked-example"]["cards"]) == 36


def test_a_signed_receipt_of_an_entry_that_does_not_parse_is_rejected_at_the_last_step() -> None:
    """log-format.md, "The receipt", step 5: the path and the signature hold, the entry does not parse."""
    (vector,) = [v for v in LOG["receipts"] if v["name"] == "entry-does-not-parse"]
    assert logref.check_receipt(vector["text"].encode(), VKEY) == "entry"
    with pytest.raises(VerificationError, match="log entry does not parse"):
        InclusionProof.from_json(vector["text"]).verify(VERIFIER)
