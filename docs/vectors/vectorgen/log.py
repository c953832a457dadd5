"""fairdeck-log-v1.json, the known answers of docs/log-format.md: seven entries of the hands
of hands.py and the entries a reader must reject, the roots and proofs of their log, signed
checkpoints valid and not, and receipts valid and not; under a test key from a fixed label.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp, u32, u64
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.logentry import CLOSED, MAGIC, VOIDED, CommitEntry, Entry, RevealEntry, deck_digest
from fairdeck.log.note import Signer, sign_note
from fairdeck.log.receipts import InclusionProof

from .hands import Vector, label_bytes
from .tree import b64

LOG_ORIGIN = "log.example/fairdeck-vectors"


def log_vectors(valid_list: list[Vector]) -> dict[str, Any]:
    """Known-answer vectors of docs/log-format.md: entries, leaves, roots, proofs, checkpoints, receipts."""
    by_name = {v["name"]: v for v in valid_list}
    signer = Signer.from_seed(LOG_ORIGIN, label_bytes("log/key", 32))
    other = Signer.from_seed(LOG_ORIGIN, label_bytes("log/other-key", 32))

    def hand(name: str) -> tuple[Vector, tuple[bytes, ...], tuple[int, ...]]:
        v = by_name[name]
        spec = DeckSpec.parse(v["deck"])
        ids = {spec.card_for_id(i).code: i for i in spec.card_ids}
        return v, tuple(bytes.fromhex(c) for c in v["client_seeds"]), tuple(ids[c] for c in v["cards"])

    def commit_entry(name: str, time_ms: int) -> CommitEntry:
        v, _, _ = hand(name)
        return CommitEntry(time_ms, v["hand_id"], v["version"], v["deck"], bytes.fromhex(v["commitment"]))

    def reveal_entry(name: str, time_ms: int, outcome: int) -> RevealEntry:
        v, seeds, cards = hand(name)
        server_seed = bytes.fromhex(v["server_seed"])
        return RevealEntry(time_ms, v["hand_id"], outcome, server_seed, seeds, deck_digest(cards))

    t = 1_700_000_000_000
    plan: list[tuple[str, str, Entry]] = [
        (
            "commit/worked-example",
            "the commitment of spec section 10's hand",
            commit_entry("short/worked-example", t),
        ),
        ("commit/standard", "a standard hand", commit_entry("standard/no-client-seeds", t + 1)),
        (
            "reveal/worked-example",
            "the reveal of spec section 10's hand: one client seed, its 36-card deck digested",
            reveal_entry("short/worked-example", t + 2, CLOSED),
        ),
        (
            "commit/shoe-8",
            "the largest deck, time_ms at its maximum 2**64-1",
            commit_entry("shoe-8/several-client-seeds", 2**64 - 1),
        ),
        (
            "reveal/standard-voided",
            "the standard hand voided by the dealer (outcome 2) with no client seeds",
            reveal_entry("standard/no-client-seeds", t + 4, VOIDED),
        ),
        (
            "reveal/shoe-8",
            "four client seeds, one binary; the 416-card deck digested",
            reveal_entry("shoe-8/several-client-seeds", 0, CLOSED),
        ),
        (
            "commit/jokers",
            "a hand still open: a commitment with no reveal yet",
            commit_entry("jokers/no-client-seeds", t + 6),
        ),
    ]
    entries = [e.encode() for _, _, e in plan]
    leaves = [merkle.leaf_hash(e) for e in entries]
    store: list[bytes] = []
    read = lambda indexes: [store[i] for i in indexes]  # noqa: E731
    for n, h in enumerate(leaves):
        store += merkle.stored_hashes_for_append(n, h, read)

    entry_vectors: list[Vector] = []
    for (name, description, e), raw, leaf in zip(plan, entries, leaves, strict=True):
        fields: Vector = {"type": "commit" if isinstance(e, CommitEntry) else "reveal", "time_ms": e.time_ms}
        if isinstance(e, CommitEntry):
            fields.update(hand_id=e.hand_id, version=e.version, deck=e.deck, commitment=e.commitment.hex())
        else:
            source = next(v for v in valid_list if v["hand_id"] == e.hand_id)
            fields.update(
                hand_id=e.hand_id,
                outcome=e.outcome,
                server_seed=e.server_seed.hex(),
                client_seeds=[c.hex() for c in e.client_seeds],
                deck_digest=e.deck_digest.hex(),
                cards_from=source["name"],
            )
        entry_vectors.append(
            {"name": name, "description": description, **fields, "entry": raw.hex(), "leaf_hash": leaf.hex()}
        )

    # Entries that MUST be rejected (log-format.md, "Parsing"), each one change from a valid one.
    good_commit, good_reveal = entries[0], entries[2]
    c, r = plan[0][2], plan[2][2]
    assert isinstance(c, CommitEntry) and isinstance(r, RevealEntry)

    def raw_commit(hand_id: bytes, version: bytes, deck: bytes, commitment: bytes) -> bytes:
        return MAGIC + b"\x01" + u64(c.time_ms) + lp(hand_id) + lp(version) + lp(deck) + lp(commitment)

    def raw_reveal(outcome: int, seeds: Sequence[bytes], digest: bytes, count: int | None = None) -> bytes:
        k = len(seeds) if count is None else count
        head = (
            MAGIC + b"\x02" + u64(r.time_ms) + lp(r.hand_id.encode()) + bytes([outcome]) + lp(r.server_seed)
        )
        return head + u32(k) + b"".join(lp(x) for x in seeds) + lp(digest)

    hid, ver, deck, com = c.hand_id.encode(), c.version.encode(), c.deck.encode(), c.commitment
    invalid_entries = [
        ("magic", "magic 'FDL2'", b"FDL2" + good_commit[4:]),
        ("type-0", "entry type 0", good_commit[:4] + b"\x00" + good_commit[5:]),
        ("type-3", "entry type 3", good_commit[:4] + b"\x03" + good_commit[5:]),
        ("empty", "zero bytes", b""),
        ("truncated", "the last byte missing", good_commit[:-1]),
        ("trailing-byte", "one byte after the last field", good_reveal + b"\x00"),
        ("length-past-end", "a length prefix of 2**32-1", good_commit[:13] + b"\xff\xff\xff\xff"),
        ("hand-id-non-ascii", "hand id with byte 0xe4", raw_commit(b"h\xe4nd", ver, deck, com)),
        ("hand-id-space", "hand id 'hand 1'", raw_commit(b"hand 1", ver, deck, com)),
        ("hand-id-empty", "hand id of 0 bytes", raw_commit(b"", ver, deck, com)),
        ("hand-id-too-long", "hand id of 65 characters", raw_commit(b"h" * 65, ver, deck, com)),
        ("version-unknown", "version 'fairdeck-v2'", raw_commit(hid, b"fairdeck-v2", deck, com)),
        ("version-empty", "version of 0 bytes", raw_commit(hid, b"", deck, com)),
        ("deck-unknown", "deck 'shoe-9'", raw_commit(hid, ver, b"shoe-9", com)),
        ("deck-non-ascii", "deck with byte 0xe9", raw_commit(hid, ver, b"short\xe9", com)),
        ("commitment-31-bytes", "a commitment of 31 bytes", raw_commit(hid, ver, deck, com[:31])),
        ("commitment-33-bytes", "a commitment of 33 bytes", raw_commit(hid, ver, deck, com + b"\x00")),
        ("outcome-0", "reveal outcome 0", raw_reveal(0, r.client_seeds, r.deck_digest)),
        ("outcome-3", "reveal outcome 3", raw_reveal(3, r.client_seeds, r.deck_digest)),
        ("client-seeds-65", "65 client seeds (at most 64)", raw_reveal(1, [b"x"] * 65, r.deck_digest)),
        ("client-seed-empty", "a client seed of 0 bytes", raw_reveal(1, [b""], r.deck_digest)),
        ("client-seed-257-bytes", "a client seed of 257 bytes", raw_reveal(1, [b"x" * 257], r.deck_digest)),
        ("client-seed-count-huge", "k = 2**32-1 and no seeds", raw_reveal(1, [], r.deck_digest, 2**32 - 1)),
        (
            "deck-digest-31-bytes",
            "a deck digest of 31 bytes",
            raw_reveal(1, r.client_seeds, r.deck_digest[:31]),
        ),
        ("deck-digest-empty", "a deck digest of 0 bytes", raw_reveal(1, r.client_seeds, b"")),
    ]

    # Roots, proofs and signed checkpoints of the log of these entries.
    size = len(entries)
    roots = [{"size": n, "root": merkle.tree_hash(n, read).hex()} for n in range(size + 1)]
    notes = {
        n: sign_checkpoint(Checkpoint(LOG_ORIGIN, n, merkle.tree_hash(n, read)), signer).decode("utf-8")
        for n in (0, 1, 4, size)
    }
    inclusion = [
        {"index": i, "tree_size": n, "proof": [h.hex() for h in merkle.prove_inclusion(i, n, read)]}
        for n in (1, 4, size)
        for i in range(n)
    ]
    consistency = [
        {"size1": m, "size2": n, "proof": [h.hex() for h in merkle.prove_consistency(m, n, read)]}
        for m, n in [(1, size), (3, size), (4, size), (6, size), (size, size), (1, 4), (4, 4)]
    ]

    root = merkle.tree_hash(size, read)
    extended = Checkpoint(LOG_ORIGIN, size, root, ("fairdeck never writes extension lines",))
    checkpoints = [
        {"name": "size-0", "description": "the empty log: root SHA-256 of the empty string", "valid": True},
        {"name": "size-7", "description": "the log of the seven entries", "valid": True},
    ]
    checkpoints[0]["note"], checkpoints[1]["note"] = notes[0], notes[size]
    text = Checkpoint(LOG_ORIGIN, size, root).to_text()
    root64 = b64(root)

    def signed(body: str, by: Signer = signer) -> str:
        return sign_note(body, by).decode("utf-8")

    for name, description, note, ok in [
        (
            "extension-line",
            "one extension line after the root: accepted, and ignored",
            signed(extended.to_text()),
            True,
        ),
        ("other-key", "the same text signed by another key of the same name", signed(text, other), False),
        (
            "text-changed",
            "the size changed after signing",
            notes[size].replace(f"\n{size}\n", "\n6\n", 1),
            False,
        ),
        ("size-leading-zero", "tree size '07'", signed(text.replace(f"\n{size}\n", f"\n0{size}\n")), False),
        ("size-sign", "tree size '+7'", signed(text.replace(f"\n{size}\n", f"\n+{size}\n")), False),
        ("root-not-base64", "root hash in hex", signed(text.replace(root64, root.hex())), False),
        (
            "root-no-padding",
            "root hash base64 without its '='",
            signed(text.replace(root64, root64.rstrip("="))),
            False,
        ),
        ("root-31-bytes", "a root of 31 bytes", signed(text.replace(root64, b64(root[:31]))), False),
        ("empty-extension-line", "an empty line after the root", signed(text + "\n"), False),
        (
            "origin-other",
            "origin differs from the key name",
            signed(text.replace(LOG_ORIGIN, "log.example/other", 1)),
            False,
        ),
        ("two-lines", "no root hash line", signed(f"{LOG_ORIGIN}\n{size}\n"), False),
    ]:
        checkpoints.append({"name": name, "description": description, "valid": ok, "note": note})

    def receipt(index: int, tree_size: int) -> InclusionProof:
        proof = tuple(merkle.prove_inclusion(index, tree_size, read))
        return InclusionProof(index, tree_size, proof, entries[index], notes[tree_size].encode("utf-8"))

    good = receipt(2, size)
    good_json = json.loads(good.to_json())

    def changed(**changes: Any) -> str:
        return json.dumps(dict(good_json, **changes), indent=2)

    flipped = bytearray(good.hashes[0])
    flipped[0] ^= 1
    altered = bytearray(good.entry)
    altered[-1] ^= 1
    receipts_list: list[Vector] = [
        {
            "name": "valid/reveal-of-worked-example",
            "description": "entry 2 in the tree of 7",
            "valid": True,
            "text": good.to_json(),
        },
        {
            "name": "valid/last-entry",
            "description": "entry 6, the last, of 7",
            "valid": True,
            "text": receipt(6, size).to_json(),
        },
        {
            "name": "valid/single-leaf",
            "description": "entry 0 of a tree of 1: no hashes",
            "valid": True,
            "text": receipt(0, 1).to_json(),
        },
    ]
    other_note = sign_checkpoint(Checkpoint(LOG_ORIGIN, size, root), other).decode("utf-8")
    for name, description, text_ in [
        (
            "hash-flipped",
            "one bit of hashes[0] flipped",
            changed(hashes=[b64(bytes(flipped)), *good_json["hashes"][1:]]),
        ),
        ("hash-missing", "the last hash left out", changed(hashes=good_json["hashes"][:-1])),
        ("hash-extra", "one hash too many", changed(hashes=[*good_json["hashes"], good_json["hashes"][0]])),
        ("entry-altered", "the last byte of the entry changed", changed(entry=b64(bytes(altered)))),
        ("other-index", "index 3 with entry 2's proof", changed(index=3)),
        ("index-past-size", "index 7 in a tree of 7", changed(index=7)),
        ("tree-size-mismatch", "tree_size 6 with the checkpoint of size 7", changed(tree_size=6)),
        (
            "checkpoint-other-key",
            "the checkpoint signed by another key",
            changed(signed_checkpoint=other_note),
        ),
        (
            "checkpoint-of-size-4",
            "the proof for 7 with the checkpoint of size 4",
            changed(signed_checkpoint=notes[4]),
        ),
        ("index-as-string", 'index "2"', changed(index="2")),
        (
            "hash-31-bytes",
            "hashes[0] of 31 bytes",
            changed(hashes=[b64(good.hashes[0][:31]), *good_json["hashes"][1:]]),
        ),
        ("hash-hex", "hashes[0] in hex", changed(hashes=[good.hashes[0].hex(), *good_json["hashes"][1:]])),
        (
            "entry-urlsafe-base64",
            "entry in the URL-safe alphabet",
            changed(entry=base64.urlsafe_b64encode(good.entry).decode() + "_-"),
        ),
        ("extra-name", "an extra name 'comment'", changed(comment="x")),
        ("missing-name", "no 'entry'", json.dumps({k: v for k, v in good_json.items() if k != "entry"})),
    ]:
        receipts_list.append({"name": name, "description": description, "valid": False, "text": text_})
    for name, number in [
        ("index-float", "2.0"),
        ("index-exponent", "2e0"),
        ("index-negative-zero", "-0"),
        ("tree-size-2-64", str(2**64)),
    ]:
        field = "tree_size" if name.startswith("tree-size") else "index"
        body = changed(**{field: 0}).replace(f'"{field}": 0', f'"{field}": {number}')
        receipts_list.append(
            {"name": name, "description": f"{field} written {number}", "valid": False, "text": body}
        )

    # A signed tree whose one entry does not parse: the path and signature hold, step 5 does not.
    garbage = b"FDL1\x01 not an entry"
    garbage_note = sign_checkpoint(Checkpoint(LOG_ORIGIN, 1, merkle.leaf_hash(garbage)), signer)
    receipts_list.append(
        {
            "name": "entry-does-not-parse",
            "description": "a one-entry tree, signed, whose entry does not parse",
            "valid": False,
            "text": InclusionProof(0, 1, (), garbage, garbage_note).to_json(),
        }
    )

    return {
        "version": "fairdeck-log-v1",
        "description": (
            "Known-answer vectors of docs/log-format.md, generated by docs/vectors/generate.py. "
            "Hex is lower case, two digits per byte. Never edit by hand."
        ),
        "key": {
            "origin": LOG_ORIGIN,
            "verifier_key": signer.verifier.to_string(),
            "signer_seed": label_bytes("log/key", 32).hex(),
            "note": "a test key derived from a fixed label; never use it for a real log",
        },
        "entries": entry_vectors,
        "invalid_entries": [{"name": n, "description": d, "entry": e.hex()} for n, d, e in invalid_entries],
        "roots": roots,
        "inclusion_proofs": inclusion,
        "consistency_proofs": consistency,
        "checkpoints": checkpoints,
        "receipts": receipts_list,
    }
