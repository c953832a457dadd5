"""Algorithm versions. A change to any byte of the algorithm is a new version;
old versions stay verifiable, and their known-answer vectors never change."""

from __future__ import annotations

from fairdeck.core.errors import InvalidInput

CURRENT_VERSION = "fairdeck-v1"
SUPPORTED_VERSIONS: tuple[str, ...] = (CURRENT_VERSION,)


class UnknownVersion(InvalidInput):
    """An algorithm version string this implementation does not know."""


def check_version(version: str) -> None:
    """Raise UnknownVersion unless ``version`` is supported."""
    if version not in SUPPORTED_VERSIONS:
        shown = version if isinstance(version, str) and len(version) <= 32 else "<invalid>"
        raise UnknownVersion(
            f"unknown algorithm version {shown!r}; supported: {', '.join(SUPPORTED_VERSIONS)}"
        )
