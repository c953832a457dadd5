"""The decks of stored hands (``Decks``): a hand's seed opened from the vault, its cards derived
(the last 4,096 kept), and the decide function that reveals it at a time.

The dealer (draws, closes, transcripts) and the voids (``voids.Voider``, which the reaper drives)
share one ``Decks``, so voiding a hand never calls back into the dealer. No grpc, no I/O but the
vault's key material in memory; a seed that does not open is ``refusals.seed_unavailable``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache

from fairdeck.core.derivation import plan
from fairdeck.log.logentry import RevealEntry, deck_digest
from fairdeck_server import refusals
from fairdeck_server.dealing.vault import SeedVault, VaultError
from fairdeck_server.storage.base import Change, HandRecord, StoredHandState


class Decks:
    """Opens and derives the decks of the hands sealed by ``vault``."""

    def __init__(self, vault: SeedVault) -> None:
        self.vault = vault
        self._cache = lru_cache(maxsize=4096)(self._derive)

    def cards(self, r: HandRecord) -> tuple[int, ...]:
        try:
            return self._cache(r.hand_id, r.deck, r.version, r.sealed_seed, r.client_seeds)
        except refusals.DealerError:
            if r.server_seed is None:
                raise
            # Revealed: the seed is in the record, so a retired seed key is not needed (vault.py).
            return plan(r.version, r.deck).derive(r.hand_id, r.server_seed, r.client_seeds)

    def revealing(self, outcome: int, now: int) -> Callable[[HandRecord], tuple[Change, None]]:
        """The decide function that reveals a hand at ``now`` (a closed one stays as it is)."""

        def decide(r: HandRecord) -> tuple[Change, None]:
            if r.state is StoredHandState.CLOSED:
                return Change(r), None
            seed = self.open_seed(r)
            new = replace(r, state=StoredHandState.CLOSED, closed_ms=now, server_seed=seed)
            digest = deck_digest(self.cards(r))
            entry = RevealEntry(now, r.hand_id, outcome, seed, r.client_seeds, digest).encode()
            return Change(new, entry, outcome), None

        return decide

    def open_seed(self, r: HandRecord) -> bytes:
        return self._open_sealed(r.hand_id, r.sealed_seed)

    def _derive(
        self, hand_id: str, deck: str, version: str, sealed: bytes, client_seeds: tuple[bytes, ...]
    ) -> tuple[int, ...]:
        seed = self._open_sealed(hand_id, sealed)
        return plan(version, deck).derive(hand_id, seed, client_seeds)

    def _open_sealed(self, hand_id: str, sealed: bytes) -> bytes:
        try:
            return self.vault.open(hand_id, sealed)
        except VaultError as e:
            raise refusals.seed_unavailable(str(e)) from None
