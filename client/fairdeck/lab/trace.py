"""What one hand's derivation reads and computes, layer by layer (docs/fairness-spec.md 3 to 5).

Pure. ``blocks`` is the raw RNG output: every 64-byte SHAKE-256 block the derivation computed,
whole, before rejection or scaling; ``attempts`` and ``index`` are section 4's; ``choices`` are
section 5's ``j`` for ``i = n - 1`` down to 1; ``cards`` is the dealt order. Whole blocks, not the
bytes the attempts read: the accepted attempt is below ``n!`` (for 52 cards its top two bits are
never ``11``), while whether a block is computed depends only on bytes before it, so whole blocks
are SHAKE-256 output with no selection (docs/certification.md, section 1).

>>> t = trace("short", "example-1", bytes(range(34)), [b"alice"])
>>> t.attempts, t.choices[:4], len(t.blocks)
(2, (17, 23, 7, 14), 64)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from fairdeck.core.derivation import BLOCK_BYTES, plan
from fairdeck.core.encoding import lp, u32
from fairdeck.core.errors import VerificationError
from fairdeck.core.seeds import normalize_client_seeds
from fairdeck.core.versions import CURRENT_VERSION


@dataclass(frozen=True)
class HandTrace:
    """Every layer of one hand's derivation."""

    blocks: bytes
    """The SHAKE-256 blocks computed, whole (a multiple of 64 bytes)."""
    attempts: int
    width: int
    """Bytes per attempt, ``ceil(B / 8)``."""
    index: int
    """The accepted uniform index, below ``n!``."""
    choices: tuple[int, ...]
    """``j`` for ``i = n - 1, n - 2, ..., 1``: each uniform in ``[0, i]``."""
    cards: tuple[int, ...]

    @property
    def read(self) -> bytes:
        """The bytes the attempts read (a prefix of ``blocks``)."""
        return self.blocks[: self.attempts * self.width]


def trace(
    deck: str,
    hand_id: str,
    server_seed: bytes,
    client_seeds: Sequence[str | bytes] = (),
    *,
    version: str = CURRENT_VERSION,
) -> HandTrace:
    """Re-derive the hand, keeping every layer; its cards equal ``derive_deck``'s."""
    p = plan(version, deck)
    seeds = normalize_client_seeds(client_seeds) if client_seeds else ()
    message = (
        p.deck_field
        + lp(hand_id.encode("ascii"))
        + lp(server_seed)
        + u32(len(seeds))
        + b"".join(lp(s) for s in seeds)
    )
    shuffler = p.shuffler
    width, mask, limit = shuffler.width, shuffler.mask, shuffler.limit
    blocks = bytearray()
    position = attempts = 0
    while True:
        # Spec 3.2: a block is computed when a read needs it, and kept whole.
        while len(blocks) < position + width:
            counter = (len(blocks) // BLOCK_BYTES).to_bytes(8, "big")
            blocks += hashlib.shake_256(p.stream_prefix + counter + message).digest(BLOCK_BYTES)
        attempts += 1
        value = int.from_bytes(blocks[position : position + width], "big") & mask  # spec 4 step 2
        position += width
        if value < limit:  # spec 4 step 3
            break
    # Spec 5, Durstenfeld's loop as ``durstenfeld_reference`` writes it, each j kept: one pass.
    order = list(p.spec.card_ids)
    choices = []
    r = value
    for i in range(len(order) - 1, 0, -1):
        r, j = divmod(r, i + 1)
        choices.append(j)
        order[i], order[j] = order[j], order[i]
    return HandTrace(bytes(blocks), attempts, width, value, tuple(choices), tuple(order))


def check_trace(t: HandTrace, cards: Sequence[int], hand_id: str) -> None:
    """Raise VerificationError unless the traced derivation dealt ``cards``."""
    if tuple(cards) != t.cards:
        raise VerificationError(
            "deck", f"hand {hand_id}: the traced derivation does not give the cards dealt"
        )
