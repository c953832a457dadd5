"""``add-checkpoint`` of https://c2sp.org/tlog-witness, as a pure function of the request body.

``Witness`` makes every check in the order the text gives, each with the status code it names
(400 malformed, 404 unknown origin, 403 signatures, 400 old size above size, 409 with the stored
size as ``text/x.tlog.size``, 422 inconsistent), then stores the new checkpoint atomically with
the old-size check and answers 200 with its cosignature line. The checks, and the choices the text
leaves open: docs/witness.md ("Running a witness", "Choices").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from fairdeck.log.checkpoint import Checkpoint, CheckpointError
from fairdeck.log.cosignature import Cosigner
from fairdeck.log.merkle import EMPTY_ROOT, HASH_SIZE, ProofError, verify_consistency
from fairdeck.log.note import (
    MAX_NOTE_BYTES,
    SIG_PREFIX,
    InvalidSignatureError,
    MalformedNoteError,
    NoteError,
    UnverifiedNoteError,
    Verifier,
    open_note,
)
from fairdeck_server.witness.state import Conflict, Latest, WitnessState

log = logging.getLogger(__name__)

MAX_PROOF_LINES = 63  # tlog-witness, "add-checkpoint": "The client MUST NOT send more than 63"
_OLD_LINE = re.compile(rb"old (0|[1-9][0-9]{0,19})")
MAX_BODY_BYTES = len(b"old 18446744073709551615\n") + MAX_PROOF_LINES * 45 + 1 + MAX_NOTE_BYTES
"""The largest body a valid request can have: the old line, 63 proof lines, the blank line, a note."""

SIZE_CONTENT_TYPE = "text/x.tlog.size"  # tlog-witness, "add-checkpoint", the 409 answer
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Answer:
    """The HTTP answer to one request: status, body, content type, and a short label for metrics."""

    status: int
    body: bytes
    content_type: str = TEXT
    origin: str | None = None


def _refuse(status: int, reason: str, origin: str | None = None) -> Answer:
    return Answer(status, (reason + "\n").encode("utf-8"), TEXT, origin)


@dataclass(frozen=True, slots=True)
class Request:
    """A parsed add-checkpoint body: the old size, the proof hashes and the signed checkpoint note."""

    old_size: int
    proof: tuple[bytes, ...]
    note: bytes


class BadRequest(Exception):
    """The body is not a well-formed add-checkpoint request (400)."""


def parse_request(body: bytes) -> Request:
    """Split an add-checkpoint body into its parts; raise BadRequest, naming what is wrong."""
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"body is larger than {MAX_BODY_BYTES} bytes")
    end = body.find(b"\n")
    if end < 0 or (m := _OLD_LINE.fullmatch(body[:end])) is None:
        raise BadRequest("the first line must be 'old N' (N in decimal, no leading zeroes)")
    old_size = int(m.group(1))
    if old_size > 2**64 - 1:
        raise BadRequest("old size is beyond 2**64-1")
    proof: list[bytes] = []
    at = end + 1
    while True:
        end = body.find(b"\n", at)
        if end < 0:
            raise BadRequest("no empty line between the consistency proof and the checkpoint")
        line = body[at:end]
        at = end + 1
        if not line:
            break
        if len(proof) == MAX_PROOF_LINES:
            raise BadRequest(f"more than {MAX_PROOF_LINES} consistency proof lines")
        try:
            digest = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            digest = b""
        if len(digest) != HASH_SIZE or base64.b64encode(digest) != line:
            raise BadRequest(f"consistency proof line {len(proof) + 1} is not one base64 hash")
        proof.append(digest)
    return Request(old_size, tuple(proof), body[at:])


class Witness:
    """A witness: its key, the logs it knows (origin -> trusted keys) and its state."""

    def __init__(
        self,
        cosigner: Cosigner,
        logs: Mapping[str, Iterable[Verifier]],
        state: WitnessState,
        *,
        clock: Callable[[], float] = time.time,
        on_cosigned: Callable[[Latest], None] | None = None,
    ) -> None:
        self.cosigner = cosigner
        self.logs = {origin: tuple(keys) for origin, keys in logs.items()}
        self.state = state
        self._clock = clock
        self._on_cosigned = on_cosigned

    def add_checkpoint(self, body: bytes) -> Answer:
        """Answer one add-checkpoint request body (tlog-witness, "add-checkpoint")."""
        try:
            request = parse_request(body)
        except BadRequest as e:
            return _refuse(400, str(e))
        # The origin first: an unknown origin is 404 whatever its signatures are.
        first, newline, _ = request.note.partition(b"\n")
        try:
            origin = first.decode("utf-8")
        except UnicodeDecodeError:
            return _refuse(400, "the checkpoint's origin line is not UTF-8")
        if not newline or not origin:
            return _refuse(400, "the checkpoint has no origin line")
        keys = self.logs.get(origin)
        if keys is None:
            return _refuse(404, "unknown log origin")
        try:
            opened = open_note(request.note, keys)
        except (UnverifiedNoteError, InvalidSignatureError) as e:
            return _refuse(403, f"checkpoint signature: {e}", origin)
        except MalformedNoteError as e:
            return _refuse(400, f"checkpoint note: {e}", origin)
        except NoteError as e:  # two configured keys share a name and ID: a configuration fault
            return _refuse(403, f"checkpoint signature: {e}", origin)
        try:
            checkpoint = Checkpoint.parse(opened.text)
        except CheckpointError as e:
            return _refuse(400, f"checkpoint: {e}", origin)
        if request.old_size > checkpoint.size:
            return _refuse(400, f"old size {request.old_size} exceeds the checkpoint size {checkpoint.size}")
        verified_lines = "".join(f"{SIG_PREFIX}{s.name} {s.base64}\n" for s in opened.sigs)

        def decide(stored: Latest | None) -> Latest:
            _check_consistency(request, checkpoint, stored)
            # tlog-witness: "the timestamp MUST NOT be zero".
            timestamp = max(1, int(self._clock()))
            line = self.cosigner.cosign(opened.text, timestamp)
            # What a monitor gets back (tlog-witness, "Monitor Retrieval Mechanism"): the log's
            # verified signatures and ours, not the other lines the client sent.
            note = (opened.text + "\n" + verified_lines + line).encode("utf-8")
            return Latest(origin, checkpoint.size, checkpoint.root, note, timestamp)

        try:
            new = self.state.advance(origin, request.old_size, decide)
        except Conflict as e:
            return Answer(409, f"{e.size}\n".encode("ascii"), SIZE_CONTENT_TYPE, origin)
        except ProofError as e:
            log.warning("refused an inconsistent checkpoint of %s at size %d: %s", origin, checkpoint.size, e)
            return _refuse(422, f"consistency: {e}", origin)
        if self._on_cosigned is not None:
            self._on_cosigned(new)
        our_line = new.note.decode("utf-8").rsplit("\n", 2)[-2] + "\n"
        return Answer(200, our_line.encode("utf-8"), TEXT, origin)

    def checkpoint_for(self, origin_hash: str) -> Answer:
        """``GET <prefix>/<origin hash>/checkpoint`` (tlog-witness, "Monitor Retrieval Mechanism")."""
        for latest in self.state.origins():
            if _origin_hash(latest.origin) == origin_hash:
                return Answer(200, latest.note, TEXT, latest.origin)
        return _refuse(404, "this witness has not cosigned a checkpoint of that log")


def _origin_hash(origin: str) -> str:
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


def _check_consistency(request: Request, checkpoint: Checkpoint, stored: Latest | None) -> None:
    """The 422 checks of tlog-witness "add-checkpoint", against the stored checkpoint; raise ProofError."""
    if checkpoint.size == 0 and checkpoint.root != EMPTY_ROOT:
        raise ProofError("a checkpoint of size 0 must have the root hash of the empty tree")
    if request.old_size == 0:
        if request.proof:
            raise ProofError("a consistency proof from size 0 must be empty")
        return
    assert stored is not None and stored.size == request.old_size  # checked by WitnessState.advance
    # Equal sizes: verify_consistency wants an empty proof and equal roots, as the text does.
    verify_consistency(request.old_size, checkpoint.size, list(request.proof), stored.root, checkpoint.root)
