"""An independent implementation of fairdeck-v1, written from docs/fairness-spec.md alone.

It imports nothing from ``fairdeck``: plain ``hashlib``, integers and loops, a
hand-written JSON reader (json_reader.py), following the document literally and for
clarity, not speed. The tests run every known-answer vector through it as well as
through the package, so a divergence between the written spec and the code fails a
test. docs/log-format.md has its own independent implementation, log_reference.py.

>>> commitment("fairdeck-v1", "standard", "h1", bytes(45)).hex()[:16]
'99ae2133721d9112'
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from typing import Any

from tests.support.json_reader import TextError, parse_text

VERSIONS = ("fairdeck-v1",)
RANKS = "23456789TJQKA"
SUITS = "cdhs"
MAX_CLIENT_SEEDS = 64
MAX_CLIENT_SEED_BYTES = 256
BLOCK = 64
HAND_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
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
        not HAND_ID.fullmatch(hand_id)
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
