"""What the co-dealer's refusals say about a co-dealt hand's end, on the dealer's side.

``ended_there``: the co-dealer ended the hand (HAND_CLOSED) or has none (HAND_NOT_FOUND), as its
gRPC link relays the refusal (CODEALER_REFUSED naming it) or as it is (in process).
``pruned_after_reveal``: a close that asked for the co-dealer's seed (``REVEAL_ASKED``, stored in
the row before the ask) and was cut off (the dealer down) is retried after the co-dealer's
retention (``codealer serve --keep-closed-days``, at least a day, counted from the end, which is
no earlier than the ask) dropped the hand: HAND_NOT_FOUND then is that retention, not a lost
ledger, and the close ends on the dealer's side alone (codeal_dealing.CodealDealer.close).
"""

from __future__ import annotations

from typing import Any

from fairdeck.wire import STATUS, Reason
from fairdeck_server import refusals

DAY_MS = 86_400_000
"""The co-dealer's least retention of an ended hand (``codealer serve --keep-closed-days``)."""
REVEAL_ASKED = "reveal_asked_ms"
"""``public`` of a co-dealt row: when the dealer first asked its co-dealer for the seed (its clock)."""
_DEAD = (Reason.HAND_CLOSED, Reason.HAND_NOT_FOUND)


def said(error: refusals.DealerError, *reasons: Reason) -> bool:
    """Whether the co-dealer refused with one of ``reasons`` (relayed by its link, or as it is)."""
    if error.reason in reasons:
        return True
    return error.reason == Reason.CODEALER_REFUSED and any(
        f"({STATUS[reason]} {reason})" in str(error) for reason in reasons
    )


def ended_there(error: refusals.DealerError) -> bool:
    """Whether the co-dealer said it ended the hand or has none."""
    return said(error, *_DEAD)


def pruned_after_reveal(public: dict[str, Any], error: refusals.DealerError, now_ms: int) -> bool:
    """Whether the co-dealer's HAND_NOT_FOUND is its retention dropping a hand this dealer ended."""
    asked = public.get(REVEAL_ASKED)
    return isinstance(asked, int) and now_ms - asked > DAY_MS and said(error, Reason.HAND_NOT_FOUND)
