"""A receipt as a C2SP tlog-proof (https://c2sp.org/tlog-proof, the draft of C2SP main, commit
ab17a74, May 2026): the same index, audit path and signed checkpoint as ``InclusionProof``, in
the text form other transparency-log tools read: the header, ``extra <base64>`` (fairdeck puts
the log entry there, required, and trusted only once its leaf proves into the signed root),
``index <N>``, the audit path one base64 hash a line, an empty line, the checkpoint note.

Parsing is strict: canonical standard base64, the index below 2**64, nothing before the header
and every line where the text puts it. The tree size is the checkpoint's. A proof that does not
parse is a ``VerificationError`` at step ``log`` (``format`` inside a hand proof).
docs/hand-proof.md ("Format 2") has the lines and what the draft leaves open.

>>> from fairdeck.log.receipts import InclusionProof
>>> note = b"example.com/log\\n1\\nbjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=\\n\\n- sig\\n"
>>> text = to_text(InclusionProof(0, 1, (), b"entry", note))
>>> text.splitlines()[:3]
['c2sp.org/tlog-proof@v1', 'extra ZW50cnk=', 'index 0']
>>> parse(text) == InclusionProof(0, 1, (), b"entry", note)
True
"""

from __future__ import annotations

import base64
import binascii
import re

from fairdeck.core.errors import VerificationError
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, CheckpointError
from fairdeck.log.receipts import InclusionProof

HEADER = "c2sp.org/tlog-proof@v1"
EXTENSION = ".tlog-proof"
"""The text's file extension ("Proofs SHOULD be stored with file extension .tlog-proof")."""
MAX_BYTES = 256 * 1024  # a checkpoint note of 128 KiB, a 64 KiB entry in base64, 64 hashes
_INDEX = re.compile(r"index (0|[1-9][0-9]{0,19})")


def _fail(message: str) -> VerificationError:
    return VerificationError("log", f"malformed tlog-proof: {message}")


def to_text(proof: InclusionProof) -> str:
    """The tlog-proof text of a receipt (its entry in the ``extra`` line)."""
    lines = [HEADER, "extra " + base64.b64encode(proof.entry).decode("ascii"), f"index {proof.index}"]
    lines += [base64.b64encode(h).decode("ascii") for h in proof.hashes]
    return "\n".join(lines) + "\n\n" + proof.signed_checkpoint.decode("utf-8")


def _b64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or base64.b64encode(raw).decode("ascii") != text:
        raise _fail(f"{what} is not canonical standard base64")
    return raw


def parse(text: str | bytes) -> InclusionProof:
    """A receipt from a tlog-proof text; VerificationError (step ``log``) unless it is well formed."""
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise _fail(f"larger than {MAX_BYTES} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise _fail("not UTF-8") from None
    if len(text) > MAX_BYTES:
        raise _fail(f"larger than {MAX_BYTES} bytes")
    head, blank, note = text.partition("\n\n")
    if not blank:
        raise _fail("no empty line before the checkpoint")
    lines = head.split("\n")
    if lines[0] != HEADER:
        raise _fail(f"the first line must be {HEADER}")
    if len(lines) < 3 or not lines[1].startswith("extra "):
        raise _fail("a fairdeck receipt has an extra line holding its log entry")
    entry = _b64(lines[1].removeprefix("extra "), "the extra line")
    m = _INDEX.fullmatch(lines[2])
    if m is None:
        raise _fail("the third line must be `index N` (decimal, no leading zero)")
    index = int(m.group(1))
    if index > merkle.MAX_TREE_SIZE:
        raise _fail("the index is beyond 2**64-1")
    hashes = []
    for number, line in enumerate(lines[3:], start=1):
        h = _b64(line, f"proof hash {number}")
        if len(h) != merkle.HASH_SIZE:
            raise _fail(f"proof hash {number} is {len(h)} bytes, want {merkle.HASH_SIZE}")
        hashes.append(h)
    body = note.partition("\n\n")[0] + "\n"
    try:
        size = Checkpoint.parse(body).size
    except CheckpointError as e:
        raise _fail(f"the checkpoint: {e}") from None
    return InclusionProof(index, size, tuple(hashes), entry, note.encode("utf-8"))
