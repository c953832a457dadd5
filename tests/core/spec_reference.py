"""An independent implementation of fairdeck-v1, written from docs/fairness-spec.md and
docs/log-format.md alone.

It imports nothing from ``fairdeck``: plain ``hashlib``, integers and loops, a
hand-written JSON reader, the RFC 9162 recursive definitions, and
``cryptography`` only for Ed25519, following the documents literally and for
clarity, not speed. The
tests run every known-answer vector through it as well as through the
package, so a divergence between the written spec and the code fails a test.

>>> commitment("fairdeck-v1", "standard", "h1", bytes(45)).hex()[:16]
'99ae2133721d9112'
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import unicodedata
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

VERSIONS = ("fairdeck-v1",)
RANKS = "23456789TJQKA"
SUITS = "cdhs"
MAX_CLIENT_SEEDS = 64
MAX_CLIENT_SEED_BYTES = 256
BLOCK = 64
_HAND_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_HEX = re.compile(r"[0-9a-f]*")
_FIELDS = ("version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards")


# Section 1.1: byte encodings.


def u32(k: int) -> bytes:
    return k.to_bytes(4, "big")


def u64(k: int) -> bytes:
    return k.to_bytes(8, "big")


def lp(x: bytes) -> bytes:
    return u32(len(x)) + x


# Sections 1.2 and 1.3: card codes, ids, deck specs and canonical order.


def standard_code(card_id: int) -> str:
    return RANKS[card_id % 13] + SUITS[card_id // 13]


def deck_ids(deck: str) -> list[int] | None:
    """Card ids of a deck spec in canonical (ascending) order, or None if unknown."""
    if deck == "standard":
        return list(range(52))
    if deck == "jokers":
        return list(range(54))
    if deck == "short":
        return [i for i in range(52) if i % 13 >= 4]
    for n in range(1, 9):
        if deck == f"shoe-{n}":
            return list(range(52 * n))
    return None


def code(deck: str, card_id: int) -> str:
    """The code of a card in this deck's form (section 1.2)."""
    if deck.startswith("shoe-"):
        return f"{standard_code(card_id % 52)}.{card_id // 52 + 1}"
    if card_id == 52:
        return "X1"
    if card_id == 53:
        return "X2"
    return standard_code(card_id)


def canonical_codes(deck: str) -> list[str]:
    ids = deck_ids(deck)
    if ids is None:
        raise ValueError(f"unknown deck {deck!r}")
    return [code(deck, i) for i in ids]


# Section 3.1: seeds.


def index_bits(n: int) -> int:
    """B = bitlen(n! - 1)."""
    return (math.factorial(n) - 1).bit_length()


def server_seed_length(n: int) -> int:
    """L = ceil((B + 128) / 8)."""
    return -(-(index_bits(n) + 128) // 8)


def client_seed_from_text(text: str) -> bytes:
    """NFC, then UTF-8."""
    return unicodedata.normalize("NFC", text).encode("utf-8")


def derivation_input(deck: str, hand_id: str, server_seed: bytes, client_seeds: list[bytes]) -> bytes:
    """M of section 3.1."""
    m = lp(deck.encode("ascii")) + lp(hand_id.encode("ascii")) + lp(server_seed) + u32(len(client_seeds))
    for seed in client_seeds:
        m += lp(seed)
    return m


# Section 2: commitment.


def commitment(version: str, deck: str, hand_id: str, server_seed: bytes) -> bytes:
    data = (
        lp((version + " commit").encode("ascii"))
        + lp(deck.encode("ascii"))
        + lp(hand_id.encode("ascii"))
        + lp(server_seed)
    )
    return hashlib.sha256(data).digest()


# Section 3.2: the stream.


def stream_block(version: str, m: bytes, b: int) -> bytes:
    """S_b = SHAKE-256(lp(version || " stream") || u64(b) || M, 64)."""
    return hashlib.shake_256(lp((version + " stream").encode("ascii")) + u64(b) + m).digest(BLOCK)


def stream_prefix(version: str, m: bytes, length: int) -> bytes:
    """The first ``length`` bytes of the stream."""
    out = b""
    b = 0
    while len(out) < length:
        out += stream_block(version, m, b)
        b += 1
    return out[:length]


# Section 4: uniform index by rejection.


def uniform_index(version: str, m: bytes, n: int) -> tuple[int, int]:
    """(r, attempts): attempt a reads stream bytes a*w .. a*w + w - 1."""
    limit = math.factorial(n)
    bits = index_bits(n)
    w = -(-bits // 8)
    attempts = 0
    stream = b""
    block = 0
    while True:
        start = attempts * w
        while len(stream) < start + w:
            stream += stream_block(version, m, block)
            block += 1
        attempts += 1
        v = int.from_bytes(stream[start : start + w], "big") % (2**bits)
        if v < limit:
            return v, attempts


# Section 5: shuffle.


def shuffle(items: list[Any], r: int) -> list[Any]:
    deck = list(items)
    for i in range(len(deck) - 1, 0, -1):
        j = r % (i + 1)
        r = r // (i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    assert r == 0
    return deck


def derive(
    version: str, deck: str, hand_id: str, server_seed: bytes, client_seeds: list[bytes]
) -> tuple[list[str], int, int]:
    """(dealt codes top first, attempts, r) for a hand."""
    codes = canonical_codes(deck)
    r, attempts = uniform_index(
        version, derivation_input(deck, hand_id, server_seed, client_seeds), len(codes)
    )
    return shuffle(codes, r), attempts, r


# Section 7.1: the text. A hand-written RFC 8259 reader, so that Python's json
# module, which the package uses, is not what both sides agree on.

MAX_TEXT_BYTES = 1048576
MAX_DEPTH = 32


class TextError(ValueError):
    pass


class Num:
    """A JSON number; never converted."""

    def __init__(self, text: str) -> None:
        self.text = text


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WS = " \t\n\r"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def parse_text(raw: bytes) -> Any:
    """The JSON value of raw bytes under section 7.1, or TextError."""
    if len(raw) > MAX_TEXT_BYTES:
        raise TextError("too large")
    if raw[:3] == b"\xef\xbb\xbf":
        raise TextError("byte order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TextError("not UTF-8") from None
    value, at = _value(text, _skip(text, 0), 0)
    if _skip(text, at) != len(text):
        raise TextError("text after the value")
    return value


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WS:
        at += 1
    return at


def _value(text: str, at: int, depth: int) -> tuple[Any, int]:
    if at >= len(text):
        raise TextError("end of text")
    c = text[at]
    if c in "[{":
        if depth + 1 > MAX_DEPTH:
            raise TextError("too deep")
        return (_object if c == "{" else _array)(text, at + 1, depth + 1)
    if c == '"':
        return _string(text, at + 1)
    for word, meaning in (("true", True), ("false", False), ("null", None)):
        if text.startswith(word, at):
            return meaning, at + len(word)
    m = _NUMBER.match(text, at)
    if m is None:
        raise TextError("no value")
    return Num(m.group()), m.end()


def _array(text: str, at: int, depth: int) -> tuple[Any, int]:
    out: list[Any] = []
    at = _skip(text, at)
    if text[at : at + 1] == "]":
        return out, at + 1
    while True:
        item, at = _value(text, _skip(text, at), depth)
        out.append(item)
        at = _skip(text, at)
        if text[at : at + 1] == "]":
            return out, at + 1
        if text[at : at + 1] != ",":
            raise TextError("no comma")
        at += 1


def _object(text: str, at: int, depth: int) -> tuple[Any, int]:
    out: dict[str, Any] = {}
    at = _skip(text, at)
    if text[at : at + 1] == "}":
        return out, at + 1
    while True:
        if text[at : at + 1] != '"':
            raise TextError("name is not a string")
        name, at = _string(text, at + 1)
        if name in out:
            raise TextError("duplicate name")
        at = _skip(text, at)
        if text[at : at + 1] != ":":
            raise TextError("no colon")
        out[name], at = _value(text, _skip(text, at + 1), depth)
        at = _skip(text, at)
        if text[at : at + 1] == "}":
            return out, at + 1
        if text[at : at + 1] != ",":
            raise TextError("no comma")
        at = _skip(text, at + 1)


def _string(text: str, at: int) -> tuple[str, int]:
    out = []
    while True:
        if at >= len(text):
            raise TextError("unterminated string")
        c = text[at]
        if c == '"':
            return "".join(out), at + 1
        if ord(c) < 0x20:
            raise TextError("control character in a string")
        if c != "\\":
            out.append(c)
            at += 1
            continue
        e = text[at + 1 : at + 2]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            at += 2
            continue
        if e != "u":
            raise TextError("bad escape")
        unit, at = _hex4(text, at + 2)
        if 0xDC00 <= unit <= 0xDFFF:
            raise TextError("lone low surrogate")
        if 0xD800 <= unit <= 0xDBFF:
            if text[at : at + 2] != "\\u":
                raise TextError("lone high surrogate")
            low, at = _hex4(text, at + 2)
            if not 0xDC00 <= low <= 0xDFFF:
                raise TextError("lone high surrogate")
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
        out.append(chr(unit))


def _hex4(text: str, at: int) -> tuple[int, int]:
    digits = text[at : at + 4]
    if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
        raise TextError("bad \\u escape")
    return int(digits, 16), at + 4


# Sections 6 and 7: parsing and verification.
# Sections 6 and 7: parsing and verification.


def _hex(value: Any) -> bytes | None:
    if not isinstance(value, str) or len(value) % 2 or not _HEX.fullmatch(value):
        return None
    return bytes.fromhex(value)


def check(transcript: Any) -> str | None:
    """Verify a transcript given as a parsed JSON value: None, or the first failing step."""
    # Section 7.2: the version first, whatever else the object holds.
    if not isinstance(transcript, dict) or not isinstance(transcript.get("version"), str):
        return "malformed"
    version = transcript["version"]
    if version not in VERSIONS:
        return "version"
    # The rest of section 7.2; any failure is step "malformed".
    if set(transcript) != set(_FIELDS):
        return "malformed"
    deck, hand_id = transcript["deck"], transcript["hand_id"]
    if not isinstance(deck, str) or not isinstance(hand_id, str):
        return "malformed"
    commit_bytes = _hex(transcript["commitment"])
    server_seed = _hex(transcript["server_seed"])
    seeds_json, cards = transcript["client_seeds"], transcript["cards"]
    if commit_bytes is None or server_seed is None or not isinstance(seeds_json, list):
        return "malformed"
    client_seeds = [_hex(s) for s in seeds_json]
    if any(s is None for s in client_seeds) or not isinstance(cards, list):
        return "malformed"
    if not all(isinstance(c, str) for c in cards) or deck_ids(deck) is None:
        return "malformed"
    canonical = canonical_codes(deck)
    if any(c not in canonical for c in cards):
        return "malformed"
    # 6.2 malformed
    seeds = [s for s in client_seeds if s is not None]
    if (
        not _HAND_ID.fullmatch(hand_id)
        or len(server_seed) != server_seed_length(len(canonical))
        or len(seeds) > MAX_CLIENT_SEEDS
        or any(not 1 <= len(s) <= MAX_CLIENT_SEED_BYTES for s in seeds)
        or len(commit_bytes) != 32
        or len(cards) != len(canonical)
    ):
        return "malformed"
    # 6.3 commitment
    if commitment(version, deck, hand_id, server_seed) != commit_bytes:
        return "commitment"
    # 6.4 deck
    if derive(version, deck, hand_id, server_seed, seeds)[0] != cards:
        return "deck"
    return None


def check_text(raw: bytes) -> str | None:
    """Verify a transcript given as the raw bytes of its text (section 7.1, then 7.2 and 6)."""
    try:
        value = parse_text(raw)
    except TextError:
        return "malformed"
    return check(value)


# docs/log-format.md: entries, the tree (RFC 9162 section 2.1), checkpoints
# (C2SP tlog-checkpoint), signed notes (C2SP signed-note) and receipts.

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
        if not _HAND_ID.fullmatch(text):
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
    parts = vkey.split("+")
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
