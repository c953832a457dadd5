"""Exceptions of the pure core.

Every rejection of caller input is an ``InvalidInput`` (a ``ValueError``), so a
boundary such as the gRPC servicer can translate the whole family at once.
Verification failures are a separate type: they are findings, not bad input.
"""

from __future__ import annotations


class InvalidInput(ValueError):
    """Input that the core refuses, with a message that names what is wrong."""


class VerificationError(Exception):
    """A revealed hand failed verification.

    ``step`` names the step of docs/fairness-spec.md section 6 that failed:
    ``malformed``, ``version``, ``commitment`` or ``deck``.
    """

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.detail = message
