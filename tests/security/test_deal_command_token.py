"""`fairdeck deal` against a dealer that requires credentials: --token and $FAIRDECK_TOKEN work
(regression: deal had neither, so it could not reach such a dealer), and --out writes a hand proof
that `fairdeck verify` accepts with the operator's key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.dealers import RunningDealer
from tests.support.tokens import MakeToken

CLI = [sys.executable, "-m", "fairdeck.cli"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=env)


def test_deal_with_a_token_json_and_a_hand_proof(
    secured: RunningDealer, token_for: MakeToken, data: Path, tmp_path: Path
) -> None:
    token = token_for("casino-a", "dealer")
    refused = run("deal", "--target", secured.target)
    assert refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr, refused.stderr
    out = tmp_path / "hand.json"
    done = run("deal", "--target", secured.target, "--token", token, "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    hand = json.loads(done.stdout)
    assert hand["verified"] is True and len(hand["seats"]) == 2 and len(hand["board"]["flop"]) == 3
    key = run("key", "--data", str(data)).stdout.strip()
    checked = run("verify", str(out), "--key", key)
    assert checked.returncode == 0 and checked.stdout.startswith(f"OK: hand {hand['hand_id']} verified"), (
        checked
    )
    from_env = run("deal", "--target", secured.target, env={**os.environ, "FAIRDECK_TOKEN": token})
    assert from_env.returncode == 0 and "verified:" in from_env.stdout, from_env.stderr
    assert token not in from_env.stdout + from_env.stderr
