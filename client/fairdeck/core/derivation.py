"""Deck derivation: (server seed, client seeds, hand id, deck spec) to the deck.

Spec section 3. The stream is SHAKE-256 in counter mode: block ``b`` is the first 64 bytes of
``SHAKE-256(lp("fairdeck-v1 stream") || u64(b) || M)``, where ``M`` encodes the deck, the hand id,
the server seed and the client seeds. The counter comes before the seed, so each block absorbs
the whole seed on its own (the seed-sizing argument of section 3.3).

>>> deck = derive_deck("standard", "h1", bytes(45), [b"alice"])
>>> len(deck), sorted(deck) == list(range(52))
(52, True)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp, u32
from fairdeck.core.seeds import check_hand_id, check_server_seed, normalize_client_seeds, server_seed_length
from fairdeck.core.shuffle import Shuffler, shuffler
from fairdeck.core.versions import CURRENT_VERSION, check_version

BLOCK_BYTES = 64
_shake = hashlib.shake_256
_FIRST_BLOCK = bytes(8)


class Stream:
    """The byte stream of spec section 3.2, read front to back."""

    __slots__ = ("_blocks", "_buffer", "_message", "_position", "_prefix")

    def __init__(self, prefix: bytes, message: bytes, first_block: bytes | None = None) -> None:
        self._prefix = prefix
        self._message = message
        if first_block is None:
            first_block = _shake(prefix + _FIRST_BLOCK + message).digest(BLOCK_BYTES)
        self._buffer = first_block
        self._position = 0
        self._blocks = 1

    def read(self, n: int) -> bytes:
        """The next ``n`` bytes of the stream."""
        start = self._position
        end = self._position = start + n
        while len(self._buffer) < end:
            counter = self._blocks.to_bytes(8, "big")
            self._buffer += _shake(self._prefix + counter + self._message).digest(BLOCK_BYTES)
            self._blocks += 1
        return self._buffer[start:end]


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything about a (version, deck) pair that does not change per hand."""

    spec: DeckSpec
    shuffler: Shuffler
    stream_prefix: bytes
    """``lp("<version> stream")``."""
    deck_field: bytes
    """``lp(deck)``."""
    seed_bytes: int

    def derive(self, hand_id: str, server_seed: bytes, client_seeds: tuple[bytes, ...]) -> tuple[int, ...]:
        """The deck for already-validated inputs (the hot path of ``derive_deck``)."""
        clients = u32(len(client_seeds)) + b"".join([lp(seed) for seed in client_seeds])
        message = self.deck_field + lp(hand_id.encode("ascii")) + lp(server_seed) + clients
        shuffler = self.shuffler
        width = shuffler.width
        # Attempt 0 reads the start of block 0, which is computed here directly;
        # when it is rejected (or wider than a block) Stream carries on from it.
        first = _shake(self.stream_prefix + _FIRST_BLOCK + message).digest(BLOCK_BYTES)
        index = int.from_bytes(first[:width], "big") & shuffler.mask
        if width > BLOCK_BYTES or index >= shuffler.limit:
            stream = Stream(self.stream_prefix, message, first)
            if width <= BLOCK_BYTES:
                stream.read(width)  # attempt 0, already rejected above
            index = shuffler.uniform_index(stream.read)
        return shuffler.permute(index, list(self.spec.card_ids))


@cache
def plan(version: str, deck: str) -> Plan:
    """The Plan for this version and deck; raises InvalidInput for unknown ones."""
    check_version(version)
    spec = DeckSpec.parse(deck)
    return Plan(
        spec,
        shuffler(spec.size),
        lp(f"{version} stream".encode()),
        lp(spec.name.encode("ascii")),
        server_seed_length(spec),
    )


def derive_deck(
    deck: str | DeckSpec,
    hand_id: str,
    server_seed: bytes,
    client_seeds: Sequence[str | bytes] = (),
    *,
    version: str = CURRENT_VERSION,
) -> tuple[int, ...]:
    """The dealt order of the deck, top card first, as card ids.

    Validates every input first (raising ``InvalidInput`` subclasses). Text
    client seeds are NFC-normalised and UTF-8 encoded (section 3.1).
    """
    p = plan(version, deck.name if isinstance(deck, DeckSpec) else deck)
    check_hand_id(hand_id)
    if not isinstance(server_seed, bytes) or len(server_seed) != p.seed_bytes:
        check_server_seed(p.spec, server_seed)
    return p.derive(hand_id, server_seed, normalize_client_seeds(client_seeds) if client_seeds else ())
