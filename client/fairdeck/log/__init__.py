"""fairdeck.log: the transparency log, as an auditor who trusts nobody checks it.

It owns the log's entries (``logentry``), the RFC 9162 Merkle tree and its proofs (``merkle``), C2SP
signed notes (``note``) and checkpoints (``checkpoint``), witness cosignatures and policies
(``cosignature``), the log as static tiles (``tiles``), offline receipts (``receipts``) and the auditor
that replays a whole log (``audit``). It imports only ``fairdeck.core``, the standard library and
``cryptography``: no grpc, no protobuf, not the SDK (tests/test_boundaries.py checks this).
"""

from fairdeck.log.audit import Auditor, AuditReport, Finding
from fairdeck.log.checkpoint import Checkpoint, CheckpointError, open_checkpoint, sign_checkpoint
from fairdeck.log.cosignature import WitnessPolicy
from fairdeck.log.logentry import CommitEntry, EntryError, RevealEntry, decode
from fairdeck.log.merkle import ProofError
from fairdeck.log.note import NoteError, Signer, Verifier
from fairdeck.log.receipts import InclusionProof

__all__ = [
    "AuditReport",
    "Auditor",
    "Checkpoint",
    "CheckpointError",
    "CommitEntry",
    "EntryError",
    "Finding",
    "InclusionProof",
    "NoteError",
    "ProofError",
    "RevealEntry",
    "Signer",
    "Verifier",
    "WitnessPolicy",
    "decode",
    "open_checkpoint",
    "sign_checkpoint",
]
