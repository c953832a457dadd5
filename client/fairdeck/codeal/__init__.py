"""fairdeck.codeal: co-dealt decks, shuffled under ElGamal encryption by several key holders.

It owns the pure core of docs/codealing-spec.md: the ristretto255 group and its strict encodings,
cards as points, ElGamal, key holders' keys with proofs of possession, shuffles derived from seeds
with their Terelius-Wikström proofs, decryption shares with DLEQ proofs, shares sealed to a seat's
key with the co-dealers' signed seal statements the seat's device checks, and the verifier of a
whole co-dealt hand. No I/O, no clock: randomness is passed in. It may
import the standard library, ``cryptography``, ``pysodium`` (libsodium, the only source of group
arithmetic), ``fairdeck.core`` and ``fairdeck.log`` (the receipts of format 5); nothing in the
ordinary mode imports it
(tests/test_boundaries.py checks both).
"""

from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.local import codeal_local
from fairdeck.codeal.verify import CodealHand, DealtPosition, final_order, verify_hand

__all__ = ["CodealError", "CodealHand", "DealtPosition", "codeal_local", "final_order", "verify_hand"]
