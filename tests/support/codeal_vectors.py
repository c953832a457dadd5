"""The co-dealt deck vectors of docs/vectors/fairdeck-codeal-v1.json: each case as a
``CodealHand`` (``as_hand``), with the edits an invalid case describes applied (``edited``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from fairdeck.codeal import CodealHand, DealtPosition

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "docs" / "vectors" / "fairdeck-codeal-v1.json").read_text())


def as_hand(v: dict[str, Any]) -> CodealHand:
    return CodealHand(
        v["deck"],
        v["hand_id"],
        tuple(bytes.fromhex(k) for k in v["keys"]),
        tuple(bytes.fromhex(s) for s in v["shuffles"]),
        tuple(
            DealtPosition(d["position"], d["card"], tuple(bytes.fromhex(s) for s in d["shares"]))
            for d in v["dealt"]
        ),
        None if v["seeds"] is None else tuple(bytes.fromhex(s) for s in v["seeds"]),
    )


def edited(case: dict[str, Any]) -> dict[str, Any]:
    hand: dict[str, Any] = copy.deepcopy(VECTORS["hands"][case["base"]])
    for e in case["edits"]:
        op, field = e["op"], e.get("field")
        if op == "set":
            hand[field] = e["value"]
        elif op == "take":
            hand[field] = [hand[field][i] for i in e["indices"]]
        elif op == "from":
            hand[field] = VECTORS["hands"][e["hand"]][field]
        elif op in ("overwrite", "cut"):
            where = hand[field][e["index"]]["shares"] if field == "dealt" else hand[field]
            key = e["share"] if field == "dealt" else e["index"]
            data = bytearray.fromhex(where[key])
            if op == "overwrite":
                new = bytes.fromhex(e["hex"])
                data[e["offset"] : e["offset"] + len(new)] = new
            else:
                del data[e["offset"] : e["offset"] + e["length"]]
            where[key] = data.hex()
        elif op == "shares":
            d = hand["dealt"][e["index"]]
            d["shares"] = [d["shares"][i] for i in e["indices"]]
        elif op == "card":
            hand["dealt"][e["index"]]["card"] = e["card"]
        else:
            raise AssertionError(f"unknown edit {op}")
    return hand
