"""The checks of a co-dealer's seals entry (docs/codealing-spec.md section 11, "Seal statements").

``seals_problem`` says what is wrong with co-dealer ``k``'s seals entry of a hand, or None: its
positions ascend strictly; each is a position the hand's shares entries deal; every co-dealer's entry
names the same positions and, for each, the same seat key as co-dealer 1's; and, with the pinned
co-dealer identity keys (holder order), each signature verifies over the seal statement of section
9.1 under co-dealer ``k``'s key. What it cannot check: that a statement's digest is SHA-256 of the
sealed share (sealed shares are never logged), that a sealed position was sealed at all (the log does
not say which positions went to a seat), and, without the keys, any signature.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.seal_statement import seal_statement, verifies

Seal = tuple[int, bytes, bytes, bytes]
"""(position, seat key, SHA-256 of the sealed share, signature), as a seals entry holds it."""


def seals_problem(
    k: int,
    seals: Sequence[Seal],
    dealt: Sequence[int],
    first: Sequence[Seal] | None,
    ctx: HandContext | None,
    identity_keys: Sequence[bytes],
) -> str | None:
    """Co-dealer ``k``'s ``seals`` against the ``dealt`` positions and ``first`` (co-dealer 1's, None
    when this is it); the signatures too when ``ctx`` and ``identity_keys`` (holders 1..K-1) are given."""
    where = f"co-dealt seals entry of co-dealer {k}"
    positions = [p for p, _, _, _ in seals]
    for before, p in itertools.pairwise(positions):
        if p <= before:
            return f"{where}: position {p} after position {before} (section 11: positions ascend, distinct)"
    known = set(dealt)
    for p in positions:
        if p not in known:
            return f"{where}: position {p} is sealed but no shares entry deals it"
    if first is not None:
        if positions != [p for p, _, _, _ in first]:
            return f"{where}: its positions are not co-dealer 1's (section 11: every sealed position)"
        for (p, key, _, _), (_, key1, _, _) in zip(seals, first, strict=True):
            if key != key1:
                return f"{where}: position {p} was sealed to another key than co-dealer 1 sealed it to"
    if ctx is None or len(identity_keys) < k:
        return None
    for p, key, digest, signature in seals:
        if not verifies(identity_keys[k - 1], seal_statement(ctx, p, k, key, digest), signature):
            return (
                f"{where}: position {p}: the seal statement does not verify under co-dealer {k}'s "
                "pinned identity key (codealing-spec section 9.1)"
            )
    return None
