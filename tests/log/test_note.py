"""Signed notes (c2sp.org/signed-note) and checkpoints (c2sp.org/tlog-checkpoint):
known answers from Go's golang.org/x/mod/sumdb/note and from sum.golang.org,
round trips, and every strict-parsing rejection."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.log.checkpoint import Checkpoint, CheckpointError, open_checkpoint, sign_checkpoint
from fairdeck.log.merkle import EMPTY_ROOT, MAX_TREE_SIZE
from fairdeck.log.note import (
    MAX_NOTE_BYTES,
    MAX_SIGNATURES,
    InvalidSignatureError,
    MalformedNoteError,
    Note,
    NoteError,
    Signature,
    Signer,
    UnverifiedNoteError,
    Verifier,
    generate_key,
    is_valid_key_name,
    key_id,
    open_note,
    sign_note,
)

# --- known answers: golang.org/x/mod/sumdb/note (note.go doc comment and note_test.go) ---------------

PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"  # Go's zero-seed test key
TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
PETER_B64 = "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
ENOCH_B64 = "rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ="
PETER_SIG = f"— PeterNeumann {PETER_B64}\n"
ENOCH_SIG = f"— EnochRoot {ENOCH_B64}\n"
PETER = Signature("PeterNeumann", 0xC74F20A3, PETER_B64)
ENOCH = Signature("EnochRoot", 0xAF0CFE78, ENOCH_B64)

# --- known answer: a checkpoint of the Go checksum database ---------------------------------------------
# The key is the one compiled into the go command (cmd/go/internal/modfetch/key.go); the
# checkpoint was served by https://sum.golang.org/latest on 2024-09-23 (as quoted in sigsum-go's tests).

SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_CHECKPOINT = (
    "go.sum database tree\n"
    "30055305\n"
    "mXfgRcJ0bG0j3CPdKwgGWtUzBUbX67saZGRmFuJGGsM=\n"
    "\n"
    "— sum.golang.org "
    "Az3grpgEild5qw7+5dtV13Kf1C2Xurm8q4fhdxvcsDHnqNTaxL2AFjBY+2TyGKevucFcAAlWFJJYle3EJlDCrQ+y3A8=\n"
).encode()


def peter() -> Verifier:
    return Verifier.parse(PETER_VKEY)


def enoch() -> Verifier:
    return Verifier.parse(ENOCH_VKEY)


def msg(*parts: str) -> bytes:
    return "".join(parts).encode()


def bsplice(s: str, at: int, insert: str) -> str:
    """Insert at a byte offset, as Go's note_test.go does with string slicing."""
    b = s.encode()
    return (b[:at] + insert.encode() + b[at:]).decode()


def test_go_keys_parse_and_print_back() -> None:
    v = peter()
    assert (v.name, v.key_id) == ("PeterNeumann", 0xC74F20A3)
    assert v.to_string() == PETER_VKEY
    s = Signer.parse(PETER_SKEY)
    assert (s.name, s.key_id) == ("PeterNeumann", 0xC74F20A3)
    assert s.to_string() == PETER_SKEY
    assert s.verifier == v
    assert key_id("PeterNeumann", v.public_key) == 0xC74F20A3
    digest = hashlib.sha256(b"PeterNeumann\n\x01" + v.public_key).digest()
    assert v.key_id == int.from_bytes(digest[:4], "big")


def test_a_signer_derives_its_verifier_once() -> None:
    """The dealer answers every GetPublicKey from ``signer.verifier``: deriving the Ed25519
    public key anew each time was a third of that call's CPU (bench/README.md, the fuzz)."""
    s = Signer.parse(PETER_SKEY)
    assert s.verifier is s.verifier
    assert s.verifier == peter()


def test_go_sign_known_answer() -> None:
    """Ed25519 is deterministic: our note is Go's, byte for byte."""
    assert sign_note(TEXT, Signer.parse(PETER_SKEY)) == msg(TEXT, "\n", PETER_SIG)
    enoch_signer = Signer.from_seed("EnochRoot", bytes(32))
    assert enoch_signer.verifier.to_string() == ENOCH_VKEY
    assert sign_note(TEXT, enoch_signer) == msg(TEXT, "\n", ENOCH_SIG)
    both = sign_note(TEXT, Signer.parse(PETER_SKEY), enoch_signer)
    assert both == msg(TEXT, "\n", PETER_SIG, ENOCH_SIG)


def test_go_open_known_answers() -> None:
    m = msg(TEXT, "\n", PETER_SIG, ENOCH_SIG)
    # One known key: one verified signature, the other kept as unverified.
    assert open_note(m, [peter()]) == Note(TEXT, (PETER,), (ENOCH,))
    assert open_note(m, peter()) == Note(TEXT, (PETER,), (ENOCH,))
    # Both known.
    assert open_note(m, [peter(), enoch()]) == Note(TEXT, (PETER, ENOCH), ())
    # None known: unverified, with the parsed note in the error.
    with pytest.raises(UnverifiedNoteError) as info:
        open_note(m, [])
    assert info.value.note == Note(TEXT, (), (PETER, ENOCH))
    # A bad signature by a known key rejects the whole note.
    bad = bsplice(PETER_SIG, 60, "ABCD")
    with pytest.raises(InvalidSignatureError, match=r"PeterNeumann\+c74f20a3") as bad_info:
        open_note(msg(TEXT, "\n", bad), [peter()])
    assert (bad_info.value.name, bad_info.value.key_id) == ("PeterNeumann", 0xC74F20A3)
    # Repeated signatures: a known key's first one counts, identical unknown lines are kept once.
    enoch_abcd = bsplice(ENOCH_SIG, 60, "ABCD")
    n = open_note(msg(TEXT, "\n", PETER_SIG, PETER_SIG, ENOCH_SIG, ENOCH_SIG, enoch_abcd), [peter()])
    assert n.sigs == (PETER,)
    assert n.unverified_sigs == (ENOCH, Signature("EnochRoot", 0xAF0CFE78, enoch_abcd.split()[-1]))


def test_go_malformed_messages() -> None:
    for bad in [
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG,
        TEXT + "\n— Bad Name " + PETER_B64 + "\n",
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
    ]:
        with pytest.raises(MalformedNoteError):
            open_note(bad.encode(), [peter()])
    with pytest.raises(MalformedNoteError, match="UTF-8"):
        open_note(b"\xff" + msg(TEXT, "\n", PETER_SIG), [peter()])


def test_go_too_many_signatures() -> None:
    for known in ([peter()], []):
        with pytest.raises(MalformedNoteError, match="more than 100"):
            open_note(msg(TEXT, "\n", PETER_SIG * 101), known)
    assert open_note(msg(TEXT, "\n", PETER_SIG * 100), [peter()]).sigs == (PETER,)
    assert MAX_SIGNATURES == 100


def _all_substrings_and_bumps(key: str) -> list[str]:
    out = [
        key[i:j] for i in range(len(key) + 1) for j in range(i + 1, len(key) + 1) if (i, j) != (0, len(key))
    ]
    out += [key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :] for i in range(len(key))]
    return out


def test_go_verifier_key_manglings_rejected() -> None:
    for bad in _all_substrings_and_bumps(PETER_VKEY):
        with pytest.raises(NoteError):
            Verifier.parse(bad)
    with pytest.raises(NoteError):  # wrong length, adjusted hash (and not canonical base64 either)
        Verifier.parse("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==")
    with pytest.raises(NoteError, match="unsupported verifier key type"):  # unknown algorithm
        Verifier.parse("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")


def test_go_signer_key_manglings_rejected() -> None:
    for bad in _all_substrings_and_bumps(PETER_SKEY):
        with pytest.raises(NoteError):
            Signer.parse(bad)


def test_key_strictness() -> None:
    with pytest.raises(NoteError, match="lowercase hex"):
        Verifier.parse(PETER_VKEY.replace("c74f20a3", "C74F20A3"))
    with pytest.raises(NoteError, match="does not match"):
        Verifier.parse(PETER_VKEY[:-1] + "X")  # 33 bytes: every bit counts, so this is a different key
    with pytest.raises(NoteError, match="canonical base64"):
        Verifier.parse(PETER_VKEY + "==")
    with pytest.raises(NoteError):
        Verifier.parse(PETER_VKEY + "\n")
    with pytest.raises(NoteError):
        Verifier.parse(" " + PETER_VKEY)
    with pytest.raises(NoteError):
        Verifier("PeterNeumann", 0xC74F20A4, peter().public_key)
    with pytest.raises(NoteError):
        Verifier.from_public_key("PeterNeumann", peter().public_key[:31])
    with pytest.raises(NoteError):
        Signer("PeterNeumann", 0xC74F20A3, bytes(32))  # key ID of another key
    with pytest.raises(NoteError):
        Signer.from_seed("name", bytes(31))
    for name in ["", "a b", "a+b", "a\u00a0b", "a\u3000b", "tab\there", "nl\n", "\x01", "\ud800"]:
        assert not is_valid_key_name(name)
        with pytest.raises(NoteError):
            Signer.from_seed(name, bytes(32))
    for name in ["a", "example.com/log", "go.sum/tree", "ünïcode", "—"]:
        assert is_valid_key_name(name)


def test_generated_keys_and_secret_handling() -> None:
    skey, vkey = generate_key("example.com/fairdeck")
    signer, verifier = Signer.parse(skey), Verifier.parse(vkey)
    assert signer.verifier == verifier
    assert re.fullmatch(r"example\.com/fairdeck\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}", vkey)
    # PRIVATE+KEY+name+hash+base64: the base64 may hold "+" itself, so split off only the first four
    assert signer.seed.hex() not in repr(signer) and skey.split("+", 4)[4] not in repr(signer)
    assert open_note(sign_note("x\n", signer), [verifier]).text == "x\n"
    assert Signer.generate("a").seed != Signer.generate("a").seed


# --- real-world checkpoint: sum.golang.org ------------------------------------------------------------


def test_sum_golang_org_checkpoint() -> None:
    v = Verifier.parse(SUMDB_VKEY)
    cp = open_checkpoint(SUMDB_CHECKPOINT, v, "go.sum database tree")
    assert cp == Checkpoint(
        "go.sum database tree", 30055305, base64.b64decode("mXfgRcJ0bG0j3CPdKwgGWtUzBUbX67saZGRmFuJGGsM=")
    )
    assert SUMDB_CHECKPOINT.startswith(cp.to_text().encode() + b"\n\xe2\x80\x94 ")
    tampered = SUMDB_CHECKPOINT.replace(b"30055305", b"30055306")
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(tampered, v, "go.sum database tree")
    assert isinstance(info.value.__cause__, InvalidSignatureError)
    with pytest.raises(CheckpointError, match="origin"):
        open_checkpoint(SUMDB_CHECKPOINT, v, "sum.golang.org")


# --- round trips -----------------------------------------------------------------------------------------

SIGNER = Signer.from_seed("example.com/fairdeck", bytes(range(32)))
OTHER = Signer.from_seed("example.com/witness", bytes(range(1, 33)))

_text_chars = st.characters(exclude_categories=["Cs"], exclude_characters="".join(map(chr, range(32))))
_texts = st.lists(st.text(_text_chars, max_size=40), min_size=1, max_size=6).map(
    lambda lines: "".join(line + "\n" for line in lines)
)
_names = st.text(
    st.characters(exclude_categories=["Cs", "Zs", "Zl", "Zp", "Cc"], exclude_characters="+\x85"),
    min_size=1,
    max_size=20,
)


@given(text=_texts, name=_names, seed=st.binary(min_size=32, max_size=32))
@settings(max_examples=100, deadline=None)
def test_round_trip(text: str, name: str, seed: bytes) -> None:
    signer = Signer.from_seed(name, seed)
    assert Signer.parse(signer.to_string()) == signer
    assert Verifier.parse(signer.verifier.to_string()) == signer.verifier
    m = sign_note(text, signer)
    n = open_note(m, [signer.verifier])
    assert n.text == text and [s.name for s in n.sigs] == [name] and n.unverified_sigs == ()


@given(position=st.integers(0, 10_000), value=st.integers(0, 255))
@settings(max_examples=300, deadline=None)
def test_any_single_byte_change_is_rejected(position: int, value: int) -> None:
    m = sign_note("example.com/fairdeck\n42\n" + base64.b64encode(bytes(32)).decode() + "\n", SIGNER)
    position %= len(m)
    if m[position] == value:
        return
    changed = m[:position] + bytes([value]) + m[position + 1 :]
    with pytest.raises(NoteError):
        open_note(changed, [SIGNER.verifier])


def test_text_with_blank_lines_round_trips() -> None:
    for text in ["a\n\nb\n", "\n", "a\n\n\n", "— looks like a signature\n"]:
        assert open_note(sign_note(text, SIGNER), [SIGNER.verifier]).text == text


# --- strict parsing of notes -------------------------------------------------------------------------


def stray_bits(b64: str) -> str:
    """The same base64 with a nonzero unused bit in its last character: decodable, not canonical."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    data = b64.rstrip("=")
    assert b64 != data, "needs padding, hence unused bits"
    last = alphabet[alphabet.index(data[-1]) | 1]
    return data[:-1] + last + b64[len(data) :]


def _good() -> bytes:
    return sign_note("hello\n", SIGNER)


def _sig_line(signer: Signer, payload: bytes) -> str:
    return f"— {signer.name} {base64.b64encode(payload).decode()}\n"


def test_sign_note_rejects_bad_text() -> None:
    for text in ["no newline", "", "tab\there\n", "cr\r\n", "nul\x00\n", "\ud800\n"]:
        with pytest.raises(NoteError):
            sign_note(text, SIGNER)
    with pytest.raises(NoteError, match="at least one signer"):
        sign_note("x\n")
    with pytest.raises(NoteError, match="twice"):
        sign_note("x\n", SIGNER, SIGNER)
    with pytest.raises(NoteError, match="exceed"):
        sign_note("x" * MAX_NOTE_BYTES + "\n", SIGNER)


def test_open_note_rejects_malformed() -> None:
    good = _good().decode()
    text, line = good.split("\n\n")
    kid_sig = base64.b64decode(line.split()[-1])
    b64 = line.split()[-1]
    cases = {
        "missing final newline": good[:-1],
        "no blank line": text + "\n" + line,
        "no signature": text + "\n\n",
        "ascii dashes": good.replace("—", "--"),
        "en dash": good.replace("—", "–"),
        "no space after dash": good.replace("— ", "—"),
        "two spaces": good.replace(f"{SIGNER.name} ", f"{SIGNER.name}  "),
        "no signature field": text + "\n\n— " + SIGNER.name + "\n",
        "empty signature": text + "\n\n— " + SIGNER.name + " \n",
        "trailing space": good[:-1] + " \n",
        "missing padding": good.replace(b64, b64.rstrip("=")),
        "bad base64 char": good.replace(b64, "!" + b64[1:]),
        "url-safe base64 char": good.replace(b64, "-" + b64[1:]),
        "non-canonical base64": good.replace(b64, stray_bits(b64)),
        "signature of 4 bytes": text + "\n\n" + _sig_line(SIGNER, kid_sig[:4]),
        "signature of 0 bytes": text + "\n\n— " + SIGNER.name + " =\n",
        "crlf": good.replace("\n", "\r\n"),
        "control char": "\x07" + good,
        "trailing data": good + "junk",
        "trailing line": good + "junk\n",
        "trailing blank line": good + "\n",
        "space in name": text + "\n\n— " + "a b" + " " + b64 + "\n",
        "plus in name": text + "\n\n— " + "a+b" + " " + b64 + "\n",
    }
    assert base64.b64decode(stray_bits(b64)) == kid_sig
    for what, bad in cases.items():
        try:
            open_note(bad.encode(), [SIGNER.verifier])
        except MalformedNoteError:
            continue
        pytest.fail(f"accepted or misclassified: {what}")
    with pytest.raises(MalformedNoteError, match="larger than"):
        open_note(b"x" * (MAX_NOTE_BYTES - len(good) + 1) + good.encode(), [SIGNER.verifier])
    with pytest.raises(MalformedNoteError):
        open_note(good, [SIGNER.verifier])  # type: ignore[arg-type]


def test_open_note_signature_checks() -> None:
    good = _good()
    text = good.decode().split("\n\n")[0] + "\n"
    kid = SIGNER.key_id.to_bytes(4, "big")
    # Tampered body.
    with pytest.raises(InvalidSignatureError):
        open_note(good.replace(b"hello", b"hellO"), [SIGNER.verifier])
    # A known key's signature of the wrong length is a bad signature, not a malformed note.
    for payload in (kid + b"\x00", kid + bytes(63), kid + bytes(65)):
        with pytest.raises(InvalidSignatureError):
            open_note(msg(text, "\n", _sig_line(SIGNER, payload)), [SIGNER.verifier])
    # Only unknown keys.
    with pytest.raises(UnverifiedNoteError) as info:
        open_note(good, [OTHER.verifier])
    assert info.value.note.text == text and len(info.value.note.unverified_sigs) == 1
    with pytest.raises(UnverifiedNoteError):
        open_note(good, [])
    # Unknown keys are ignored: other names, and a known name or key ID with the other half wrong.
    same_name = Signer.from_seed(SIGNER.name, bytes(32))
    same_id = _sig_line(OTHER, kid + OTHER.sign(text.encode()))
    for extra in (sign_note(text, OTHER), sign_note(text, same_name)):
        extra_line = extra.decode().split("\n\n")[1]
        for order in (
            (extra_line, good.decode().split("\n\n")[1]),
            (good.decode().split("\n\n")[1], extra_line),
        ):
            n = open_note(msg(text, "\n", *order), [SIGNER.verifier])
            assert [s.name for s in n.sigs] == [SIGNER.name] and len(n.unverified_sigs) == 1
    n = open_note(msg(text, "\n", same_id, good.decode().split("\n\n")[1]), [SIGNER.verifier])
    assert n.unverified_sigs == (Signature(OTHER.name, SIGNER.key_id, same_id.split()[-1]),)
    # Unknown keys' signatures may be short or odd-sized: 5 bytes is enough to be kept.
    n = open_note(
        msg(text, "\n", _sig_line(OTHER, bytes(5)), good.decode().split("\n\n")[1]), [SIGNER.verifier]
    )
    assert len(n.unverified_sigs) == 1
    # Duplicates by a known key, as in Go: only the first is checked.
    line = good.decode().split("\n\n")[1]
    bad_line = _sig_line(SIGNER, kid + bytes(64))
    assert open_note(msg(text, "\n", line, bad_line), [SIGNER.verifier]).sigs == (
        Signature(SIGNER.name, SIGNER.key_id, line.split()[-1]),
    )
    with pytest.raises(InvalidSignatureError):
        open_note(msg(text, "\n", bad_line, line), [SIGNER.verifier])
    # Two signers, both known.
    both = sign_note(text, SIGNER, OTHER)
    assert len(open_note(both, [SIGNER.verifier, OTHER.verifier]).sigs) == 2
    # The same verifier passed twice is fine.
    assert open_note(good, [SIGNER.verifier, SIGNER.verifier]).sigs


def test_open_note_ambiguous_verifiers() -> None:
    # Two different public keys with the same name and key ID cannot be built
    # honestly (that is a 32-bit collision); fake one past the constructor.
    impostor = object.__new__(Verifier)
    for attr, value in (
        ("name", SIGNER.name),
        ("key_id", SIGNER.key_id),
        ("public_key", OTHER.verifier.public_key),
    ):
        object.__setattr__(impostor, attr, value)
    object.__setattr__(impostor, "_key", OTHER.verifier._key)
    with pytest.raises(NoteError, match="ambiguous"):
        open_note(_good(), [SIGNER.verifier, impostor])
    with pytest.raises(TypeError):
        open_note(_good(), [PETER_VKEY])  # type: ignore[list-item]


# --- checkpoints -------------------------------------------------------------------------------------

ROOT = hashlib.sha256(b"some root").digest()
ROOT64 = base64.b64encode(ROOT).decode()
ORIGIN = "example.com/fairdeck"


def test_checkpoint_text_and_round_trip() -> None:
    cp = Checkpoint(ORIGIN, 12345, ROOT)
    assert cp.to_text() == f"{ORIGIN}\n12345\n{ROOT64}\n"
    assert Checkpoint.parse(cp.to_text()) == cp
    ext = Checkpoint(ORIGIN, 0, EMPTY_ROOT, ("— a note-like extension", "x"))
    assert (
        ext.to_text()
        == f"{ORIGIN}\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n— a note-like extension\nx\n"
    )
    assert Checkpoint.parse(ext.to_text()) == ext
    signed = sign_checkpoint(ext, SIGNER)
    assert open_checkpoint(signed, SIGNER.verifier, ORIGIN) == ext
    big = Checkpoint(ORIGIN, MAX_TREE_SIZE, ROOT)
    assert Checkpoint.parse(big.to_text()) == big


@given(
    origin=st.text(_text_chars, min_size=1, max_size=30),
    size=st.integers(0, MAX_TREE_SIZE),
    root=st.binary(min_size=32, max_size=32),
    extensions=st.lists(st.text(_text_chars, min_size=1, max_size=10), max_size=3).map(tuple),
)
@settings(max_examples=100, deadline=None)
def test_checkpoint_round_trip_property(
    origin: str, size: int, root: bytes, extensions: tuple[str, ...]
) -> None:
    cp = Checkpoint(origin, size, root, extensions)
    assert Checkpoint.parse(cp.to_text()) == cp
    assert open_checkpoint(sign_checkpoint(cp, SIGNER), SIGNER.verifier, origin) == cp


@pytest.mark.parametrize(
    "size",
    [
        "01",
        "00",
        "+1",
        "-1",
        " 1",
        "1 ",
        "1_000",
        "1e3",
        "0x10",
        "١٢",
        "１",
        "",
        "18446744073709551616",
        "9" * 21,
    ],
)
def test_checkpoint_rejects_non_canonical_size(size: str) -> None:
    with pytest.raises(CheckpointError):
        Checkpoint.parse(f"{ORIGIN}\n{size}\n{ROOT64}\n")


@pytest.mark.parametrize(
    "root",
    [
        "",
        ROOT64.rstrip("="),  # missing padding
        ROOT64 + "=",
        stray_bits(ROOT64),  # decodes to ROOT, but is not the canonical encoding
        ROOT64 + " ",
        " " + ROOT64,
        ROOT64 + "x",  # trailing data
        "!" + ROOT64[1:],
        base64.urlsafe_b64encode(b"\xfb" * 32).decode(),
        base64.b64encode(bytes(31)).decode(),  # wrong length
        base64.b64encode(bytes(33)).decode(),
        base64.b64encode(bytes(16)).decode(),
        ROOT.hex(),
    ],
)
def test_checkpoint_rejects_bad_root(root: str) -> None:
    with pytest.raises(CheckpointError):
        Checkpoint.parse(f"{ORIGIN}\n1\n{root}\n")


def test_checkpoint_rejects_bad_layout() -> None:
    good = f"{ORIGIN}\n1\n{ROOT64}\n"
    Checkpoint.parse(good)
    for bad in [
        good[:-1],  # missing final newline
        f"{ORIGIN}\n1\n",  # no root
        f"{ORIGIN}\n",
        "",
        f"\n1\n{ROOT64}\n",  # empty origin
        good + "\n",  # empty extension line
        good + "ext\n\n",
        good + "ext",  # trailing data without newline
        good.replace("\n", "\r\n"),
        "\t" + good,
    ]:
        with pytest.raises(CheckpointError):
            Checkpoint.parse(bad)
    with pytest.raises(CheckpointError):
        Checkpoint.parse(good.encode())  # type: ignore[arg-type]


def test_checkpoint_constructor_validates() -> None:
    for args in [
        ("", 1, ROOT),
        ("a\nb", 1, ROOT),
        ("a\x00", 1, ROOT),
        (ORIGIN, -1, ROOT),
        (ORIGIN, MAX_TREE_SIZE + 1, ROOT),
        (ORIGIN, True, ROOT),
        (ORIGIN, 1.0, ROOT),
        (ORIGIN, 1, ROOT[:31]),
        (ORIGIN, 1, ROOT64),
        (ORIGIN, 1, ROOT, ("",)),
        (ORIGIN, 1, ROOT, ("a\nb",)),
        (ORIGIN, 1, ROOT, ["x"]),
    ]:
        with pytest.raises(CheckpointError):
            Checkpoint(*args)  # type: ignore[arg-type]


def test_open_checkpoint_rejections() -> None:
    cp = Checkpoint(ORIGIN, 7, ROOT)
    signed = sign_checkpoint(cp, SIGNER)
    # Wrong origin.
    with pytest.raises(CheckpointError, match="origin"):
        open_checkpoint(signed, SIGNER.verifier, "example.com/other")
    # Signed by someone else only.
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(sign_checkpoint(cp, OTHER), SIGNER.verifier, ORIGIN)
    assert isinstance(info.value.__cause__, UnverifiedNoteError)
    # Tampered size or root.
    for tampered in (
        signed.replace(b"\n7\n", b"\n8\n"),
        signed.replace(ROOT64.encode(), base64.b64encode(EMPTY_ROOT)),
    ):
        with pytest.raises(CheckpointError) as info:
            open_checkpoint(tampered, SIGNER.verifier, ORIGIN)
        assert isinstance(info.value.__cause__, InvalidSignatureError)
    # A validly signed but non-canonical body is still refused.
    for body in (f"{ORIGIN}\n07\n{ROOT64}\n", f"{ORIGIN}\n+7\n{ROOT64}\n", f"{ORIGIN}\n7\n{ROOT64[:-1]}\n"):
        with pytest.raises(CheckpointError):
            open_checkpoint(sign_note(body, SIGNER), SIGNER.verifier, ORIGIN)
    # Cosignatures by unknown keys (witnesses) are ignored.
    cosigned = sign_note(cp.to_text(), OTHER, SIGNER)
    assert open_checkpoint(cosigned, SIGNER.verifier, ORIGIN) == cp
    # Malformed note layer.
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(signed + b"junk", SIGNER.verifier, ORIGIN)
    assert isinstance(info.value.__cause__, MalformedNoteError)
