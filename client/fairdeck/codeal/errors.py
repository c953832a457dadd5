"""The one exception of the co-dealing core: a check failed, at a named step of the spec.

``CodealError.step`` is one of ``STEPS``, the step names of docs/codealing-spec.md section 10;
every verifier of this layer raises only this type (it is a ``VerificationError``, so a caller
that handles the ordinary mode's failures handles these too). Messages never carry secrets.
"""

from __future__ import annotations

from fairdeck.core.errors import VerificationError

STEPS = frozenset(
    {
        "encoding",  # 10.1: a point, scalar, ciphertext or field is not its canonical encoding
        "key",  # 10.2: a key holder's key or its proof of possession
        "transcript",  # 10.3: a shuffle or a share missing, doubled or out of order
        "shuffle",  # 10.4: a shuffle's freshness or its proof of shuffle
        "share",  # 10.5: a decryption share or its DLEQ proof
        "open",  # 10.6: the shares open to a point that is not a card of the deck
        "seed",  # 10.7: a revealed seed does not open its commitment or re-derive its shuffle
        "seal",  # 9: a sealed share does not open with the seat's key
    }
)


class CodealError(VerificationError):
    """A co-dealt deck, proof or share failed the check of spec step ``step``."""

    def __init__(self, step: str, message: str) -> None:
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r}")
        super().__init__(step, message)
