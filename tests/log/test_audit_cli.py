"""``fairdeck audit``: a live dealer (--target) and its data dir (--data) give
the same verdict; --json is complete; --since saves, advances and refuses a
checkpoint of another log; ``fairdeck key`` gives the key the audit needs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from fairdeck.client.audit_client import AuditClient
from fairdeck.log.checkpoint import open_checkpoint
from fairdeck.log.note import Verifier
from fairdeck_server.storage.sqlite import create_database
from tests.support.dealers import RunningDealer
from tests.support.logs import (
    audit,
    database,
    deal,
    fairdeck,
    fairdeck_process,
    read_checkpoints,
    settle,
    verifier_key,
)
from tests.support.waits import outlast

REPORT_KEYS = {
    "ok", "tree_size", "root", "entries", "hands", "closed", "voided",
    "open_within_lifetime", "last_entry_index", "last_entry_ms", "consistency", "witnesses",
    "key_rotations", "keys_needed", "findings", "seconds", "codeal",
}  # fmt: skip


def _same(report: dict[str, Any]) -> dict[str, Any]:
    """A report without its timing, findings as a set."""
    out = {k: v for k, v in report.items() if k not in ("seconds", "findings")}
    out["findings"] = {(f["index"], f["hand_id"], f["problem"]) for f in report["findings"]}
    return out


def test_target_and_data_agree(served: RunningDealer) -> None:
    size = deal(served.target, closed=40, still_open=3)
    settle(served, size)
    key = verifier_key(served.data_dir)

    live = audit("--target", served.target, key=key)
    at_rest = audit("--data", str(served.data_dir), key=key)  # read-only, while the dealer runs
    assert live.rc == at_rest.rc == 0, live.out + at_rest.out
    assert set(live.report) == REPORT_KEYS
    assert _same(live.report) == _same(at_rest.report)
    assert live.report["tree_size"] == live.report["entries"] == size
    assert (live.report["closed"], live.report["open_within_lifetime"]) == (40, 3)

    # Long after, by this machine's clock, with a 0.5 s lifetime: the open hands are last in the
    # log, so they are pending, not overdue (the log's own time is judged, never the auditor's).
    outlast(0.6)
    live = audit("--target", served.target, key=key, lifetime="0.5")
    at_rest = audit("--data", str(served.data_dir), key=key, lifetime="0.5")
    assert live.rc == at_rest.rc == 0, live.out
    assert _same(live.report) == _same(at_rest.report)
    assert live.report["open_within_lifetime"] == 3
    assert live.report["last_entry_index"] == size - 1
    # The dealer deals on while they stay open: now the log itself shows them overdue.
    size = deal(served.target, closed=2, still_open=0)
    settle(served, size)
    live = audit("--target", served.target, key=key, lifetime="0.5")
    at_rest = audit("--data", str(served.data_dir), key=key, lifetime="0.5")
    assert live.rc == at_rest.rc == 1
    assert _same(live.report) == _same(at_rest.report)
    assert len(live.findings) == 3 and all("deck shopping" in f["problem"] for f in live.findings)


def test_the_console_script_and_fairdeck_key(served: RunningDealer, tmp_path: Path) -> None:
    """The real ``fairdeck`` process: key, then audit --target and --data, text output."""
    size = deal(served.target, closed=10, still_open=1)
    settle(served, size)
    printed = fairdeck_process("key", "--data", str(served.data_dir))
    assert printed.rc == 0
    key_file = tmp_path / "log.vkey"
    key_file.write_text(printed.out)
    with AuditClient(served.target, verifier=printed.out.strip()) as log:
        head = log.checkpoint()  # the printed key verifies the dealer's checkpoints

    outputs = []
    for where in (["--target", served.target], ["--data", str(served.data_dir)]):
        result = fairdeck_process("audit", *where, "--key", f"@{key_file}")
        assert result.rc == 0, result.out + result.err
        assert result.out.startswith(f"audit OK: {size} entries, 11 hands in ")
        outputs.append(result.out.splitlines()[1:])
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == f"  signed tree size {head.size}, root {head.root.hex()}"
    assert outputs[0][1] == "  closed and verified 10, voided 0, still open within their lifetime 1"


def test_json_lists_the_findings_and_text_names_them(served: RunningDealer, tmp_path: Path) -> None:
    size = deal(served.target, closed=12, still_open=0)
    settle(served, size)
    served.stop()
    copy = shutil.copytree(served.data_dir, tmp_path / "tampered")
    with database(copy) as conn:  # reveal 3 now names a hand that was never committed
        entry = bytearray(conn.execute("SELECT entry FROM log_entries WHERE idx = 3").fetchone()[0])
        entry[17] = ord("z")
        conn.execute("UPDATE log_entries SET entry = ? WHERE idx = 3", (bytes(entry),))
    key = verifier_key(copy)

    result = audit("--data", str(copy), key=key)
    assert result.rc == 1
    report = result.report
    assert set(report) == REPORT_KEYS and report["ok"] is False
    length = int.from_bytes(entry[13:17], "big")  # magic, type, time, then lp(hand_id)
    hand = bytes(entry[17 : 17 + length]).decode()  # the hand id, its first character now "z"
    assert hand.startswith("z")
    # Reported once, at the first bad entry, located through the signed checkpoints.
    sizes = [cp_size for cp_size, _, _ in read_checkpoints(copy)]
    good, bad = max([n for n in sizes if n <= 3], default=0), min(n for n in sizes if n > 3)
    [finding] = report["findings"]
    assert finding["index"] == good and finding["last_index"] == (None if bad - good == 1 else bad - 1)
    assert f"the signed checkpoint for tree size {bad}" in finding["problem"]
    assert "reveal without a prior commitment" in finding["problem"]

    text = fairdeck("audit", "--data", str(copy), "--key", key)
    assert text.rc == 1
    assert text.out.startswith("audit FAILED:")
    bad_lines = [line for line in text.out.splitlines() if line.startswith("  BAD ")]
    where = f"entry {good}" if bad - good == 1 else f"entries {good} to {bad - 1}"
    assert len(bad_lines) == 1 and bad_lines[0].startswith(f"  BAD {where}: "), bad_lines


def test_since_saves_then_advances(served: RunningDealer, tmp_path: Path) -> None:
    key = verifier_key(served.data_dir)
    verifier = Verifier.parse(key)
    saved = tmp_path / "audited.checkpoint"
    first_size = deal(served.target, closed=5, still_open=1)
    settle(served, first_size)

    first = audit("--target", served.target, key=key, since=saved)  # no file yet: a first audit
    assert first.rc == 0, first.out
    assert (
        first.report["consistency"]
        == f"consistency NOT checked: no saved checkpoint at {saved} (a first audit)"
    )
    cp = open_checkpoint(saved.read_bytes(), verifier, verifier.name)
    assert (cp.size, cp.root.hex()) == (first_size, first.report["root"])

    second_size = deal(served.target, closed=8, still_open=2)
    settle(served, second_size)
    second = audit("--target", served.target, key=key, since=saved)
    assert second.rc == 0, second.out
    assert second.report["consistency"] == (
        f"consistent with the saved checkpoint (tree size {first_size}): the log only grew"
    )
    cp = open_checkpoint(saved.read_bytes(), verifier, verifier.name)
    assert (cp.size, cp.root.hex()) == (second_size, second.report["root"])

    third_size = deal(served.target, closed=1, still_open=0)
    settle(served, third_size)
    text = fairdeck("audit", "--data", str(served.data_dir), "--key", key, "--since", str(saved))
    assert text.rc == 0, text.out
    assert text.out.splitlines()[3].startswith("  pending: the dealer has logged nothing since ")
    assert text.out.splitlines()[5:] == [
        f"  consistent with the saved checkpoint (tree size {second_size}): the log only grew",
        f"  new checkpoint saved to {saved}",
    ]
    assert open_checkpoint(saved.read_bytes(), verifier, verifier.name).size == third_size


@pytest.mark.parametrize("other_key", [True, False], ids=["another key", "the same key"])
def test_since_from_another_log_fails(other_key: bool, served: RunningDealer, tmp_path: Path) -> None:
    """A checkpoint saved from a different log is not a prefix of this one: under the same key
    its root is not this tree's, a finding; under another key it does not verify, which says
    nothing about this dealer (the auditor's own file, or the wrong --key): exit 2, naming it."""
    size = deal(served.target, closed=20, still_open=0)
    settle(served, size)
    other_dir = tmp_path / "other"
    if not other_key:  # the same operator key signing two different logs
        # The dealer refuses to make this fork (keys without their database); build it by hand.
        other_dir.mkdir()
        for name in ("log.key", "seed.key"):
            shutil.copy2(served.data_dir / name, other_dir / name)
        create_database(other_dir / "fairdeck.db", {})
    with RunningDealer(other_dir, checkpoint_interval=0.02) as other:
        other_size = deal(other.target, closed=6, still_open=0)
        other_note = settle(other, other_size)
    assert other_size < size
    saved = tmp_path / "other.checkpoint"
    saved.write_bytes(other_note)
    key = verifier_key(served.data_dir)

    for where in (["--target", served.target], ["--data", str(served.data_dir)]):
        result = audit(*where, key=key, since=saved)
        if other_key:
            assert result.rc == 2 and not result.out, result.out
            assert result.err.startswith(f"fairdeck audit: cannot use --since {saved}: saved checkpoint")
            assert "does not verify under the log key" in result.err and "\n" not in result.err.strip()
        else:
            assert result.rc == 1
            problems = [f["problem"] for f in result.findings]
            assert len(problems) == 1
            assert problems[0].startswith(
                f"signed checkpoint for tree size {other_size} does not match the entries"
            )
            assert result.report["consistency"].startswith("NOT consistent with the saved checkpoint")
        assert saved.read_bytes() == other_note, "a failed audit does not overwrite the saved checkpoint"


def test_unreachable_target_is_a_usage_error(tmp_path: Path) -> None:
    with RunningDealer(tmp_path / "data") as d:
        key = verifier_key(d.data_dir)
        d.stop()
        result = fairdeck("audit", "--target", d.target, "--key", key, "--timeout", "2")
    assert result.rc == 2
    assert result.err.startswith("fairdeck audit: cannot read the log:")
    assert fairdeck("audit", "--data", str(tmp_path / "nowhere"), "--key", key).rc == 2
