"""cosignature/v1 (c2sp.org/tlog-cosignature) and witness policies: known answers and rejections."""

from __future__ import annotations

import base64

import pytest

from fairdeck.log.cosignature import (
    CosignatureError,
    CosignatureVerifier,
    Cosigner,
    PolicyError,
    WitnessPolicy,
    add_cosignatures,
    cosigner_key_id,
    parse_line,
    signed_message,
)
from fairdeck.log.note import Signer, open_note, sign_note

# tlog-cosignature, "Format": the example checkpoint with a log signature and one cosignature.
SPEC_CHECKPOINT = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
SPEC_COSIGNATURE_LINE = (
    "— witness.example.com/w1 "
    "jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA=="
)
# tlog-cosignature, "Ed25519 signed message": the message for that checkpoint at time 1679315147.
SPEC_MESSAGE = (
    b"cosignature/v1\ntime 1679315147\n"
    b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)

W1 = Cosigner.from_seed("witness.example/w1", bytes(32))
W2 = Cosigner.from_seed("witness.example/w2", bytes([2]) * 32)
W3 = Cosigner.from_seed("witness.example/w3", bytes([3]) * 32)
LOG = Signer.from_seed("example.com/log", bytes([9]) * 32)
TEXT = "example.com/log\n5\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"


def test_the_spec_example_line_parses_to_its_key_id_and_timestamp() -> None:
    cosig = parse_line(SPEC_COSIGNATURE_LINE)
    assert cosig.name == "witness.example.com/w1"
    assert cosig.timestamp == 1679315147  # the time of the spec's signed-message example
    assert cosig.key_id == int.from_bytes(base64.b64decode(SPEC_COSIGNATURE_LINE.split()[-1])[:4], "big")


def test_the_signed_message_is_the_spec_example_byte_for_byte() -> None:
    assert signed_message(SPEC_CHECKPOINT, 1679315147) == SPEC_MESSAGE


def test_key_id_follows_the_spec_rule_with_type_0x04() -> None:
    import hashlib

    pk = W1.verifier.public_key
    want = hashlib.sha256(b"witness.example/w1\n\x04" + pk).digest()[:4]
    assert cosigner_key_id("witness.example/w1", pk) == int.from_bytes(want, "big")
    raw = base64.b64decode(W1.verifier.to_string().split("+")[2])
    assert raw[0] == 0x04 and raw[1:] == pk


def test_vkey_and_skey_round_trip() -> None:
    assert CosignatureVerifier.parse(W1.verifier.to_string()) == W1.verifier
    assert Cosigner.parse(W1.to_string()).verifier == W1.verifier


@pytest.mark.parametrize(
    "vkey",
    [
        "",
        "witness.example/w1",
        LOG.verifier.to_string(),  # a type 0x01 note key is not a cosigner key
        "witness.example/w1+00000000+" + W1.verifier.to_string().split("+")[2],  # wrong key hash
        W1.verifier.to_string()[:-2] + "A=",
    ],
)
def test_bad_vkeys_are_refused(vkey: str) -> None:
    with pytest.raises(CosignatureError):
        CosignatureVerifier.parse(vkey)


def test_a_cosignature_verifies_and_fails_on_any_change() -> None:
    line = W1.cosign(TEXT, 1700000000)
    cosig = parse_line(line, W1.verifier)
    assert W1.verifier.verify(TEXT, cosig.timestamp, cosig.signature)
    assert not W1.verifier.verify(TEXT, cosig.timestamp + 1, cosig.signature)
    assert not W1.verifier.verify(TEXT.replace("5", "6", 1), cosig.timestamp, cosig.signature)
    assert not W2.verifier.verify(TEXT, cosig.timestamp, cosig.signature)


def test_a_timestamp_beyond_2_63_is_malformed() -> None:
    with pytest.raises(CosignatureError):
        signed_message(TEXT, 2**63)
    raw = bytearray(base64.b64decode(W1.cosign(TEXT, 5).split()[-1]))
    raw[4] = 0x80
    with pytest.raises(CosignatureError, match="2\\*\\*63"):
        parse_line(f"— witness.example/w1 {base64.b64encode(bytes(raw)).decode()}")


def _note(*cosigners: Cosigner, timestamp: int = 1700000000) -> bytes:
    return add_cosignatures(sign_note(TEXT, LOG), [c.cosign(TEXT, timestamp) for c in cosigners])


def _policy(k: int) -> WitnessPolicy:
    return WitnessPolicy({"w1": W1.verifier, "w2": W2.verifier, "w3": W3.verifier}, k)


def test_the_log_signature_still_opens_a_cosigned_note() -> None:
    note = _note(W1, W2)
    opened = open_note(note, LOG.verifier)
    assert opened.text == TEXT and len(opened.unverified_sigs) == 2


def test_policy_counts_distinct_known_witnesses_and_names_the_missing() -> None:
    result = _policy(2).require(_note(W1, W3))
    assert result.signed == ("w1", "w3") and result.missing == ("w2",)
    with pytest.raises(PolicyError, match="1 of the 2") as e:
        _policy(2).require(_note(W2))
    assert e.value.result.signed == ("w2",) and e.value.result.missing == ("w1", "w3")
    assert "missing w1, w3" in str(e.value)


def test_one_witness_signing_twice_counts_once() -> None:
    note = add_cosignatures(_note(W1), [W1.cosign(TEXT, 1700000001)])
    with pytest.raises(PolicyError):
        _policy(2).require(note)


def test_unknown_witnesses_are_ignored() -> None:
    stranger = Cosigner.from_seed("witness.example/w1", bytes([7]) * 32)  # same name, other key
    result = _policy(1).check(_note(stranger, W2))
    assert result.signed == ("w2",)


def test_a_bad_cosignature_by_a_known_witness_rejects_the_note() -> None:
    good = W1.cosign(TEXT, 1700000000)
    other = W1.cosign(TEXT.replace("5", "6", 1), 1700000000)  # W1's signature of another tree
    forged = good.rsplit(" ", 1)[0] + " " + other.rsplit(" ", 1)[1]
    with pytest.raises(CosignatureError, match="invalid cosignature by witness w1"):
        _policy(1).check(add_cosignatures(sign_note(TEXT, LOG), [forged]))


def test_policy_parse_and_bounds() -> None:
    policy = WitnessPolicy.parse([f"a={W1.verifier.to_string()}", f"b={W2.verifier.to_string()}"], 1)
    assert policy.threshold == 1 and set(policy.witnesses) == {"a", "b"}
    assert WitnessPolicy.parse([f"a={W1.verifier.to_string()}"]).threshold == 1
    for specs, k in [
        ([f"a={W1.verifier.to_string()}"], 2),
        ([f"a={W1.verifier.to_string()}"], 0),
        ([W1.verifier.to_string()], 1),
        ([f"a={W1.verifier.to_string()}", f"a={W2.verifier.to_string()}"], 1),
        ([f"a={W1.verifier.to_string()}", f"b={W1.verifier.to_string()}"], 1),
    ]:
        with pytest.raises(CosignatureError):
            WitnessPolicy.parse(specs, k)


def test_add_cosignatures_adds_each_line_once() -> None:
    note = sign_note(TEXT, LOG)
    line = W1.cosign(TEXT, 1)
    once = add_cosignatures(note, [line])
    assert add_cosignatures(once, [line, line]) == once
