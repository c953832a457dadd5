"""Key rotation with the real `fairdeck rotate-key` command and a real dealer:
hands sealed under an old seed key still deal, close and verify; checkpoints
signed by a retired log key still verify and the log is still proven
append-only across the rotation."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

import pytest

from fairdeck.cli import main
from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.core.errors import VerificationError
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.note import Signer, Verifier
from fairdeck_server.dealing.vault import (
    KEY_ENV,
    SeedVault,
    VaultError,
    key_id,
    load_or_create_key,
    read_key_file,
)
from fairdeck_server.publishing.log_signing import LogKeyError, create_log_keys, load_log_keys
from fairdeck_server.refusals import StartupRefused
from tests.support.dealers import RunningDealer
from tests.support.waits import wait_for


def sealed_key_ids(data: Path) -> dict[str, str]:
    with sqlite3.connect(data / "fairdeck.db") as db:
        return {h: bytes(s)[1:5].hex() for h, s in db.execute("SELECT hand_id, sealed_seed FROM hands")}


def test_seed_key_rotation_keeps_old_hands_dealing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    dealer = RunningDealer(data)
    try:
        dealer.start()
        with DealerClient(dealer.target, timeout=10) as client:
            opened = client.open_hand()
            client.add_client_seeds(opened.hand_id, ["early"])
            drawn = client.open_hand()
            client.shuffle(drawn.hand_id, ["alice"])
            first = client.draw(drawn.hand_id, 2)
            dealt = client.deal_new_hand()
        dealer.stop()
        old_id = key_id(read_key_file(data / "seed.key")[0]).hex()

        capsys.readouterr()
        assert main(["rotate-key", "seed", "--data", str(data)]) == 0
        out = capsys.readouterr().out
        keys = read_key_file(data / "seed.key")
        new_id = key_id(keys[0]).hex()
        assert len(keys) == 2 and key_id(keys[1]).hex() == old_id and new_id in out
        assert base64.b64encode(keys[0]).decode() not in out  # prints ids, never keys
        assert (data / "seed.key").stat().st_mode & 0o777 == 0o600

        dealer.start()
        with DealerClient(dealer.target, timeout=10) as client:
            fresh = client.open_hand()
            client.shuffle(opened.hand_id, ["late"])
            rest = client.draw(drawn.hand_id, 50)
            closed = [client.close_hand(h) for h in (opened.hand_id, drawn.hand_id, dealt.hand.hand_id)]
        ids = sealed_key_ids(data)
        assert ids[fresh.hand_id] == new_id
        assert {ids[h.hand_id] for h in (opened, drawn, dealt.hand)} == {old_id}
        for hand, commitment in zip(closed, (opened, drawn, dealt.hand), strict=True):
            hand.verify(commitment=commitment.commitment)
        assert closed[0].transcript.client_seeds == (b"early", b"late")  # type: ignore[union-attr]
        assert closed[1].transcript.cards == tuple(c.id for c in first.cards + rest.cards)  # type: ignore[union-attr]
        assert closed[2].transcript.cards == tuple(c.id for c in dealt.cards)  # type: ignore[union-attr]
        dealer.stop()

        # Dropping a key while a hand sealed under it is still open is refused at start,
        # naming the key id (never key material); dropping one whose hands are closed is safe.
        assert main(["rotate-key", "seed", "--data", str(data)]) == 0
        newest = read_key_file(data / "seed.key")[0]
        (data / "seed.key").write_text(base64.b64encode(newest).decode() + "\n")
        with pytest.raises(StartupRefused) as lost:
            dealer.start()
        dealer.server = None  # it never started
        assert fresh.hand_id in str(lost.value) and new_id in str(lost.value)
        assert base64.b64encode(keys[0]).decode() not in str(lost.value)
        (data / "seed.key").write_text(
            base64.b64encode(newest).decode() + "\n" + base64.b64encode(keys[0]).decode()
        )
        dealer.start()
        with DealerClient(dealer.target, timeout=10) as client:
            client.close_hand(fresh.hand_id).verify(commitment=fresh.commitment)
        dealer.stop()
        (data / "seed.key").write_text(base64.b64encode(newest).decode() + "\n")
        dealer.start()
        with DealerClient(dealer.target, timeout=10) as client:
            assert client.get(closed[0].hand_id).transcript == closed[0].transcript
    finally:
        dealer.close()


def test_seed_keys_from_the_environment_newest_first(tmp_path: Path) -> None:
    old, new = bytes(range(32)), bytes(range(1, 33))
    env = {KEY_ENV: f"{base64.b64encode(new).decode()}, {base64.b64encode(old).decode()}"}
    vault = load_or_create_key(tmp_path / "unused.key", environ=env)
    assert not (tmp_path / "unused.key").exists()
    sealed_old = SeedVault(old).seal("h1", b"s" * 32)
    assert vault.open("h1", sealed_old) == b"s" * 32
    assert vault.seal("h2", b"t" * 32)[1:5] == key_id(new)
    for bad in ["", "not base64!", base64.b64encode(b"short").decode(), f"{env[KEY_ENV]},{env[KEY_ENV]}"]:
        with pytest.raises(VaultError) as refused:
            load_or_create_key(tmp_path / "unused.key", environ={KEY_ENV: bad})
        assert base64.b64encode(new).decode() not in str(refused.value)


def signed_by_new_key(log: AuditClient) -> Checkpoint:
    """The head once the publisher (every 0.2 s) has signed the entries made since the restart;
    until then the head is the last checkpoint of the retired key."""

    def head() -> Checkpoint | None:
        try:
            return log.checkpoint()
        except VerificationError:
            return None

    return wait_for("a checkpoint signed by the new key", head, timeout=10)


def test_log_key_rotation_keeps_old_checkpoints_verifiable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    since = tmp_path / "since.note"
    dealer = RunningDealer(data)
    try:
        dealer.start()
        with DealerClient(dealer.target, timeout=10) as client:
            before = [client.close_hand(client.deal_new_hand().hand.hand_id) for _ in range(3)]
        old_signer = load_log_keys(data / "log.key").signer
        old_key = old_signer.verifier.to_string()
        assert main(["audit", "--target", dealer.target, "--key", old_key, "--since", str(since)]) == 0
        saved = Checkpoint.parse(since.read_text().split("\n\n")[0] + "\n")
        dealer.stop()

        capsys.readouterr()
        assert main(["rotate-key", "log", "--data", str(data)]) == 0
        printed = [line for line in capsys.readouterr().out.splitlines() if "+" in line]
        keys = load_log_keys(data / "log.key")
        new_key = keys.signer.verifier.to_string()
        assert printed == [new_key, old_key] == [v.to_string() for v in keys.verifiers]
        assert keys.signer.name == old_signer.name  # same origin, new key id
        assert "PRIVATE" not in "".join(printed)

        dealer.start()
        with DealerClient(dealer.target, timeout=10) as client:
            after = [client.close_hand(client.deal_new_hand().hand.hand_id) for _ in range(2)]
        capsys.readouterr()
        assert main(["key", "--data", str(data)]) == 0
        assert capsys.readouterr().out.strip() == new_key

        with AuditClient(dealer.target, verifier=new_key) as log:
            head = signed_by_new_key(log)
            for hand in before + after:  # proofs up to the newest head, signed by the new key
                log.verify_hand(hand, commitment=hand.commitment)
            assert log.consistency(saved).size == head.size > saved.size

        target = ["audit", "--target", dealer.target]
        # Across the rotation: the saved checkpoint (old key) is proven a prefix of today's log (new key).
        assert main([*target, "--key", new_key, "--key", old_key, "--since", str(since)]) == 0
        assert main([*target, "--key", new_key]) == 0
        # The retired key no longer signs, but it signed the statement naming the new one: an
        # auditor who holds only the old key follows it, and says so.
        capsys.readouterr()
        assert main([*target, "--key", old_key]) == 0
        old_name_and_id = "+".join(old_key.split("+")[:2])  # base64 may hold a '+': split from the left
        assert f"followed a log key rotation: {old_name_and_id} ->" in capsys.readouterr().out
        with AuditClient(dealer.target, verifier=old_key) as log:
            assert signed_by_new_key(log).size == head.size  # the SDK follows it too
        keyring = tmp_path / "keys.txt"
        keyring.write_text(f"# fairdeck log keys, newest first\n{new_key}\n{old_key}\n")
        dealer.stop()
        assert main(["audit", "--data", str(data), "--key", f"@{keyring}"]) == 0  # every stored checkpoint
        assert main(["audit", "--data", str(data), "--key", new_key]) == 2  # incomplete: needs the old key
        assert main(["audit", "--data", str(data), "--key", old_key]) == 0  # the statement leads on

        # Consistency is still checked: a fork signed by the retired key is caught.
        forged = Checkpoint(saved.origin, saved.size, bytes(32))
        since.write_bytes(sign_checkpoint(forged, old_signer))
        capsys.readouterr()
        assert main(["audit", "--data", str(data), "--key", f"@{keyring}", "--since", str(since)]) == 1
        assert "does not match the entries" in capsys.readouterr().out
    finally:
        dealer.close()


def test_log_key_file_rules(tmp_path: Path) -> None:
    path = tmp_path / "log.key"
    with pytest.raises(LogKeyError):
        from fairdeck_server.publishing.log_signing import rotate_log_key

        rotate_log_key(path)
    with pytest.raises(LogKeyError, match="no log key"):
        load_log_keys(path, "example.com/log")  # loading never creates one
    assert not path.exists()
    keys = create_log_keys(path, "example.com/log")
    assert load_log_keys(path, "example.com/log") == keys
    other = Signer.generate("other.origin")
    retired = Signer.generate("example.com/log")
    # The secret is the base64 after the fourth "+"; the base64 itself may hold "+".
    secrets = [signer.to_string().split("+", 4)[4] for signer in (keys.signer, retired)]
    for lines in [
        [keys.signer.to_string(), retired.to_string()],  # a private retired key
        [keys.signer.to_string(), other.verifier.to_string()],  # another origin
        [keys.signer.to_string(), keys.signer.verifier.to_string()],  # listed twice
        ["not a key"],
    ]:
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(LogKeyError) as refused:
            load_log_keys(path)
        assert not any(secret in str(refused.value) for secret in secrets)
    path.write_text(f"{keys.signer.to_string()}\n{Verifier.parse(other.verifier.to_string()).to_string()}\n")
    path.chmod(0o644)
    with pytest.raises(LogKeyError, match="readable by others"):
        load_log_keys(path)
