"""A lab re-derives every byte of a collection from its transcripts with only the documents:
docs/fairness-spec.md (sections 1.2 to 5) and docs/certification.md (section 1: whole blocks, the
record formats). This re-derivation uses hashlib and those texts, none of fairdeck's code, on a
52-card deck (one byte a card) and a shoe of more than 256 cards (two bytes a card)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from fairdeck.cli import main

RANKS, SUITS = "23456789TJQKA", "cdhs"


def lp(x: bytes) -> bytes:
    return len(x).to_bytes(4, "big") + x


def card_id(code: str) -> int:
    """Spec 1.2: ``13 * suit + rank``; a shoe's card of deck D adds ``52 * (D - 1)``."""
    if code in ("X1", "X2"):
        return 51 + int(code[1])
    base = 13 * SUITS.index(code[1]) + RANKS.index(code[0])
    return base + (52 * (int(code[3]) - 1) if len(code) == 4 else 0)


def rederive(t: dict[str, object], n: int) -> dict[str, bytes]:
    """Every record of one hand, from its transcript line (spec 3 to 5, certification.md 1)."""
    deck, hand_id = str(t["deck"]), str(t["hand_id"])
    seed = bytes.fromhex(str(t["server_seed"]))
    clients = [bytes.fromhex(s) for s in t["client_seeds"]]  # type: ignore[attr-defined]
    m = lp(deck.encode()) + lp(hand_id.encode()) + lp(seed) + len(clients).to_bytes(4, "big")
    m += b"".join(lp(c) for c in clients)
    bits = (math.factorial(n) - 1).bit_length()
    w = -(-bits // 8)
    tag = lp(f"{t['version']} stream".encode())
    stream = b""
    attempts = 0
    while True:  # spec 4: attempt a reads bytes a*w .. a*w + w - 1; blocks only as reads need them
        while len(stream) < (attempts + 1) * w:
            stream += hashlib.shake_256(tag + (len(stream) // 64).to_bytes(8, "big") + m).digest(64)
        v = int.from_bytes(stream[attempts * w : (attempts + 1) * w], "big") % 2**bits
        attempts += 1
        if v < math.factorial(n):
            break
    width = 1 if n <= 256 else 2
    r, choices = v, []
    for i in range(n - 1, 0, -1):  # spec 5
        r, j = divmod(r, i + 1)
        choices.append(j)
    return {
        "raw/stream.bin": stream,  # whole blocks (certification.md 1)
        "seeds/server-seeds.bin": seed,
        "scaled/index.bin": v.to_bytes(w, "big"),
        "scaled/choices.bin": b"".join(j.to_bytes(width, "big") for j in choices),
        "scaled/attempts.bin": bytes([attempts]),
        "final/decks.bin": b"".join(card_id(c).to_bytes(width, "big") for c in t["cards"]),  # type: ignore[attr-defined]
    }


@pytest.mark.parametrize(("deck", "n", "raw"), [("standard", 52, "3000"), ("shoe-6", 312, "4000")])
def test_every_byte_of_a_collection_rederives_from_its_transcripts_with_the_docs_alone(
    deck: str, n: int, raw: str, tmp_path: Path
) -> None:
    out = tmp_path / "kit"
    argv = ["lab", "collect", "--out", str(out), "--deck", deck, "--raw-bytes", raw, "--batch", "10"]
    assert main([*argv, "--no-progress"]) == 0
    expected: dict[str, bytearray] = {}
    lines = (out / "final/transcripts.jsonl").read_bytes().splitlines()
    for line in lines:
        for name, data in rederive(json.loads(line)["transcript"], n).items():
            expected.setdefault(name, bytearray()).extend(data)
    for name, data in expected.items():
        assert (out / name).read_bytes() == data, name
    manifest = json.loads((out / "manifest.json").read_text())
    bits = "".join(format(b, "08b") for b in expected["raw/stream.bin"])
    assert (out / "raw/stream.nist.txt").read_text() == bits  # ASCII 0/1, MSB first, nothing else
    assert {f["path"]: f["sha256"] for f in manifest["files"]}["raw/stream.bin"] == hashlib.sha256(
        expected["raw/stream.bin"]
    ).hexdigest()
