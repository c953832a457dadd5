"""Generate fairdeck-codeal-proofs-v2.json: known-answer vectors of format 5 of docs/hand-proof.md,
the co-dealt hand proof with its log receipts and the co-dealers' seal statements.

Run from the repository root, with fairdeck installed:

    python docs/vectors/generate_codeal_proofs_v2.py           # (re)write the file
    python docs/vectors/generate_codeal_proofs_v2.py --check   # exit 1 if the file differs

Deterministic: every secret, nonce, seat key, identity key and the log key come from SHAKE-256 of
fixed labels. One signed log holds the hands' co-dealt entries (docs/log-format.md, types 3 to 7),
as a dealer appends them, plus a hand logged out of order (its seeds before its setup and seals,
then again) for the `order` cases. Each case is a file's text, the co-dealer identity keys and the
log keys a player gives, and the first line ``fairdeck verify --codealer-key K --key L`` prints;
``invalid`` ones name their ``step``. Published vectors never change: add, never alter.
"""

# ruff: noqa: E501  (the cases below are a table: one case a line)
from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from fairdeck.cli.commands import main as fairdeck
from fairdeck.codeal.context import HandContext
from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, SHARES, SHUFFLE, CodealEntry
from fairdeck.codeal.handfile import CodealerSignatures, CodealHandProof
from fairdeck.codeal.identity import key_statement, shuffle_statement, sign
from fairdeck.codeal.keys import KeyRecord, new_holder
from fairdeck.codeal.local import codeal_local
from fairdeck.codeal.logged_proof import CodealerSeals, CodealReceipts, LoggedCodealProof
from fairdeck.codeal.seal import seal_share
from fairdeck.codeal.seal_statement import seal_statement, sign_seal
from fairdeck.codeal.verify import CodealHand
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import u64
from fairdeck.log import merkle, tlog_proof
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.note import Signer
from fairdeck.log.receipts import InclusionProof

OUTPUT = Path(__file__).with_name("fairdeck-codeal-proofs-v2.json")
ORIGIN = "example.com/fairdeck-codeal-proofs"
Case = dict[str, Any]


def drbg(label: str) -> Callable[[int], bytes]:
    """Bytes from SHAKE-256 of a fixed label and a counter: the vectors' only source of randomness."""
    counter = 0

    def read(n: int) -> bytes:
        nonlocal counter
        counter += 1
        return hashlib.shake_256(
            b"fairdeck codeal proof vectors v2\n" + label.encode() + u64(counter)
        ).digest(n)

    return read


def identity(name: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(drbg(f"identity/{name}")(32))


def seat_key(name: str) -> bytes:
    return X25519PrivateKey.from_private_bytes(drbg(f"seat/{name}")(32)).public_key().public_bytes_raw()


class Hand:
    """A closed co-dealt hand: its record, identities, each position's seat key, the seal statements
    and its log entries (setup and shuffles at the open; shares, seals and seeds at the close)."""

    def __init__(self, deck: str, hand_id: str, holders: int, seats: dict[int, bytes], label: str) -> None:
        spec = DeckSpec.parse(deck)
        random = drbg(f"hand/{label}")
        secrets = [new_holder(spec, hand_id, k, random) for k in range(holders)]
        self.hand = codeal_local(deck, hand_id, holders, sorted(seats), random, secrets=secrets)
        records = [KeyRecord.decode(k, i) for i, k in enumerate(self.hand.keys)]
        ctx = HandContext(spec, hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
        self.seats = seats
        self.identities, self.keys, self.seals = [], [], []
        for k in range(1, holders):
            ident = identity(f"{label}/{k}")
            public = ident.public_key().public_bytes_raw()
            self.identities.append(
                CodealerSignatures(
                    k,
                    public,
                    sign(ident, key_statement(spec, hand_id, k, holders, self.hand.keys[k])),
                    sign(ident, shuffle_statement(ctx, self.hand.shuffles[k])),
                )
            )
            self.keys.append(public.hex())
            statements = []
            for d in self.hand.dealt:
                if seats[d.position]:
                    sealed = seal_share(spec, hand_id, d.position, k, d.shares[k], seats[d.position], random)
                    s = sign_seal(ident, ctx, d.position, k, seats[d.position], sealed)
                    statements.append((d.position, s.seat_key, s.sealed_sha256, s.signature))
            self.seals.append(CodealerSeals(k, tuple(statements)))

    def opening(self, time_ms: int) -> list[bytes]:
        h = self.hand
        setup = CodealEntry(SETUP, time_ms, h.hand_id, h.deck, h.keys).encode()
        return [setup, *(CodealEntry(SHUFFLE, time_ms, h.hand_id, records=(s,)).encode() for s in h.shuffles)]

    def closing(self, time_ms: int) -> list[bytes]:
        h = self.hand
        shares = [
            CodealEntry(SHARES, time_ms, h.hand_id, records=d.shares, position=d.position).encode()
            for d in h.dealt
        ]
        return [*shares, *self.seals_entries(time_ms), self.seeds_entry(time_ms)]

    def seals_entries(self, time_ms: int) -> list[bytes]:
        return [
            CodealEntry(
                SEALS,
                time_ms,
                self.hand.hand_id,
                records=tuple(p.to_bytes(4, "big") + k + d + g for p, k, d, g in s.statements),
                position=s.holder,
            ).encode()
            for s in self.seals
        ]

    def seeds_entry(self, time_ms: int) -> bytes:
        return CodealEntry(SEEDS, time_ms, self.hand.hand_id, records=self.hand.seeds or ()).encode()

    def signatures(self) -> tuple[CodealerSignatures, ...]:
        return tuple(self.identities)


class Log:
    """The vectors' signed log: entries appended in order, receipts to its checkpoints."""

    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.hashes: list[bytes] = []
        self.signer = Signer.from_seed(ORIGIN, drbg("log key")(32))

    def read(self, indexes: Sequence[int]) -> list[bytes]:
        return [self.hashes[i] for i in indexes]

    def append(self, entries: Sequence[bytes]) -> list[int]:
        first = len(self.entries)
        for entry in entries:
            self.hashes += merkle.stored_hashes_for_append(
                len(self.entries), merkle.leaf_hash(entry), self.read
            )
            self.entries.append(entry)
        return list(range(first, len(self.entries)))

    def note(self, size: int, signer: Signer | None = None) -> bytes:
        return sign_checkpoint(
            Checkpoint(ORIGIN, size, merkle.tree_hash(size, self.read)), signer or self.signer
        )

    def receipt(self, index: int, size: int, signer: Signer | None = None) -> InclusionProof:
        proof = tuple(merkle.prove_inclusion(index, size, self.read))
        return InclusionProof(index, size, proof, self.entries[index], self.note(size, signer))


def line(text: str, codealer_keys: Sequence[str], log_keys: Sequence[str]) -> str:
    """What ``fairdeck verify FILE --codealer-key K... --key L...`` prints (its first line)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hand.json"
        path.write_bytes(text.encode("utf-8"))
        flags = [f for k in codealer_keys for f in ("--codealer-key", k)] + [
            f for k in log_keys for f in ("--key", k)
        ]
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            fairdeck(["verify", str(path), *flags])
    return out.getvalue().splitlines()[0]


def edit(text: str, change: Callable[[dict[str, Any]], None]) -> str:
    data = json.loads(text)
    change(data)
    return json.dumps(data, indent=1) + "\n"


def extra(tlog: str, change: Callable[[bytes], bytes]) -> str:
    """A tlog-proof text whose entry (its extra line) is changed."""
    lines = tlog.split("\n")
    lines[1] = "extra " + base64.b64encode(change(base64.b64decode(lines[1][6:]))).decode()
    return "\n".join(lines)


def build() -> dict[str, Any]:
    a, b, house = seat_key("a"), seat_key("b"), seat_key("house")
    table = Hand("short", "vec-p5-table", 2, {0: a, 1: b, 2: a, 3: b, 4: b"", 5: b""}, "table")
    three = Hand("short", "vec-p5-three", 3, {2: a, 7: a, 9: b""}, "three")
    standard = Hand("standard", "vec-p5-standard", 2, {4: a, 5: a}, "standard")
    late = Hand("short", "vec-p5-late", 2, {0: a}, "late")
    log = Log()
    log.append([b"FDL1" + bytes([9]) + b"not a fairdeck entry: the log holds other entries before"])
    t = 1_700_000_000_000
    opened = {h.hand.hand_id: log.append(h.opening(t + i)) for i, h in enumerate((table, three, standard))}
    closed = {
        h.hand.hand_id: log.append(h.closing(t + 100 + i)) for i, h in enumerate((table, three, standard))
    }
    early = log.append([late.seeds_entry(t + 200)])  # a dishonest dealer: the seeds first
    late_open = log.append(late.opening(t + 201))
    late_close = log.append(late.closing(t + 202))
    late_setup = log.append([late.opening(t + 203)[0]])  # and the setup again, after everything
    size = len(log.entries)
    early_size = late_open[0]  # a checkpoint before the late hand: every other hand is in it

    def receipts(
        h: Hand, size: int = size, setup: int | None = None, seeds: int | None = None
    ) -> CodealReceipts:
        o, c = opened.get(h.hand.hand_id, late_open), closed.get(h.hand.hand_id, late_close)
        k = len(h.hand.keys)
        return CodealReceipts(
            log.receipt(o[0] if setup is None else setup, size),
            tuple(log.receipt(c[-k + i], size) for i in range(k - 1)),
            log.receipt(c[-1] if seeds is None else seeds, size),
        )

    def proof(h: Hand, seat: bytes | None, r: CodealReceipts | None = None) -> str:
        dealt = tuple(d for d in h.hand.dealt if seat is None or h.seats[d.position] == seat)
        record = CodealHand(h.hand.deck, h.hand.hand_id, h.hand.keys, h.hand.shuffles, dealt, h.hand.seeds)
        return LoggedCodealProof(
            CodealHandProof(record, h.signatures()),
            tuple(h.seats[d.position] for d in dealt),
            tuple(h.seals),
            r or receipts(h),
            log.signer.verifier.to_string(),
        ).to_json()

    key = [log.signer.verifier.to_string()]
    other_log = Signer.from_seed(ORIGIN, drbg("another log key")(32))
    seat_a = proof(table, a)
    whole = proof(table, None)

    def s(d: dict[str, Any]) -> Any:
        return d["seals"][0]["statements"]

    def forged_seal(d: dict[str, Any]) -> None:
        """Co-dealer 1's statement of position 0 signed by another Ed25519 key."""
        h = table
        spec = DeckSpec.parse(h.hand.deck)
        records = [KeyRecord.decode(k, i) for i, k in enumerate(h.hand.keys)]
        ctx = HandContext(
            spec, h.hand.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records)
        )
        statement = seal_statement(ctx, 0, 1, a, bytes.fromhex(s(d)[0]["sealed_sha256"]))
        s(d)[0]["signature"] = identity("a house key").sign(statement).hex()

    def receipts_of(d: dict[str, Any]) -> Any:
        return d["receipts"]

    valid = [
        ("a seat's two cards, short deck", seat_a, table.keys, key),
        ("the whole table: four hole cards and two public ones", whole, table.keys, key),
        ("three key holders: two co-dealers", proof(three, a), three.keys, key),
        ("a seat's two cards, standard deck", proof(standard, a), standard.keys, key),
        (
            "receipts to an earlier checkpoint that holds every entry",
            proof(table, a, receipts(table, early_size)),
            table.keys,
            key,
        ),
        (
            "the late hand's seeds logged twice: receipts to the entries in order",
            proof(late, a),
            late.keys,
            key,
        ),
    ]
    other_seeds = log.receipt(closed[three.hand.hand_id][-1], size)
    shuffle_0 = log.receipt(opened[table.hand.hand_id][1], size)
    invalid = [
        ("not JSON", seat_a[:-3], table.keys, key, "format"),
        ("a name too many", edit(seat_a, lambda d: d.update(extra=1)), table.keys, key, "encoding"),
        ("no receipts", edit(seat_a, lambda d: d.pop("receipts")), table.keys, key, "encoding"),
        ("a dealt position without its seat key", edit(seat_a, lambda d: d["codeal"]["dealt"][0].pop("seat_key")), table.keys, key, "encoding"),
        ("a seat key of 31 bytes", edit(seat_a, lambda d: d["codeal"]["dealt"][0].update(seat_key="00" * 31)), table.keys, key, "encoding"),
        ("a seal signature of 63 bytes", edit(seat_a, lambda d: s(d)[0].update(signature="00" * 63)), table.keys, key, "encoding"),
        ("a receipt that is not a tlog-proof", edit(seat_a, lambda d: receipts_of(d).update(setup="c2sp.org/tlog-proof@v2\n" + receipts_of(d)["setup"].split("\n", 1)[1])), table.keys, key, "encoding"),
        ("seeds not yet revealed", edit(seat_a, lambda d: d["codeal"].update(seeds=[])), table.keys, key, "encoding"),
        ("a co-dealer the player did not pin", seat_a, three.keys[:1], key, "key"),
        ("the seeds swapped", edit(seat_a, lambda d: d["codeal"]["seeds"].reverse()), table.keys, key, "seed"),
        ("a seal statement under the wrong key", edit(seat_a, forged_seal), table.keys, key, "seal"),
        ("a seal naming another seat key", edit(seat_a, lambda d: d["codeal"]["dealt"][0].update(seat_key=b.hex())), table.keys, key, "seal"),
        ("a seal statement altered to name the house's key", edit(seat_a, lambda d: s(d)[0].update(seat_key=house.hex())), table.keys, key, "seal"),
        ("a missing seal", edit(seat_a, lambda d: s(d).pop(0)), table.keys, key, "seal"),
        ("a hole card said to be public", edit(whole, lambda d: d["codeal"]["dealt"][0].update(seat_key="")), table.keys, key, "seal"),
        ("a public card said to be a seat's", edit(whole, lambda d: d["codeal"]["dealt"][4].update(seat_key=a.hex())), table.keys, key, "seal"),
        ("seal statements out of order", edit(seat_a, lambda d: s(d).reverse()), table.keys, key, "seal"),
        ("the co-dealers' seal lists swapped", edit(proof(three, a), lambda d: d["seals"].reverse()), three.keys, key, "seal"),
        ("no seal lists", edit(seat_a, lambda d: d.update(seals=[])), table.keys, key, "seal"),
        ("a receipt to another hand's entry", edit(seat_a, lambda d: receipts_of(d).update(seeds=_text(other_seeds))), table.keys, key, "entries"),
        ("a receipt to another entry of the hand", edit(seat_a, lambda d: receipts_of(d).update(setup=_text(shuffle_0))), table.keys, key, "entries"),
        ("an entry altered", edit(seat_a, lambda d: receipts_of(d).update(seeds=extra(receipts_of(d)["seeds"], lambda e: e[:-1] + bytes([e[-1] ^ 1])))), table.keys, key, "entries"),
        ("no seals receipt", edit(seat_a, lambda d: receipts_of(d).update(seals=[])), table.keys, key, "entries"),
        ("a rotation statement that is not one", edit(seat_a, lambda d: d.update(key_rotations=["not a statement\n"])), table.keys, key, "rotations"),
        ("receipts to two different checkpoints", edit(seat_a, lambda d: receipts_of(d).update(seeds=_text(receipts(table, early_size).seeds))), table.keys, key, "checkpoint"),
        ("a checkpoint under an unknown key", proof(table, a, CodealReceipts(*(log.receipt(i, size, other_log) for i in (opened[table.hand.hand_id][0],)), (log.receipt(closed[table.hand.hand_id][-2], size, other_log),), log.receipt(closed[table.hand.hand_id][-1], size, other_log))), table.keys, key, "checkpoint"),
        ("another log key given", seat_a, table.keys, [other_log.verifier.to_string()], "checkpoint"),
        ("an audit path altered", edit(seat_a, lambda d: receipts_of(d).update(seeds=_hash_flipped(receipts_of(d)["seeds"]))), table.keys, key, "inclusion"),
        ("reveal before commit: the seeds logged before the seals", proof(late, a, receipts(late, seeds=early[0])), late.keys, key, "order"),
        ("reveal before commit: the setup logged after the seeds", proof(late, a, receipts(late, setup=late_setup[0])), late.keys, key, "order"),
    ]  # fmt: skip
    cases: dict[str, list[Case]] = {"valid": [], "invalid": []}
    for name, text, keys, logs in valid:
        said = line(text, keys, logs)
        if not said.startswith("OK: "):
            raise SystemExit(f"valid case {name!r}: {said}")
        cases["valid"].append(
            {"name": name, "text": text, "codealer_keys": keys, "log_keys": logs, "line": said}
        )
    for name, text, keys, logs, step in invalid:
        said = line(text, keys, logs)
        if not said.startswith(f"FAILED at step {step}: "):
            raise SystemExit(f"invalid case {name!r}: want step {step}, got {said}")
        cases["invalid"].append(
            {"name": name, "text": text, "codealer_keys": keys, "log_keys": logs, "step": step, "line": said}
        )
    return {
        "description": "Co-dealt hand proofs of format 5 (docs/hand-proof.md): each case's text, the co-dealer "
        "identity keys pinned (hex, holder order), the log keys given and the line fairdeck verify prints; "
        "made by docs/vectors/generate_codeal_proofs_v2.py",
        **cases,
    }


def _text(receipt: InclusionProof) -> str:
    return tlog_proof.to_text(receipt)


def _hash_flipped(tlog: str) -> str:
    """The tlog-proof with the first bit of its first audit-path hash flipped."""
    lines = tlog.split("\n")
    raw = bytearray(base64.b64decode(lines[3]))
    raw[0] ^= 1
    lines[3] = base64.b64encode(bytes(raw)).decode()
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    text = json.dumps(build(), indent=1) + "\n"
    if "--check" in argv:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text:
            print(
                f"{OUTPUT.name} is stale: run python docs/vectors/generate_codeal_proofs_v2.py",
                file=sys.stderr,
            )
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
