"""The verifier page after a real `fairdeck rotate-key log`, in headless Chromium and Firefox: a
player's proofs from before and after the rotation, checked under the old and the new key
together (in either order, and as the list rotate-key prints, pasted whole), under the old key
alone and under the new key alone. The page says word for word what `fairdeck verify` says with
the same keys, and names the key that signed; a list with a key that is not valid is an input
error naming that key; a page pinned by `verifier-page --key @FILE` opens with every key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairdeck.client import AuditClient
from tests.support import browser
from tests.support.dealers import RunningDealer, deal_closed_hand
from tests.support.logs import fairdeck

PHONE = {"width": 390, "height": 844}
# One worker runs the module: its rotation (two dealer starts, a rotate-key, three hands) is made once.
pytestmark = pytest.mark.xdist_group("test_page_rotation")


def short(vkey: str) -> str:
    """A verifier key as the page names it: its name and key ID."""
    return "+".join(vkey.split("+")[:2])


def key_of(data: Path) -> str:
    done = fairdeck("key", "--data", str(data))  # the command in this process: no Python start-up
    assert done.rc == 0, done.err
    return done.out.strip()


def proof(target: str, vkey: str, fmt: int | None = None) -> bytes:
    """A closed hand's proof from the AuditService: in format ``fmt``, or in the SDK's (format 3,
    with the rotation statement, after the rotation; format 1 before)."""
    hand_id = deal_closed_hand(target, "standard")
    with AuditClient(target, verifier=vkey) as log:
        got = log.hand_proof(hand_id)
    return (got if fmt is None else got.as_format(fmt)).to_json().encode()


@pytest.fixture(scope="module")
def rotated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Proofs from before and after a real rotation, the old and new keys, and the list
    `fairdeck rotate-key log` printed (current key first)."""
    browser.require(browser.node_missing())
    tmp = tmp_path_factory.mktemp("page-rotation")
    data = tmp / "data"
    dealer = RunningDealer(data, rate_limit=0)
    try:
        target = dealer.start()
        old = key_of(data)
        before = proof(target, old)
        dealer.stop()
        done = fairdeck("rotate-key", "log", "--data", str(data))
        assert done.rc == 0, done.err
        printed = [line for line in done.out.splitlines() if "+" in line]
        target = dealer.start()
        new = key_of(data)
        assert printed == [new, old] and new != old
        after = proof(target, new)
        after_v2 = proof(target, new, fmt=2)
        assert json.loads(after)["format"] == 3 and json.loads(before)["format"] == 1
    finally:
        dealer.close()
    keyring = tmp / "keys.txt"
    keyring.write_text("# the log's keys, current first\n" + "".join(k + "\n" for k in printed))
    yield {"old": old, "new": new, "printed": printed, "keyring": keyring, "tmp": tmp,
           "proofs": {"before": before, "after": after, "after, format 2": after_v2}}  # fmt: skip


def key_sets(r: dict[str, Any]) -> dict[str, list[str]]:
    return {
        "old and new": [r["old"], r["new"]],
        "new and old": [r["new"], r["old"]],
        "old alone": [r["old"]],
        "new alone": [r["new"]],
    }


@pytest.mark.parametrize("engine", browser.ENGINES)
def test_proofs_across_a_rotation_under_old_new_and_both_keys(
    rotated: dict[str, Any], tmp_path: Path, engine: str
) -> None:
    browser.require_browser(engine)
    cases: list[tuple[str, bytes, list[str], str]] = []
    for pname, data in rotated["proofs"].items():
        for kname, keys in key_sets(rotated).items():
            cases.append((f"{pname} / {kname}", data, keys, "\n".join(keys)))
        # The key file rotate-key's list was saved as, pasted whole: its comment line skipped.
        cases.append(
            (f"{pname} / the key file", data, [f"@{rotated['keyring']}"], rotated["keyring"].read_text())
        )
        # Keys separated by spaces on one line are read too.
        cases.append(
            (
                f"{pname} / one line",
                data,
                [rotated["new"], rotated["old"]],
                f"{rotated['new']}  {rotated['old']}",
            )
        )
    job = {"verify": [{"id": n, "bytes_b64": browser.b64(d), "key": text} for n, d, _, text in cases]}
    got = browser.run(job, tmp_path, engine=engine)
    verdicts = {}
    for name, data, keys, _ in cases:
        page = got["verify"][name]
        line = browser.python_line(data, tmp_path, keys)
        assert page["input_error"] is None, (name, page)
        assert page["line"] == line, (name, page["line"], line)
        verdicts[name] = page["ok"]
        if page["ok"]:  # the page names the key that signed, and where it is in the list given
            signer = rotated["old"] if name.startswith("before") else rotated["new"]
            given = [k for k in keys if not k.startswith("@")] or rotated["printed"]
            if signer in given:
                want = {"key": short(signer), "position": given.index(signer) + 1}
            else:  # reached by the proof's rotation statement, from the old key given
                old = rotated["old"]
                want = {
                    "key": short(signer),
                    "position": given.index(old) + 1,
                    "from": short(old),
                    "rotations": 1,
                }
            assert page["signed_by"] == [want], page
            assert short(signer) in page["details"]["checkpoint"], page["details"]
        else:
            assert page["step"] == "checkpoint", page
    # What rotation means for a player: a proof verifies under any list holding the key that signed
    # it, and, when it carries the rotation statement (format 3), under the old key alone: the
    # statement is followed from old to new, never back.
    for p in rotated["proofs"]:
        signer = "old" if p == "before" else "new"
        other = "new" if signer == "old" else "old"
        assert verdicts[f"{p} / old and new"] and verdicts[f"{p} / new and old"]
        assert verdicts[f"{p} / the key file"] and verdicts[f"{p} / one line"]
        assert verdicts[f"{p} / {signer} alone"]
        assert verdicts[f"{p} / {other} alone"] is (p == "after"), p
    assert got["requests"] == [] and got["errors"] == []


@pytest.mark.parametrize("engine", browser.ENGINES)
def test_the_key_box_takes_the_list_and_names_the_key_that_signed_or_is_not_valid(
    rotated: dict[str, Any], tmp_path: Path, engine: str
) -> None:
    """As a player does it: the keys pasted one per line into the key box, the proof dropped on a
    phone-sized page. The old page took one key only: two keys were "not a valid key"."""
    browser.require_browser(engine)
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_bytes(rotated["proofs"]["before"])
    after.write_bytes(rotated["proofs"]["after"])
    name, key_id, key = rotated["old"].split("+", 2)
    bad = f"{name}+{'00000000' if key_id != '00000000' else '00000001'}+{key}"  # another key ID
    ui = [
        {
            "id": "list",
            "file": str(before),
            "key": f"{rotated['new']}\n{rotated['old']}\n",
            "viewport": PHONE,
        },
        {"id": "a bad key", "file": str(before), "key": f"{rotated['new']}\n{bad}", "viewport": PHONE},
        {"id": "the old key alone", "file": str(after), "key": rotated["old"], "viewport": PHONE},
    ]
    got = browser.run({"ui": ui}, tmp_path, engine=engine)
    listed = got["ui"]["list"]["before"]
    line = browser.python_line(before.read_bytes(), tmp_path, [rotated["new"], rotated["old"]])
    assert listed["ok"] and line in listed["verdict_help"], listed
    assert f"{short(rotated['old'])} (the 2nd of the 2 keys given)" in listed["verdict_help"], listed
    assert listed["layout"]["key_hidden"] == 0, listed["layout"]  # both keys in view, on a phone
    assert listed["layout"]["verdict_bottom"] <= listed["layout"]["client_height"], listed["layout"]
    shown = got["ui"]["a bad key"]["before"]
    assert shown["ok"] is False and shown["step"] is None, shown
    assert shown["verdict_line"].startswith("Not fully checked: log key 2 of the 2 given ("), shown
    assert shown["verdict_line"].endswith("does not match the key."), shown
    assert shown["checks"]["checkpoint"] == "skip", shown["checks"]
    # A player whose page holds the old key only: the proof's statement leads to the new key, and
    # the page says so (it failed at step checkpoint, for an honest dealer's hand).
    old_alone = got["ui"]["the old key alone"]["before"]
    assert old_alone["ok"] and old_alone["checks"]["rotations"] == "pass", old_alone
    words = (
        f"{short(rotated['new'])}, which 1 key rotation statement in the file leads to from the log key "
        f"{short(rotated['old'])}"
    )
    assert words in old_alone["verdict_help"], old_alone["verdict_help"]
    assert f"{short(rotated['old'])} -> {short(rotated['new'])}" in old_alone["check_details"]["rotations"]
    assert got["requests"] == [] and got["errors"] == []


def test_a_page_pinned_with_the_key_file_opens_with_every_key(
    rotated: dict[str, Any], tmp_path: Path
) -> None:
    """`verifier-page --key @keys.txt` pinned the first key of the file only, so the hosted page
    failed every proof from before the rotation."""
    engine = "firefox" if browser.executable("chromium") is None else "chromium"
    browser.require_browser(engine)
    done = fairdeck("verifier-page", "--out", str(tmp_path / "site"), "--key", f"@{rotated['keyring']}")
    assert done.rc == 0, done.err
    page = tmp_path / "site" / "fairdeck-verifier.html"
    ui = []
    for name, data in rotated["proofs"].items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        ui.append({"id": name, "file": str(path), "viewport": PHONE})
    got = browser.run({"ui": ui}, tmp_path, page=page, engine=engine)
    for name in rotated["proofs"]:
        shown = got["ui"][name]["before"]
        assert shown["key_box"] == "\n".join(rotated["printed"]), shown["key_box"]
        assert shown["ok"], (name, shown["verdict"])
    assert got["requests"] == [] and got["errors"] == []
