"""Format 5, the co-dealt hand proof with its log receipts and seal statements (docs/hand-proof.md,
"Format 5"; docs/codealing-spec.md section 11.1).

Format 4's content (``fairdeck.codeal.handfile``) with each dealt position's seat key, every
co-dealer's seal statements (section 9.1), the receipts of the hand's setup, seals and seeds entries
to ONE signed checkpoint (C2SP tlog-proof texts, read and checked by ``fairdeck.log``'s own code),
the log key rotation statements that lead to that checkpoint, and the log key for display only.
Invariants: a format-5 proof is of a closed hand (its seeds revealed); the co-dealer keys and the log
keys are the caller's, never the file's. ``verify`` checks format 4 whole, then ``seal``,
``entries``, ``rotations``, ``checkpoint``, ``inclusion``, ``order`` and, with a witness policy,
``cosignatures``, and a failure names its step.
"""

from __future__ import annotations

import hmac
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, CodealEntry, decode_entry
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.handfile import TYPE, CodealHandProof, _hex, _int, _list, _names, _str
from fairdeck.codeal.keys import KeyRecord
from fairdeck.codeal.seal_log import Seal
from fairdeck.codeal.seal_statement import seal_statement, verifies
from fairdeck.core.decks import DeckSpec
from fairdeck.core.errors import VerificationError
from fairdeck.log import tlog_proof
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.cosignature import CosignatureError, WitnessPolicy
from fairdeck.log.handproof import check_receipts
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import InclusionProof
from fairdeck.log.rotation import MAX_CHAIN

FORMAT = 5
NAMES = {"type", "format", "deck", "hand_id", "codeal", "seals", "receipts", "key_rotations", "log_key"}
_STATEMENT = {"position", "seat_key", "sealed_sha256", "signature"}
_TIME = slice(5, 13)
"""Where an entry's u64(time_ms) is: after "FDL1" and the type byte (docs/log-format.md)."""


@dataclass(frozen=True)
class CodealerSeals:
    """Co-dealer ``holder``'s seal statements for the hand, positions ascending (its seals entry)."""

    holder: int
    statements: tuple[Seal, ...]


@dataclass(frozen=True)
class CodealReceipts:
    """The receipts of a co-dealt hand's setup entry, its seals entries (holders 1..K-1) and its seeds
    entry, all to one signed checkpoint."""

    setup: InclusionProof
    seals: tuple[InclusionProof, ...]
    seeds: InclusionProof

    def named(self) -> list[tuple[str, InclusionProof]]:
        """In log order, with the names the checks use: setup, seals 1 .. seals K-1, seeds."""
        seals = [(f"seals {k}", r) for k, r in enumerate(self.seals, start=1)]
        return [("setup", self.setup), *seals, ("seeds", self.seeds)]


@dataclass(frozen=True)
class LoggedCodealProof:
    proof: CodealHandProof
    seat_keys: tuple[bytes, ...]
    """One per dealt position of ``proof``: the X25519 key it was sealed to; empty for a public card."""
    seals: tuple[CodealerSeals, ...]
    receipts: CodealReceipts
    log_key: str
    """For display only: a verifier takes the log key from its user."""
    key_rotations: tuple[bytes, ...] = ()

    def to_json(self) -> str:
        top = {
            "type": TYPE,
            "format": FORMAT,
            "deck": self.proof.hand.deck,
            "hand_id": self.proof.hand.hand_id,
            "codeal": self.proof.codeal_value(self.seat_keys),
            "seals": [
                {
                    "holder": s.holder,
                    "statements": [
                        {"position": p, "seat_key": k.hex(), "sealed_sha256": d.hex(), "signature": g.hex()}
                        for p, k, d, g in s.statements
                    ],
                }
                for s in self.seals
            ],
            "receipts": {
                "setup": tlog_proof.to_text(self.receipts.setup),
                "seals": [tlog_proof.to_text(r) for r in self.receipts.seals],
                "seeds": tlog_proof.to_text(self.receipts.seeds),
            },
            "key_rotations": [note.decode("utf-8") for note in self.key_rotations],
            "log_key": self.log_key,
        }
        return json.dumps(top, indent=1) + "\n"

    @classmethod
    def from_value(cls, top: Any) -> LoggedCodealProof:
        """The proof from its strict JSON value (``fairdeck.log.handproof.read_value``), step encoding."""
        _names(top, NAMES, "hand proof")
        proof, seat_keys = CodealHandProof.read_record(top, FORMAT)
        if proof.hand.seeds is None:
            raise CodealError(
                "encoding", "codeal.seeds: a proof of format 5 is of a closed hand, with its seeds"
            )
        seals = []
        for i, item in enumerate(_list(top["seals"], "seals")):
            _names(item, {"holder", "statements"}, f"seals[{i}]")
            statements = []
            for j, s in enumerate(_list(item["statements"], f"seals[{i}].statements")):
                what = f"seals[{i}].statements[{j}]"
                _names(s, _STATEMENT, what)
                seal = (
                    _int(s["position"], f"{what}.position"),
                    _hex(s["seat_key"], f"{what}.seat_key"),
                    _hex(s["sealed_sha256"], f"{what}.sealed_sha256"),
                    _hex(s["signature"], f"{what}.signature"),
                )
                if (len(seal[1]), len(seal[2]), len(seal[3])) != (32, 32, 64):
                    raise CodealError(
                        "encoding", f"{what}: a seat key is 32 bytes, a digest 32 and a signature 64"
                    )
                statements.append(seal)
            seals.append(CodealerSeals(_int(item["holder"], f"seals[{i}].holder"), tuple(statements)))
        r = top["receipts"]
        _names(r, {"setup", "seals", "seeds"}, "receipts")
        receipts = CodealReceipts(
            _receipt(r["setup"], "receipts.setup"),
            tuple(
                _receipt(t, f"receipts.seals[{i}]") for i, t in enumerate(_list(r["seals"], "receipts.seals"))
            ),
            _receipt(r["seeds"], "receipts.seeds"),
        )
        rotations = _list(top["key_rotations"], "key_rotations")
        if not all(isinstance(n, str) for n in rotations) or len(rotations) > MAX_CHAIN:
            raise CodealError(
                "encoding", f"key_rotations: want at most {MAX_CHAIN} signed notes, each a string"
            )
        notes = tuple(n.encode("utf-8") for n in rotations)
        log_key = _str(top["log_key"], "log_key")
        return cls(proof, seat_keys, tuple(seals), receipts, log_key, notes)

    def verify(
        self,
        identity_keys: Sequence[bytes],
        verifier: Verifier | Sequence[Verifier],
        policy: WitnessPolicy | None = None,
    ) -> Checkpoint:
        """Every check, in the order of docs/hand-proof.md ("Format 5"); the checkpoint the entries are
        in. ``identity_keys``: the co-dealers' keys the user pins (holders 1..K-1); ``verifier``: the
        log keys the user gives (the file's statements only add keys those lead to)."""
        self.proof.verify(identity_keys)  # format 4: identities, then codealing-spec section 10 whole
        self._check_seals(identity_keys)
        self._check_entries()
        named = self.receipts.named()
        checkpoint = check_receipts(named, self.key_rotations, verifier)
        for (before, a), (after, b) in itertools.pairwise(named):
            if b.index <= a.index:
                raise VerificationError(
                    "order",
                    f"the {after} entry (index {b.index}) is not after the {before} entry (index {a.index})",
                )
        if policy is not None:
            try:
                policy.require(self.receipts.seeds.signed_checkpoint)
            except CosignatureError as e:
                raise VerificationError("cosignatures", str(e)) from None
        return checkpoint

    def _check_seals(self, identity_keys: Sequence[bytes]) -> None:
        """Step seal: every statement is its co-dealer's, and each sealed position names its seat key."""
        hand = self.proof.hand
        spec = DeckSpec.parse(hand.deck)
        records = [KeyRecord.decode(r, k) for k, r in enumerate(hand.keys)]
        ctx = HandContext(
            spec, hand.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records)
        )
        holders = ctx.holders
        if [s.holder for s in self.seals] != list(range(1, holders)):
            raise CodealError(
                "seal", f"want one list of seal statements per co-dealer, holders 1..{holders - 1} in order"
            )
        by_position: list[dict[int, bytes]] = []
        for s in self.seals:
            k, last, keys = s.holder, -1, {}
            for p, seat_key, digest, signature in s.statements:
                if not last < p < spec.size:
                    raise CodealError(
                        "seal",
                        f"co-dealer {k}'s seal statements: positions ascend, distinct, in 0..{spec.size - 1}",
                    )
                if not verifies(identity_keys[k - 1], seal_statement(ctx, p, k, seat_key, digest), signature):
                    raise CodealError(
                        "seal",
                        f"position {p}: co-dealer {k}'s seal statement does not verify under its pinned "
                        "identity key",
                    )
                last, keys[p] = p, seat_key
            by_position.append(keys)
        for d, seat_key in zip(hand.dealt, self.seat_keys, strict=True):
            p = d.position
            for k, keys in enumerate(by_position, start=1):
                named = keys.get(p)
                if not seat_key and named is not None:
                    raise CodealError("seal", f"position {p} is a public card, but co-dealer {k} sealed it")
                if seat_key and named is None:
                    raise CodealError("seal", f"position {p}: co-dealer {k} made no seal statement for it")
                if seat_key and named is not None and not hmac.compare_digest(named, seat_key):
                    raise CodealError(
                        "seal",
                        f"position {p} was sealed by co-dealer {k} to another key: "
                        "the dealer may have read this card",
                    )

    def _check_entries(self) -> None:
        """Step entries: each receipt's entry is the one this proof's fields give, but for its time."""
        hand = self.proof.hand
        holders = len(hand.keys)
        if len(self.receipts.seals) != holders - 1:
            raise VerificationError(
                "entries", f"want one seals receipt per co-dealer, holders 1..{holders - 1}"
            )
        want = [
            CodealEntry(SETUP, 0, hand.hand_id, hand.deck, hand.keys),
            *(
                CodealEntry(
                    SEALS, 0, hand.hand_id, records=tuple(map(_record, c.statements)), position=c.holder
                )
                for c in self.seals
            ),
            CodealEntry(SEEDS, 0, hand.hand_id, records=hand.seeds or ()),
        ]
        for (name, receipt), entry in zip(self.receipts.named(), want, strict=True):
            kind = name.split()[0]
            try:
                logged = decode_entry(receipt.entry)
            except CodealError:
                logged = None
            if logged is None or logged.kind != entry.kind or logged.hand_id != hand.hand_id:
                raise VerificationError("entries", f"the {name} receipt is not of this hand's {kind} entry")
            expected = bytearray(entry.encode())
            expected[_TIME] = receipt.entry[_TIME]
            if not hmac.compare_digest(bytes(expected), receipt.entry):
                raise VerificationError("entries", f"the logged {name} entry differs from this proof's")


def _record(seal: Seal) -> bytes:
    """A seal as a seals entry holds it: u32(p) || seat_pk || SHA-256(sealed) || signature."""
    p, seat_key, digest, signature = seal
    return p.to_bytes(4, "big") + seat_key + digest + signature


def _receipt(value: Any, what: str) -> InclusionProof:
    if not isinstance(value, str):
        raise CodealError("encoding", f"{what}: want a tlog-proof text")
    try:
        return tlog_proof.parse(value)
    except VerificationError as e:
        raise CodealError("encoding", f"{what}: {e.detail}") from None
