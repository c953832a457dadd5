"""A log key rotation on a running service, then every verifier with the old key, the new key, and
both: players' proofs from before and after, and the audit from every source. A holder of only the
old key follows the rotation statement the old key signed, and the audit says so."""

from __future__ import annotations

from pathlib import Path

from fairdeck.client.audit_client import AuditClient
from tests.support.faults import FaultRun, fairdeck


def proof(run: FaultRun, target: str, hand_id: str, name: str, key: str) -> Path:
    path = run.tmp / f"{name}.json"
    got = fairdeck("hand", "get", hand_id, "--target", target, "--key", key, "--out", str(path))
    assert got.rc == 0, got.err
    return path


def short(vkey: str) -> str:
    """A verifier key's name and key id, as reports name it."""
    return "+".join(vkey.split("+")[:2])


def verifies(path: Path, *keys: str) -> bool:
    done = fairdeck("verify", str(path), *(x for k in keys for x in ("--key", k)))
    assert done.rc in (0, 1), done.err
    return done.rc == 0


def test_a_rotation_then_every_verifier_with_old_new_and_both_keys(run: FaultRun) -> None:
    dealer = run.start(lifetime=60)
    run.ledger.deal(dealer.target, 2)
    old = run.key()
    before = proof(run, dealer.target, next(iter(run.ledger.closed)), "before", old)
    dealer.terminate()

    rotated = fairdeck("rotate-key", "log", "--data", str(run.data_dir))
    assert rotated.rc == 0, rotated.err
    printed = [line for line in rotated.out.splitlines() if "+" in line]
    new = run.key()
    assert printed == [new, old]
    keyring = run.tmp / "keys.txt"
    keyring.write_text("".join(k + "\n" for k in printed))  # the list rotate-key prints, current first

    dealer = run.start(lifetime=60)
    hand_after = run.ledger.open(dealer.target, 1)
    run.ledger.close(dealer.target, hand_after)
    after = proof(run, dealer.target, hand_after[0], "after", new)

    # A player's proof from before the rotation: the old key, or any list holding it.
    assert verifies(before, old) and verifies(before, f"@{keyring}") and verifies(before, new, old)
    assert not verifies(before, new)
    # From after it: the new key, or any list holding it; and the old key alone, which the
    # proof's rotation statement leads to the new one (format 3).
    assert verifies(after, new) and verifies(after, f"@{keyring}") and verifies(after, old)

    # The audit from every source, with the old key alone: it follows the statement, and says so.
    tiles = run.tmp / "tiles"
    run.stop()
    exported = fairdeck("tiles", "--data", str(run.data_dir), "--out", str(tiles))
    assert exported.rc == 0, exported.err
    dealer = run.start(lifetime=60)
    for where in (("--target", dealer.target), ("--data", str(run.data_dir)), ("--tiles", str(tiles))):
        audit = run.audit(*where, keys=[old])
        assert audit.rc == 0 and audit.report["findings"] == [], (where, audit.out)
        assert audit.report["key_rotations"] == [f"{short(old)} -> {short(new)}"]
        both = run.audit(*where, keys=[new, old])
        assert both.rc == 0 and both.report["key_rotations"] == [], (where, both.out)
    text = fairdeck("audit", "--target", dealer.target, "--key", old)
    assert text.rc == 0 and "followed a log key rotation" in text.out, text.out
    # The new key alone (what `fairdeck key` prints after the rotation): the checkpoints the old
    # key signed were "does not verify under the log key", BAD log of an honest dealer. The
    # statement the new key signed names the old one: the audit is incomplete (exit 2), not failed.
    data_new = run.audit("--data", str(run.data_dir), keys=[new])
    assert data_new.rc == 2 and data_new.report["findings"] == [], data_new.out
    assert list(data_new.report["keys_needed"]) == [old]
    assert "add it (--key)" in data_new.err and old in data_new.err, data_new.err
    text_new = fairdeck("audit", "--data", str(run.data_dir), "--key", new)
    assert text_new.rc == 2 and text_new.out.startswith("audit INCOMPLETE"), text_new.out
    # The SDK, given the old key alone, follows it too; given the list, it needs nothing more.
    with AuditClient(dealer.target, verifier=old) as log:
        assert log.checkpoint().size == len(run.entries())
    with AuditClient(dealer.target, verifier=old) as log:
        report = log.audit(max_hand_lifetime=60)
        assert report.ok and report.rotations == [f"{short(old)} -> {short(new)}"]
    with AuditClient(dealer.target, verifier=printed) as log:
        assert log.checkpoint().size == len(run.entries())
