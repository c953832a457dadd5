"""An independent implementation of docs/log-format.md, written from the document alone:
entries and their parsing, the deck digest, the tree (RFC 9162 section 2.1, literally
recursive), checkpoints (C2SP tlog-checkpoint) in signed notes (C2SP signed-note) and
receipts. Like spec_reference.py, whose deck rules it shares, it imports nothing from
``fairdeck``: plain ``hashlib`` and ``base64``, the hand-written JSON reader
(json_reader.py), and ``cryptography`` only for Ed25519.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tests.support.json_reader import Num, TextError, parse_text
from tests.support.spec_reference import (
    HAND_ID,
    MAX_CLIENT_SEED_BYTES,
    MAX_CLIENT_SEEDS,
    VERSIONS,
    code,
    deck_ids,
)

LOG_MAGIC = b"FDL1"


def parse_entry(data: bytes) -> dict[str, Any] | None:
    """The fields of a log entry, or None if "Parsing" in log-format.md rejects it."""
    at = 0

    def take(n: int) -> bytes:
        nonlocal at
        if at + n > len(data):
            raise ValueError("short")
        at += n
        return data[at - n : at]

    def number(n: int) -> int:
        return int.from_bytes(take(n), "big")

    def field() -> bytes:
        return take(number(4))

    def hand_id() -> str:
        raw = field()
        text = raw.decode("ascii")  # UnicodeDecodeError is a ValueError
        if not HAND_ID.fullmatch(text):
            raise ValueError("hand id")
        return text

    try:
        if take(4) != LOG_MAGIC:
            return None
        kind = number(1)
        out: dict[str, Any] = {"time_ms": number(8), "hand_id": hand_id()}
        if kind == 1:
            out["type"] = "commit"
            out["version"] = field().decode("ascii")
            out["deck"] = field().decode("ascii")
            out["commitment"] = field()
            if (
                out["version"] not in VERSIONS
                or deck_ids(out["deck"]) is None
                or len(out["commitment"]) != 32
            ):
                return None
        elif kind == 2:
            out["type"] = "reveal"
            out["outcome"] = number(1)
            out["server_seed"] = field()
            k = number(4)
            if out["outcome"] not in (1, 2) or k > MAX_CLIENT_SEEDS:
                return None
            out["client_seeds"] = [field() for _ in range(k)]
            out["deck_digest"] = field()
            if any(not 1 <= len(c) <= MAX_CLIENT_SEED_BYTES for c in out["client_seeds"]):
                return None
            if len(out["deck_digest"]) != 32:
                return None
        else:
            return None
    except ValueError:
        return None
    return out if at == len(data) else None


def deck_digest(deck: str, codes: list[str]) -> bytes:
    """SHA-256 over every card of the derived deck, top first, each id as 2 bytes big-endian."""
    ids = {code(deck, i): i for i in deck_ids(deck) or []}
    return hashlib.sha256(b"".join(ids[c].to_bytes(2, "big") for c in codes)).digest()


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while 2 * k < n:
        k *= 2
    return k


def mth(entries: list[bytes]) -> bytes:
    """RFC 9162 section 2.1.1, MTH(D[n]), literally recursive."""
    if not entries:
        return hashlib.sha256(b"").digest()
    if len(entries) == 1:
        return leaf_hash(entries[0])
    k = _split(len(entries))
    return node_hash(mth(entries[:k]), mth(entries[k:]))


def inclusion_path(m: int, entries: list[bytes]) -> list[bytes]:
    """RFC 9162 section 2.1.3.1, PATH(m, D[n])."""
    if len(entries) == 1:
        return []
    k = _split(len(entries))
    if m < k:
        return [*inclusion_path(m, entries[:k]), mth(entries[k:])]
    return [*inclusion_path(m - k, entries[k:]), mth(entries[:k])]


def consistency_proof(m: int, entries: list[bytes]) -> list[bytes]:
    """RFC 9162 section 2.1.4.1, PROOF(m, D[n]) = SUBPROOF(m, D[n], true), for 0 < m <= n."""

    def subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
        if m == len(d):
            return [] if b else [mth(d)]
        k = _split(len(d))
        if m <= k:
            return [*subproof(m, d[:k], b), mth(d[k:])]
        return [*subproof(m - k, d[k:], False), mth(d[:k])]

    return subproof(m, entries, True)


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes]) -> bytes | None:
    """The root an audit path leads to, by undoing PATH recursively; None if its length is wrong."""
    if not 0 <= index < size:
        return None
    if size == 1:
        return leaf if not proof else None
    if not proof:
        return None
    k = _split(size)
    if index < k:
        left = root_from_inclusion(index, k, leaf, proof[:-1])
        return None if left is None else node_hash(left, proof[-1])
    right = root_from_inclusion(index - k, size - k, leaf, proof[:-1])
    return None if right is None else node_hash(proof[-1], right)


def _b64(text: Any) -> bytes | None:
    """Canonical standard base64 with padding (RFC 4648 section 4), or None."""
    if not isinstance(text, str) or not re.fullmatch(
        r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?", text
    ):
        return None
    raw = base64.b64decode(text)
    return raw if base64.b64encode(raw).decode() == text else None


def verifier_key(vkey: str) -> tuple[str, bytes, bytes] | None:
    """(name, 4-byte key id, Ed25519 public key) of ``name+hash+base64(0x01 || key)``."""
    parts = vkey.split("+", 2)  # signed-note: a name holds no "+", but the base64 may
    if len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{8}", parts[1]):
        return None
    raw = _b64(parts[2])
    if raw is None or len(raw) != 33 or raw[0] != 1:
        return None
    name, key = parts[0], raw[1:]
    key_id = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    return (name, key_id, key) if key_id.hex() == parts[1] else None


def open_checkpoint(note: bytes, vkey: str) -> tuple[str, int, bytes] | None:
    """(origin, size, root) of a signed checkpoint that the key signed, or None."""
    key = verifier_key(vkey)
    if key is None:
        return None
    name, key_id, public = key
    try:
        whole = note.decode("utf-8")
    except UnicodeDecodeError:
        return None
    split = whole.rfind("\n\n")
    if split < 0 or not whole.endswith("\n"):
        return None
    text, signatures = whole[: split + 1], whole[split + 2 : -1].split("\n")
    signed = False
    for line in signatures:
        m = re.fullmatch("\u2014 (\\S+) (\\S+)", line)
        raw = _b64(m.group(2)) if m else None
        if m is None or raw is None or len(raw) < 5:
            return None
        if m.group(1) == name and raw[:4] == key_id:
            try:
                Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], text.encode("utf-8"))
            except InvalidSignature:
                return None
            signed = True
    lines = text[:-1].split("\n")
    if not signed or len(lines) < 3 or any(not line for line in lines) or lines[0] != name:
        return None
    root = _b64(lines[2])
    if (
        not re.fullmatch(r"0|[1-9][0-9]*", lines[1])
        or int(lines[1]) >= 2**64
        or root is None
        or len(root) != 32
    ):
        return None
    return lines[0], int(lines[1]), root


def check_receipt(raw: bytes, vkey: str) -> str | None:
    """None if a receipt (log-format.md, "The receipt") holds under the key, else what failed."""
    try:
        value = parse_text(raw)
    except TextError:
        return "malformed"
    names = {"index", "tree_size", "hashes", "entry", "signed_checkpoint"}
    if not isinstance(value, dict) or set(value) != names:
        return "malformed"
    numbers = [value["index"], value["tree_size"]]
    if not all(isinstance(n, Num) and re.fullmatch(r"0|[1-9][0-9]*", n.text) for n in numbers):
        return "malformed"
    index, size = (int(n.text) for n in numbers)
    hashes = value["hashes"]
    proof = [_b64(h) for h in hashes] if isinstance(hashes, list) else [None]
    entry = _b64(value["entry"])
    note = value["signed_checkpoint"]
    if (
        size >= 2**64
        or any(h is None or len(h) != 32 for h in proof)
        or entry is None
        or not isinstance(note, str)
    ):
        return "malformed"
    checkpoint = open_checkpoint(note.encode("utf-8"), vkey)
    if checkpoint is None:
        return "checkpoint"
    if checkpoint[1] != size:
        return "tree_size"
    if (
        root_from_inclusion(index, size, leaf_hash(entry), [h for h in proof if h is not None])
        != checkpoint[2]
    ):
        return "inclusion"
    if parse_entry(entry) is None:
        return "entry"
    return None
