"""A leaked retired log key (docs/security.md, "If the old key leaked"): the statement it signs
to a key of its own is followed by a verifier that holds only the old key, as any valid statement
is (the limitation, pinned here so that a fix shows up as a change of this test); a checkpoint that
key signs is refused by a verifier with a witness policy, since the witnesses pin their log keys
and never follow statements."""

from __future__ import annotations

import hashlib

import pytest

from fairdeck.core.errors import VerificationError
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.cosignature import Cosigner, WitnessPolicy, add_cosignatures
from fairdeck.log.note import Signer
from fairdeck.log.receipts import open_signed_checkpoint
from fairdeck.log.rotation import follow, sign_rotation

ORIGIN = "example.log"


def test_a_leaked_retired_key_is_followed_without_witnesses_and_refused_with_them() -> None:
    retired, current, attacker = (Signer.generate(ORIGIN) for _ in range(3))
    honest, leaked = sign_rotation(retired, current), sign_rotation(retired, attacker)
    witness = Cosigner.generate("witness.example/w1")
    policy = WitnessPolicy.parse([f"w1={witness.verifier.to_string()}"])

    keys, _ = follow([retired.verifier], [honest, leaked])
    assert attacker.verifier in keys  # the limitation: the statement alone is the leaked key's word
    forged = sign_checkpoint(Checkpoint(ORIGIN, 7, hashlib.sha256(b"a fork").digest()), attacker)
    assert open_signed_checkpoint(forged, keys).size == 7
    with pytest.raises(VerificationError) as refused:  # no honest witness cosigns the attacker's key
        open_signed_checkpoint(forged, keys, policy=policy)
    assert refused.value.step == "cosignatures"

    # The honest log's checkpoint, which the witness cosigned, still verifies under the policy.
    real = sign_checkpoint(Checkpoint(ORIGIN, 9, hashlib.sha256(b"the log").digest()), current)
    text = real.decode().split("\n\n")[0] + "\n"
    cosigned = add_cosignatures(real, [witness.cosign(text, 1_800_000_000)])
    assert open_signed_checkpoint(cosigned, keys, policy=policy).size == 9
