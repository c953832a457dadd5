"""Seeds: sizing and drawing the server seed, validating client seeds and hand ids.

The server seed must be able to reach every order of the deck with margin:
at least log2(n!) + 128 bits (docs/fairness-spec.md section 3). Entropy is
passed in, so tests are deterministic; production passes ``secrets.token_bytes``.

>>> from fairdeck.core.decks import DeckSpec
>>> server_seed_length(DeckSpec.parse("standard"))
45
>>> normalize_client_seed("Cafe\\u0301") == "Caf\\u00e9".encode()
True
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from collections.abc import Callable, Sequence

from fairdeck.core.decks import DeckSpec
from fairdeck.core.errors import InvalidInput
from fairdeck.core.shuffle import index_bits

MAX_CLIENT_SEEDS = 64
"""At most this many client seeds per hand."""
MAX_CLIENT_SEED_BYTES = 256
"""Each client seed is 1 to this many bytes (after NFC and UTF-8 for text)."""
MAX_NFD_EXPANSION = 4
"""The most code points any one code point decomposes to canonically (fully, Hangul
included): 4 in Unicode 14/15 (e.g. U+1F82, U+1D160). ``tests/core/test_seeds.py``
checks it against the running interpreter's Unicode database."""
MAX_CLIENT_SEED_CHARS = MAX_CLIENT_SEED_BYTES * MAX_NFD_EXPANSION
"""Text longer than this many code points is refused before it is normalised: its
NFC form is longer than MAX_CLIENT_SEED_BYTES bytes anyway (see ``normalize_client_seed``)."""
MAX_CLIENT_SEED_WIRE_BYTES = MAX_CLIENT_SEED_CHARS * 4 + 3
"""A ClientSeed message (tag, length, value) bigger than this is refused before its
text is decoded: UTF-8 spends at most 4 bytes per code point, so its text has more
than MAX_CLIENT_SEED_CHARS code points (and bytes more than MAX_CLIENT_SEED_BYTES)."""
MAX_HAND_ID_LENGTH = 64
"""Hand ids are 1 to this many characters of ``[A-Za-z0-9._:-]``."""
SECURITY_MARGIN_BITS = 128

_HAND_ID = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_HAND_ID_LENGTH}}}")


class SeedError(InvalidInput):
    """A seed or hand id that the spec does not allow."""


def server_seed_length(spec: DeckSpec) -> int:
    """Bytes of server seed for this deck: ceil((B + 128) / 8)."""
    return (index_bits(spec.size) + SECURITY_MARGIN_BITS + 7) // 8


def new_server_seed(spec: DeckSpec, entropy: Callable[[int], bytes] = secrets.token_bytes) -> bytes:
    """A fresh server seed of the right length, drawn from ``entropy``."""
    length = server_seed_length(spec)
    seed = entropy(length)
    if len(seed) != length:
        raise SeedError(f"entropy source returned {len(seed)} bytes, wanted {length}")
    return seed


def check_server_seed(spec: DeckSpec, seed: bytes) -> None:
    """Raise SeedError unless ``seed`` has exactly the length the spec requires."""
    want = server_seed_length(spec)
    if not isinstance(seed, bytes) or len(seed) != want:
        got = len(seed) if isinstance(seed, bytes) else type(seed).__name__
        raise SeedError(f"server seed for deck {spec.name!r} must be {want} bytes, got {got}")


def normalize_client_seed(seed: str | bytes) -> bytes:
    """Bytes of one client seed: text is NFC-normalised and UTF-8 encoded.

    The limit is on the normalised bytes (spec section 3.1), but text longer than
    ``MAX_CLIENT_SEED_CHARS`` code points is refused before it is normalised: its NFC
    form is too long anyway (the proof: docs/fairness-spec.md, appendix A.3).
    """
    if isinstance(seed, str):
        if len(seed) > MAX_CLIENT_SEED_CHARS:  # O(1): refused before any per-character work
            raise SeedError(
                f"client seed must be 1..{MAX_CLIENT_SEED_BYTES} bytes, got at least {len(seed)} characters"
            )
        try:
            seed = unicodedata.normalize("NFC", seed).encode("utf-8")
        except UnicodeEncodeError:
            raise SeedError("client seed text is not valid Unicode (lone surrogate)") from None
    if not isinstance(seed, bytes):
        raise SeedError(f"client seed must be str or bytes, got {type(seed).__name__}")
    if not 1 <= len(seed) <= MAX_CLIENT_SEED_BYTES:
        raise SeedError(f"client seed must be 1..{MAX_CLIENT_SEED_BYTES} bytes, got {len(seed)}")
    return seed


def normalize_client_seeds(seeds: Sequence[str | bytes]) -> tuple[bytes, ...]:
    """All client seeds of a hand, normalised, in the order given."""
    if isinstance(seeds, str | bytes | bytearray):
        raise SeedError("client seeds must be a list of seeds, not one str or bytes")
    if len(seeds) > MAX_CLIENT_SEEDS:
        raise SeedError(f"at most {MAX_CLIENT_SEEDS} client seeds, got {len(seeds)}")
    out = []
    for i, seed in enumerate(seeds):
        try:
            out.append(normalize_client_seed(seed))
        except SeedError as e:
            raise SeedError(f"client_seeds[{i}]: {e}") from None
    return tuple(out)


def check_hand_id(hand_id: str) -> None:
    """Raise SeedError unless ``hand_id`` is 1..64 characters of [A-Za-z0-9._:-]."""
    if not isinstance(hand_id, str) or not _HAND_ID.fullmatch(hand_id):
        raise SeedError(f"hand id must be 1..{MAX_HAND_ID_LENGTH} characters of A-Z a-z 0-9 . _ : -")
