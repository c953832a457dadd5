"""The co-dealer's seal statements of a sealed draw and of a closing hand, checked (codealing-spec
sections 9.1, 9.2 and 11).

At the close the co-dealer's RevealSeed answer carries every seal statement it signed for the hand.
``checked_seals`` accepts them only if they are exactly the positions the dealer's record sealed to a
seat (ascending, each once), each naming the seat key the dealer's record gives for it, each 32/32/64
bytes and signed by the pinned identity key over the statement of section 9.1; otherwise the close
fails with CODEALER_INVALID and nothing is logged. What it returns is kept in the hand's row
(``public["seals"]``, one list per co-dealer) and becomes the hand's seals entry (codeal_log).
``draw_seals`` checks a sealed draw's statements as the seat's device will (section 9.2).
``unrecorded`` finds the seat keys of positions right after the dealer's record that the
co-dealer sealed (a draw whose answer the dealer lost): the close records them, then checks all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.seal_statement import SealStatement, check_seals, seal_statement, verifies
from fairdeck.wire import Reason
from fairdeck_server import refusals

HOLDER = 1
"""The one co-dealer of a dealer's co-dealt hand (codeal_dealing.HOLDERS - 1)."""


def unrecorded(seats: Sequence[str], seals: Sequence[tuple[int, bytes, bytes, bytes]]) -> list[bytes]:
    """The seat keys of the positions the co-dealer sealed right after the dealer's record
    (``len(seats)``, ``len(seats) + 1``, ... with none missing): a draw the co-dealer recorded
    first and whose answer the dealer never recorded (a write that failed, a cancelled call).
    Anything else is left to ``checked_seals`` to refuse."""
    extra = [(p, key) for p, key, _, _ in seals if p >= len(seats)]
    if [p for p, _ in extra] != list(range(len(seats), len(seats) + len(extra))):
        return []
    return [key for _, key in extra if len(key) == 32]


def checked_seals(
    ctx: HandContext,
    identity_key: bytes,
    seats: Sequence[str],
    seals: Sequence[tuple[int, bytes, bytes, bytes]],
) -> list[dict[str, object]]:
    """The statements as the row keeps them, or DealerError CODEALER_INVALID naming the position."""
    sealed = [p for p, seat in enumerate(seats) if seat]
    if [p for p, _, _, _ in seals] != sealed:
        raise _bad(f"want one for each sealed position {sealed}, ascending; got {[p for p, *_ in seals]}")
    kept: list[dict[str, object]] = []
    for p, key, digest, signature in seals:
        if len(key) != 32 or len(digest) != 32 or len(signature) != 64:
            raise _bad(f"position {p}: a seat key is 32 bytes, a digest 32 and a signature 64")
        if key.hex() != seats[p]:
            raise _bad(f"position {p} was sealed to another key than the seat's")
        if not verifies(identity_key, seal_statement(ctx, p, HOLDER, key, digest), signature):
            raise _bad(f"position {p}: the statement does not verify under the pinned identity key")
        kept.append(
            {
                "position": p,
                "seat_key": key.hex(),
                "sealed_sha256": digest.hex(),
                "signature": signature.hex(),
            }
        )
    return kept


def _bad(detail: str) -> refusals.DealerError:
    return refusals.codeal(
        Reason.CODEALER_INVALID, f"the co-dealer's seal statements do not verify: {detail}"
    )


def invalid(what: str, error: CodealError | None = None) -> refusals.DealerError:
    """CODEALER_INVALID: the co-dealer's ``what`` does not verify (the check's words after it)."""
    detail = f": {error}" if error else ""
    return refusals.codeal(Reason.CODEALER_INVALID, f"the co-dealer's {what} does not verify{detail}")


def draw_seals(
    ctx: HandContext,
    identity_key: bytes,
    first: int,
    owners: Sequence[bytes],
    sealed: Sequence[bytes],
    signatures: Sequence[bytes],
) -> tuple[tuple[SealStatement, ...], ...]:
    """The co-dealer's seal statements of a sealed draw, each checked as the seat's device will
    (section 9.2): it sealed position ``first + i`` to the seat key the dealer asked for."""
    if not any(owners):
        return ()
    if len(signatures) != len(owners):
        raise invalid("answer")
    seals = []
    for i, owner in enumerate(owners):
        statement = SealStatement(1, owner, hashlib.sha256(sealed[i]).digest(), signatures[i])
        pair = [b"", sealed[i]]  # holder 0's slot: the dealer's own seal is not in section 9.2
        try:
            check_seals(ctx, first + i, pair, [statement], owner, [identity_key])
        except CodealError as e:
            raise invalid("seal statement", e) from None
        seals.append((statement,))
    return tuple(seals)
