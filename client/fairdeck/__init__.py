"""fairdeck: provably fair card decks.

The top level is the pure core (``fairdeck.core``: cards, decks, seeds, derivation, commitment,
verification, and dealing a hand locally), importable without grpc; its names are re-exported
here, and its ``__all__`` is this package's. The SDK for the dealer service is ``fairdeck.client``.

>>> from fairdeck import deal_local, verify
>>> hand = deal_local("standard", "demo-1", ["alice", "bob"])
>>> verify(hand.transcript)
"""

import warnings
from typing import Any

from fairdeck import core
from fairdeck.core import *  # noqa: F403 - the core's names are the top level's
from fairdeck.core import __all__ as __all__

_RENAMED = {"deal_hand": "deal_local", "open_hand": "open_local", "reveal": "reveal_local"}
"""Old names of the local dealing functions (they read like the dealer's RPCs); kept one release."""


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        warnings.warn(
            f"fairdeck.{name} is renamed fairdeck.{_RENAMED[name]}", DeprecationWarning, stacklevel=2
        )
        return getattr(core, _RENAMED[name])
    raise AttributeError(f"module 'fairdeck' has no attribute {name!r}")
