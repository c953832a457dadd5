"""The verifier page against a live dealer on loopback, in real headless Chromium and Firefox: a
hand proof of every deck type verifies, in format 1 and format 2; each tampering fails at the
step `fairdeck verify` names, in its words, on the banner, with the cards marked as not verified;
on a phone the verdict is in the first screen; the README's "Check your own hand" steps work by
drag and drop and by editing one character; and the page makes no request at all."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fairdeck.client import AuditClient
from fairdeck.core.decks import SPEC_NAMES
from fairdeck.log.cosignature import Cosigner, add_cosignatures
from fairdeck.log.handproof import HandProof
from fairdeck.log.note import Signer
from tests.support import browser
from tests.support.dealers import RunningDealer, deal_closed_hand
from tests.support.logs import fairdeck

CLI = [sys.executable, "-m", "fairdeck.cli"]
W1, W2 = (
    Cosigner.from_seed("witness.test/w1", bytes([1]) * 32),
    Cosigner.from_seed("witness.test/w2", bytes([2]) * 32),
)
POLICY_BOTH = (f"w1={W1.verifier.to_string()}", f"w2={W2.verifier.to_string()}")
PHONE = {"width": 390, "height": 844}
"""A phone's screen in CSS pixels (an iPhone 12 to 15)."""
engines = pytest.mark.parametrize("engine", browser.ENGINES)
# One worker runs the module: its dealer is started once.
pytestmark = pytest.mark.xdist_group("test_page_live")


@pytest.fixture(scope="module")
def served(unlimited_dealer: RunningDealer) -> tuple[str, str]:
    browser.require(browser.node_missing())  # each test requires its own engine
    data = unlimited_dealer.data_dir
    target = unlimited_dealer.target
    vkey = fairdeck("key", "--data", str(data))  # in this process: a Python start-up less
    assert vkey.rc == 0, vkey.err
    return target, vkey.out.strip()


def proof_of_a_closed_hand(target: str, vkey: str, deck: str, draws: int = 7) -> dict[str, Any]:
    """A hand dealt with the players' seed protocol, closed, and its proof from the AuditService."""
    hand_id = deal_closed_hand(target, deck, draws)
    with AuditClient(target, verifier=vkey) as log:
        return log.hand_proof(hand_id).to_dict()


def cosigned(proof: dict[str, Any], *lines_by: Callable[[str], str]) -> dict[str, Any]:
    """The proof with witness cosignature lines added to its checkpoint (both receipts share it)."""
    note = proof["reveal"]["signed_checkpoint"].encode("utf-8")
    text = note.decode("utf-8").split("\n\n")[0] + "\n"
    out: dict[str, Any] = json.loads(json.dumps(proof))
    new = add_cosignatures(note, [line(text) for line in lines_by]).decode("utf-8")
    out["commit"]["signed_checkpoint"] = out["reveal"]["signed_checkpoint"] = new
    return out


def broken(line: str) -> str:
    """A cosignature line with one bit of its signature flipped."""
    name, sig = line.rstrip("\n").rsplit(" ", 1)
    raw = bytearray(base64.b64decode(sig))
    raw[-1] ^= 1
    return f"{name} {base64.b64encode(bytes(raw)).decode()}\n"


def tamperings(proof: dict[str, Any], other: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    def changed(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        d: dict[str, Any] = json.loads(json.dumps(proof))
        change(d)
        return d

    def swap(d: dict[str, Any]) -> None:
        cards = d["transcript"]["cards"]
        cards[0], cards[1] = cards[1], cards[0]

    def flip_seed(d: dict[str, Any]) -> None:  # its first byte, to another value
        seed = d["transcript"]["server_seed"]
        d["transcript"]["server_seed"] = ("01" if seed.startswith("00") else "00") + seed[2:]

    def other_checkpoint(d: dict[str, Any]) -> None:
        d["reveal"]["signed_checkpoint"] = d["commit"]["signed_checkpoint"] = (
            d["reveal"]["signed_checkpoint"][:-6] + "AAAA=\n"
        )

    return [
        ("format: another format", changed(lambda d: d.update(format=2))),
        ("format: an extra name", changed(lambda d: d.update(extra=1))),
        ("format: a receipt index -1", changed(lambda d: d["commit"].update(index=-1))),
        (
            "commitment: another seed",
            changed(flip_seed),
        ),
        ("deck: two cards swapped", changed(swap)),
        (
            "malformed: a server seed one byte short",
            changed(lambda d: d["transcript"].update(server_seed=d["transcript"]["server_seed"][2:])),
        ),
        (
            "cards: a card not dealt",
            changed(lambda d: d["dealt"].__setitem__(0, d["transcript"]["cards"][10])),
        ),
        ("entries: another hand's commit", changed(lambda d: d.update(commit=other["commit"]))),
        ("checkpoint: a forged signature", changed(other_checkpoint)),
        ("inclusion: a wrong hash", changed(lambda d: d["reveal"]["hashes"].__setitem__(0, "A" * 43 + "="))),
        (
            "inclusion: another tree size",
            changed(lambda d: d["reveal"].update(tree_size=d["reveal"]["tree_size"] + 1)),
        ),
    ]


@engines
def test_every_deck_and_every_tampering_as_fairdeck_verify_says(
    served: tuple[str, str], tmp_path: Path, engine: str
) -> None:
    browser.require_browser(engine)
    target, vkey = served
    cases: list[tuple[str, bytes, str, tuple[str, ...], int | None]] = []
    proofs = {deck: proof_of_a_closed_hand(target, vkey, deck) for deck in SPEC_NAMES}
    for deck, proof in proofs.items():
        cases.append((f"valid {deck}", json.dumps(proof, indent=2).encode(), vkey, (), None))
        # Format 2: the receipts as C2SP tlog-proof texts, as `fairdeck hand get --format 2` writes them.
        v2 = HandProof.from_json(json.dumps(proof)).as_format(2).to_json().encode()
        cases.append((f"valid {deck}, format 2", v2, vkey, (), None))
    standard, other = proofs["standard"], proof_of_a_closed_hand(target, vkey, "standard")
    for name, bad in tamperings(standard, other):
        cases.append((name, json.dumps(bad).encode(), vkey, (), None))
    another_key = Signer.from_seed(vkey.split("+")[0], bytes(32)).verifier.to_string()
    cases.append(("checkpoint: another log's key", json.dumps(standard).encode(), another_key, (), None))
    both = cosigned(standard, lambda t: W1.cosign(t, 1_800_000_000), lambda t: W2.cosign(t, 1_800_000_001))
    one = cosigned(standard, lambda t: W1.cosign(t, 1_800_000_000))
    bad_sig = cosigned(standard, lambda t: broken(W1.cosign(t, 1_800_000_000)))
    cases += [
        ("cosignatures: 2 of 2", json.dumps(both).encode(), vkey, POLICY_BOTH, 2),
        ("cosignatures: 1 of 2, 1 needed", json.dumps(one).encode(), vkey, POLICY_BOTH, 1),
        ("cosignatures: 1 of 2, 2 needed", json.dumps(one).encode(), vkey, POLICY_BOTH, 2),
        ("cosignatures: none", json.dumps(standard).encode(), vkey, POLICY_BOTH, None),
        ("cosignatures: without a policy, lines are ignored", json.dumps(both).encode(), vkey, (), None),
        ("cosignatures: a bad one by a known witness", json.dumps(bad_sig).encode(), vkey, POLICY_BOTH, 1),
    ]
    job = {
        "verify": [
            {"id": n, "bytes_b64": browser.b64(d), "key": k, "witnesses": list(w), "threshold": t}
            for n, d, k, w, t in cases
        ]
    }
    got = browser.run(job, tmp_path, engine=engine)
    steps = set()
    for name, data, key, witnesses, threshold in cases:
        want = browser.python_verdict(data, tmp_path, key, witnesses, threshold)
        page = got["verify"][name]
        assert (page["ok"], page["step"]) == want, (name, page, want)
        assert page["line"] == browser.python_line(data, tmp_path, key, witnesses, threshold), name
        assert page["kind"] == "hand-proof" and page["input_error"] is None
        if want[1] is not None:  # the failed step is always one of the checks shown, failing
            assert page["checks"][want[1]] == "fail", (name, page["checks"])
        steps.add(want[1])
    assert all(got["verify"][f"valid {deck}"]["ok"] for deck in SPEC_NAMES)
    assert all(got["verify"][f"valid {deck}, format 2"]["ok"] for deck in SPEC_NAMES)
    assert steps == {
        None,
        "format",
        "malformed",
        "commitment",
        "deck",
        "cards",
        "entries",
        "checkpoint",
        "inclusion",
        "cosignatures",
    }
    assert got["requests"] == [] and got["errors"] == []


@engines
def test_the_banner_names_the_failed_step_in_fairdeck_verify_words_on_a_phone(
    served: tuple[str, str], tmp_path: Path, engine: str
) -> None:
    """One tampering per step, each loaded on a phone-sized page as a player loads it: the banner
    reads "✘ " and the very line `fairdeck verify` prints; the cards shown are marked as not
    verified; the verdict is within the first screen, nothing scrolls sideways, no word is split
    over two lines and the whole log key is in view."""
    browser.require_browser(engine)
    target, vkey = served
    standard = proof_of_a_closed_hand(target, vkey, "standard")
    by_name = dict(tamperings(standard, proof_of_a_closed_hand(target, vkey, "standard")))
    one = cosigned(standard, lambda t: W1.cosign(t, 1_800_000_000))
    cases: list[tuple[str, dict[str, Any], tuple[str, ...], int | None]] = [
        ("valid", standard, (), None),
        *((name, by_name[name], (), None) for name in (
            "format: another format", "malformed: a server seed one byte short", "commitment: another seed",
            "deck: two cards swapped", "cards: a card not dealt", "entries: another hand's commit",
            "checkpoint: a forged signature", "inclusion: a wrong hash",
        )),
        ("cosignatures: 1 of 2, 2 needed", one, POLICY_BOTH, 2),
    ]  # fmt: skip
    ui = []
    for i, (name, proof, witnesses, threshold) in enumerate(cases):
        path = tmp_path / f"hand-{i}.json"
        path.write_text(json.dumps(proof, indent=2), encoding="utf-8")
        ui.append({"id": name, "file": str(path), "key": vkey, "viewport": PHONE,
                   "witnesses": list(witnesses), "threshold": threshold})  # fmt: skip
    got = browser.run({"ui": ui}, tmp_path, engine=engine)
    valid_style = got["ui"]["valid"]["before"]["card_style"]
    steps = []
    for (name, proof, witnesses, threshold), case in zip(cases, ui, strict=True):
        shown = got["ui"][name]["before"]
        line = browser.python_line(Path(case["file"]).read_bytes(), tmp_path, vkey, witnesses, threshold)
        if name == "valid":
            assert line.startswith("OK: ") and shown["ok"] and line in shown["verdict_help"], shown
            assert set(shown["cards_verified"]) == {"true"} and shown["hand_warning"] == ""
        else:
            assert shown["verdict_line"] == f"\u2718 {line}", (name, shown["verdict_line"], line)
            assert "NOT verified" in shown["verdict_help"], shown["verdict_help"]
            steps.append(shown["step"])
            if shown["dealt"]:  # the file's cards are drawn, visibly marked
                assert set(shown["cards_verified"]) == {"false"}, (name, shown["cards_verified"])
                assert (
                    shown["dealt_title"].endswith("(not verified)")
                    and "Not verified" in shown["hand_warning"]
                )
                assert shown["card_style"] != valid_style, (name, shown["card_style"])
        layout = shown["layout"]
        assert layout["scroll_width"] <= layout["client_width"], (name, "scrolls sideways", layout)
        assert layout["scroll_y"] == 0 and layout["verdict_top"] >= 0, f"{name}: {json.dumps(layout)}"
        assert layout["verdict_bottom"] <= layout["client_height"], (
            name,
            "verdict below the first screen",
            layout,
        )
        assert layout["broken_words"] == [], (name, layout["broken_words"])
        assert layout["key_hidden"] == 0, (name, "part of the key is out of view", layout)
    assert steps == ["format", "malformed", "commitment", "deck", "cards", "entries", "checkpoint",
                     "inclusion", "cosignatures"]  # fmt: skip
    assert got["requests"] == [] and got["errors"] == []


def unused_port() -> int:
    """A loopback port nothing listens on (browsers refuse some low ports, such as 9, outright)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@engines
def test_check_your_own_hand_as_the_readme_says(served: tuple[str, str], tmp_path: Path, engine: str) -> None:
    """`fairdeck deal --out hand.json`, open the page, drop the file: every check passes. Edit one
    character: the failed step is named, the same one `fairdeck verify` names."""
    browser.require_browser(engine)
    target, vkey = served
    hand = tmp_path / "hand.json"
    dealt = subprocess.run(
        [*CLI, "deal", "--target", target, "--out", str(hand), "--key", vkey],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dealt.returncode == 0, dealt.stderr
    text = hand.read_text(encoding="utf-8")
    anchor = '"server_seed": "'
    at = text.index(anchor) + len(anchor)
    new = "0" if text[at] != "0" else "1"
    root_line = text.index("\\n", text.index('"signed_checkpoint": "')) + 2  # the tree size's first digit
    ui: list[dict[str, Any]] = [
        {
            "id": "drop",
            "file": str(hand),
            "key": vkey,
            "drop": True,
            "edit": {"find": anchor + text[at], "replace": anchor + new},
        },
        {
            "id": "input",
            "file": str(hand),
            "key": vkey,
            "edit": {
                "find": text[root_line - 30 : root_line + 1],
                "replace": text[root_line - 30 : root_line] + ("9" if text[root_line] != "9" else "8"),
            },
        },
        {"id": "no key", "file": str(hand), "key": ""},
    ]
    control = tmp_path / "control.html"
    there = f"http://127.0.0.1:{unused_port()}"
    control.write_text(f'<script>fetch("{there}/control"); new Image().src = "{there}/pixel.png";</script>')
    got = browser.run({"ui": ui, "control": str(control)}, tmp_path, engine=engine)

    proof = json.loads(text)
    drop = got["ui"]["drop"]
    assert drop["before"]["ok"] is True and drop["before"]["step"] is None
    assert (
        set(drop["before"]["checks"].values()) == {"pass", "skip"}
        and drop["before"]["checks"]["cosignatures"] == "skip"
    )
    assert [s for s, v in drop["before"]["checks"].items() if v == "pass"] == [
        "format", "commitment", "deck", "cards", "entries", "checkpoint", "inclusion",
    ]  # fmt: skip
    assert (
        drop["before"]["dealt"] == proof["dealt"] and len(proof["dealt"]) == 12
    )  # hold'em, 2 players: 4 hole, 3 burns, 5 board
    assert proof["transcript"]["hand_id"] in drop["before"]["summary"]
    for case in ("drop", "input"):
        edit = ui[0 if case == "drop" else 1]["edit"]
        assert got["ui"][case]["edit_found"]
        # One input event, as a player's edit makes: Playwright's fill of the whole text made one for
        # each line and line break (202), and the page verified the hand at each.
        assert got["ui"][case]["edit_inputs"] == 1, got["ui"][case]["edit_inputs"]
        edited = text.replace(edit["find"], edit["replace"], 1).encode("utf-8")
        want = browser.python_verdict(edited, tmp_path, vkey)
        after = got["ui"][case]["after"]
        assert want[0] is False and (after["ok"], after["step"]) == want, (case, after, want)
        assert after["checks"][want[1]] == "fail" and f"FAILED at step {want[1]}" in after["verdict"]
        assert after["verdict_line"] == f"\u2718 {browser.python_line(edited, tmp_path, vkey)}"
    assert got["ui"]["drop"]["after"]["step"] == "commitment"
    assert got["ui"]["input"]["after"]["step"] == "checkpoint"
    no_key = got["ui"]["no key"]["before"]
    assert no_key["ok"] is False and no_key["step"] is None and "log's key" in no_key["verdict"]
    assert no_key["checks"]["checkpoint"] == no_key["checks"]["inclusion"] == "skip"
    assert no_key["checks"]["cards"] == "pass"
    # No request at all; the recorder does see a page that makes them.
    assert got["requests"] == [] and got["errors"] == []
    assert sorted(got["control"]) == [f"{there}/control", f"{there}/pixel.png"]


@engines
def test_a_page_written_with_a_pinned_key_opens_ready(
    served: tuple[str, str], tmp_path: Path, engine: str
) -> None:
    browser.require_browser(engine)
    target, vkey = served
    hand = tmp_path / "hand.json"
    hand.write_text(json.dumps(proof_of_a_closed_hand(target, vkey, "shoe-8", draws=20)), encoding="utf-8")
    done = fairdeck("verifier-page", "--out", str(tmp_path / "site"), "--key", vkey)
    assert done.rc == 0, done.err
    page = tmp_path / "site" / "fairdeck-verifier.html"
    got = browser.run(
        {"ui": [{"id": "pinned", "file": str(hand), "viewport": PHONE}]}, tmp_path, page=page, engine=engine
    )
    shown = got["ui"]["pinned"]["before"]
    assert (
        shown["ok"] is True
        and len(shown["dealt"]) == 20
        and all(c.endswith(tuple(".12345678")) for c in shown["dealt"])
    )
    assert shown["layout"]["key_hidden"] == 0  # the pinned key, whole, on a phone
    assert got["requests"] == [] and got["errors"] == []
