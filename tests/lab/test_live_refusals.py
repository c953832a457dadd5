"""``lab collect --target`` against a dealer that requires tokens: what the kit writes and what it
refuses. A small real dealer in this process (RunningDealer, ``require_auth``), tokens made with
``fairdeck token create``; every collection is a few hundred hands."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairdeck.cli import main
from fairdeck.log.note import Signer
from tests.support.dealers import RunningDealer
from tests.support.fixtures import DealerFactory


@dataclass(frozen=True)
class AuthDealer:
    target: str
    key: str
    dealer_token: str
    auditor_token: str
    data: Path

    def log_size(self) -> int:
        """The size of the latest signed checkpoint (0 before the first)."""
        from fairdeck.client import AuditClient
        from fairdeck.client.exceptions import NotInLog

        with AuditClient(self.target, verifier=self.key, api_token=self.auditor_token) as log:
            try:
                return log.checkpoint().size
            except NotInLog:
                return 0


def _cli(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, module_dealer_factory: DealerFactory) -> AuthDealer:
    data = tmp_path_factory.mktemp("lab-auth") / "data"
    _cli("init", "--data", str(data))
    tokens = {
        role: _cli("token", "create", "--data", str(data), "--tenant", "lab", "--role", role).split()[-1]
        for role in ("dealer", "auditor")
    }
    target = module_dealer_factory(data_dir=data, rate_limit=0, require_auth=True).target
    return AuthDealer(target, _cli("key", "--data", str(data)), tokens["dealer"], tokens["auditor"], data)


def _collect(out: Path, served: AuthDealer, *extra: str) -> int:
    argv = ["lab", "collect", "--out", str(out), "--target", served.target, "--raw-bytes", "6000"]
    return main([*argv, "--batch", "40", "--no-progress", *extra])


def test_the_token_never_reaches_a_file_of_the_collection(
    served: AuthDealer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The manifest records the command, which a lab receives: the token's secret is not in it,
    however the option was spelled (argparse takes ``--token=X`` and abbreviations)."""
    # fdk_<id>_<secret>: the secret is base64url, which may itself hold "_" (split from the left)
    secret = served.dealer_token.split("_", 2)[2]
    assert len(secret) == 43, served.dealer_token
    for k, spelling in enumerate(
        (["--token", served.dealer_token], [f"--token={served.dealer_token}"], ["--tok", served.dealer_token])
    ):
        out = tmp_path / f"kit{k}"
        assert _collect(out, served, "--key", served.key, *spelling) == 0
        for path in out.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
        command = json.loads((out / "manifest.json").read_text())["command"]
        assert "--key" in command and any("redacted" in part for part in command)
    assert secret not in capsys.readouterr().out


@pytest.mark.parametrize("who", ["auditor", "nobody"])
def test_collect_without_a_dealer_token_says_it_needs_one(
    who: str, served: AuthDealer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DealHands needs the dealer role. Running the same command again cannot help, so the
    message says what can, and nothing was dealt."""
    token = ["--token", served.auditor_token] if who == "auditor" else []
    before = served.log_size()
    assert _collect(tmp_path / "kit", served, "--key", served.key, *token) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "dealer token" in err[0] and "--token" in err[0] and "same command" not in err[0]
    assert served.log_size() == before


def test_a_wrong_key_is_refused_before_any_hand_is_dealt(
    served: AuthDealer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every hand a live collection deals stays in the dealer's log for good: a --key that is not
    the dealer's is found before the first hand, not after the last."""
    assert _collect(tmp_path / "first", served, "--key", served.key, "--token", served.dealer_token) == 0
    capsys.readouterr()  # the log now has a signed checkpoint
    wrong = Signer.generate("another.example/log").verifier.to_string()
    before = served.log_size()
    assert _collect(tmp_path / "kit", served, "--key", wrong, "--token", served.dealer_token) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--key" in err[0] and "fairdeck key" in err[0], err
    assert "nothing was dealt" in err[0]
    assert served.log_size() == before


def test_a_wrong_key_for_a_log_with_no_checkpoint_yet_stops_after_the_first_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh log has no checkpoint to check the key against: the first batch is dealt, its
    checkpoint checked, and nothing is written."""
    data = tmp_path / "data"
    _cli("init", "--data", str(data))
    with RunningDealer(data, rate_limit=0) as running:
        wrong = Signer.generate("another.example/log").verifier.to_string()
        out = tmp_path / "kit"
        argv = ["lab", "collect", "--out", str(out), "--target", running.target, "--key", wrong]
        assert main([*argv, "--raw-bytes", "6000", "--batch", "40", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--key" in err[0] and "40 hands were dealt, and not collected" in err[0], err
    assert json.loads((out / "state.json").read_text())["hands"] == 0


def test_a_dealer_that_stops_mid_collection_is_resumed_after_its_restart(tmp_path: Path) -> None:
    """The dealer stops between two batches (a deploy, a crash): the collection keeps its whole
    batches, resumes against the restarted dealer (another port), and every hand, from before
    and after the restart, is found in the signed log; the manifest keeps that checkpoint."""
    from fairdeck.client.exceptions import FairdeckError
    from fairdeck.lab import collection
    from fairdeck.lab.live import LiveDealer, check_log
    from fairdeck.log.note import Verifier
    from fairdeck.log.receipts import open_signed_checkpoint

    data = tmp_path / "data"
    _cli("init", "--data", str(data))
    key = Verifier.parse(_cli("key", "--data", str(data)))
    out = tmp_path / "kit"
    plan = collection.CollectionPlan(deck="standard", raw_bytes=8000, source="live", batch=30)
    with RunningDealer(data, rate_limit=0) as running:
        first = LiveDealer(running.target, key, timeout=5)
        batches = iter(range(10))

        def stop_the_dealer() -> bool:
            if next(batches) == 1:
                running.stop()
            return False

        with pytest.raises(FairdeckError):
            collection.collect(out, first, plan, should_stop=stop_the_dealer)
        first.close()
        assert json.loads((out / "state.json").read_text())["hands"] == 30
        second = LiveDealer(running.start(), key)
        try:
            state = collection.collect(out, second, plan)
            found = check_log(second, out)
        finally:
            second.close()
    assert state["hands"] > 30 and found["ok"], found["problems"]
    assert found["entries_checked"] == 2 * state["hands"]
    checkpoint = open_signed_checkpoint(found["checkpoint"].encode(), key)
    assert checkpoint.size == found["tree_size"] and checkpoint.root.hex() == found["root"]
