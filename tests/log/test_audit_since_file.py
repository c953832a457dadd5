"""``audit --since FILE`` replaces the auditor's saved checkpoint under a fresh temporary name:
a link planted at the fixed name it used (``.FILE.tmp``) was followed, and its target truncated
and overwritten with the checkpoint."""

from __future__ import annotations

from pathlib import Path

from fairdeck.log.checkpoint import open_checkpoint
from fairdeck.log.note import Verifier
from tests.support.dealers import RunningDealer
from tests.support.logs import audit, deal, settle, verifier_key


def test_audit_since_writes_nothing_through_a_link_planted_at_its_temporary_name(
    served: RunningDealer,
    tmp_path: Path,
) -> None:
    key = verifier_key(served.data_dir)
    saved = tmp_path / "audited.checkpoint"
    victim = tmp_path / "victim"
    victim.write_text("not the auditor's\n")
    (tmp_path / ".audited.checkpoint.tmp").symlink_to(victim)
    settle(served, deal(served.target, closed=2, still_open=0))
    done = audit("--target", served.target, key=key, since=saved)
    assert done.rc == 0, done.out
    assert victim.read_text() == "not the auditor's\n"
    verifier = Verifier.parse(key)
    assert open_checkpoint(saved.read_bytes(), verifier, verifier.name).size > 0
