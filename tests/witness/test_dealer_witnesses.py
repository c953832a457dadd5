"""A dealer with witnesses: real witness processes, a real dealer on loopback, the real SDK.

- cosigned checkpoints reach the audit service, and a client with a policy accepts them;
- a witness that is down does not stop dealing; the others make checkpoints final, and it
  catches up when it comes back;
- a split view (two copies of one data dir, diverging) never gets the second tree cosigned, and
  an auditor with a 2-of-2 policy rejects it, naming the witnesses that are missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from fairdeck.client import AuditClient, DealerClient
from fairdeck.core.errors import VerificationError
from fairdeck.log.cosignature import CosignatureVerifier, Cosigner, WitnessPolicy
from fairdeck.log.note import Verifier
from fairdeck.log.policy import TlogPolicy
from tests.support.dealers import RunningDealer
from tests.support.waits import wait_for
from tests.support.witnesses import WitnessProcess, init_log, init_witness

T = TypeVar("T")
DEADLINE_S = 60.0  # generous: a wait for something that must happen, not a timing bar


def eventually(what: str, probe: Callable[[], T | None]) -> T:
    seen: list[T] = []

    def ready() -> bool:
        value = probe()
        if value is not None:
            seen.append(value)
        return value is not None

    wait_for(what, ready, timeout=DEADLINE_S)
    return seen[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def deal(target: str, n: int) -> list[str]:
    """Deal and close ``n`` hands (two log entries each); their ids."""
    with DealerClient(target) as dealer:
        ids = [dealer.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id for _ in range(n)]
        for hand_id in ids:
            dealer.close_hand(hand_id)
    return ids


def policy_of(*witnesses: WitnessProcess, k: int | None = None) -> WitnessPolicy:
    named = {f"w{i + 1}": CosignatureVerifier.parse(w.vkey) for i, w in enumerate(witnesses)}
    return WitnessPolicy(named, k or len(named))


@pytest.fixture
def log_vkey(tmp_path: Path) -> str:
    return init_log(tmp_path / "data")


@pytest.fixture
def witnesses(tmp_path: Path, log_vkey: str) -> Iterator[list[WitnessProcess]]:
    started = []
    for name in ("w1", "w2"):
        init_witness(tmp_path / name, f"witness.test/{name}", log_vkey)
        started.append(WitnessProcess(tmp_path / name))
    yield started
    for w in started:
        w.stop()


WITNESS_INTERVAL_S = 0.25
"""How often the dealer asks its witnesses here: each test waits for a few rounds (cosigned, caught
up, refused), so the default second a round made those waits seconds long for nothing they test."""


def _dealer(data: Path, specs: list[str], k: int = 0) -> RunningDealer:
    dealer = RunningDealer(
        data,
        witnesses=tuple(specs),
        witness_threshold=k,
        witness_interval=WITNESS_INTERVAL_S,
        checkpoint_interval=0.05,
        rate_limit=0,
    )
    dealer.start()
    return dealer


def _final(target: str, vkey: str, policy: WitnessPolicy) -> Callable[[], int | None]:
    def probe() -> int | None:
        with AuditClient(target, verifier=vkey, witness_policy=policy) as audit:
            try:
                return audit.checkpoint().size
            except VerificationError:
                return None

    return probe


def test_checkpoints_are_cosigned_and_a_policy_client_accepts_them(
    tmp_path: Path, log_vkey: str, witnesses: list[WitnessProcess]
) -> None:
    dealer = _dealer(tmp_path / "data", [f"{w.url}={w.vkey}" for w in witnesses])
    try:
        hands = deal(dealer.target, 5)
        policy = policy_of(*witnesses)
        eventually("a final checkpoint covering the hands", lambda: _final(dealer.target, log_vkey, policy)())
        size = eventually(
            "a final checkpoint with all 10 entries",
            lambda: s if (s := _final(dealer.target, log_vkey, policy)()) and s >= 10 else None,
        )
        assert size >= 10
        with (
            AuditClient(dealer.target, verifier=log_vkey, witness_policy=policy) as audit,
            DealerClient(dealer.target) as d,
        ):
            audit.verify_hand(d.get(hands[-1]))
        witness_args = [f"--witness=w{i + 1}={w.vkey}" for i, w in enumerate(witnesses)]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "fairdeck.cli",
                "audit",
                "--target",
                dealer.target,
                "--key",
                log_vkey,
                *witness_args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "signed by w1, w2; missing none" in done.stdout
        # Tiles of the latest checkpoint both witnesses cosigned; an audit from them with the policy.
        tiles = tmp_path / "tiles"
        cli = [sys.executable, "-m", "fairdeck.cli"]
        exported = subprocess.run(
            [*cli, "tiles", "--data", str(tmp_path / "data"), "--out", str(tiles), *witness_args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert exported.returncode == 0, exported.stderr
        from_tiles = subprocess.run(
            [*cli, "audit", "--tiles", str(tiles), "--key", log_vkey, *witness_args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert from_tiles.returncode == 0, from_tiles.stdout + from_tiles.stderr
        assert "signed by w1, w2; missing none" in from_tiles.stdout
        stranger = f"--witness=w9={Cosigner.from_seed('w.test/9', bytes(32)).verifier.to_string()}"
        none = subprocess.run(
            [*cli, "tiles", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "t2"), stranger],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert none.returncode == 2 and "no stored checkpoint has the cosignatures" in none.stderr
        # The same witnesses as a C2SP tlog-policy file, as the public witness network publishes
        # them: the SDK and the auditor take it for witnesses and quorum.
        policy_file = tmp_path / "witnesses.policy"
        policy_file.write_text(
            f"log {log_vkey}\n"
            + "".join(f"witness w{i + 1} {w.vkey} {w.url}\n" for i, w in enumerate(witnesses))
            + "group both all w1 w2\nquorum both\n"
        )
        from_file = TlogPolicy.parse(policy_file.read_bytes()).witness_policy()
        with (
            AuditClient(dealer.target, verifier=log_vkey, witness_policy=from_file) as audit,
            DealerClient(dealer.target) as d,
        ):
            audit.verify_hand(d.get(hands[-1]))
        audited = subprocess.run(
            [*cli, "audit", "--target", dealer.target, "--key", log_vkey, "--policy", str(policy_file)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert audited.returncode == 0, audited.stdout + audited.stderr
        assert "which meets its quorum 2 of (w1, w2): signed by w1, w2; missing none" in audited.stdout
    finally:
        dealer.close()


def test_a_policy_names_the_missing_witness(
    tmp_path: Path, log_vkey: str, witnesses: list[WitnessProcess]
) -> None:
    """The dealer uses w1 only; an auditor who wants w1 and w2 rejects, naming w2."""
    w1, w2 = witnesses
    dealer = _dealer(tmp_path / "data", [f"{w1.url}={w1.vkey}"])
    try:
        deal(dealer.target, 3)
        eventually("w1 cosigns", _final(dealer.target, log_vkey, policy_of(w1)))
        with (
            AuditClient(dealer.target, verifier=log_vkey, witness_policy=policy_of(w1, w2)) as audit,
            pytest.raises(VerificationError) as e,
        ):
            audit.checkpoint()
        assert e.value.step == "cosignatures"
        assert "signed by w1; missing w2" in str(e.value)
    finally:
        dealer.close()


def test_a_witness_that_is_down_does_not_stop_dealing_and_catches_up(
    tmp_path: Path, log_vkey: str, witnesses: list[WitnessProcess]
) -> None:
    port = free_port()
    init_witness(tmp_path / "w3", "witness.test/w3", log_vkey)
    w3_vkey = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "witness", "key", "--dir", str(tmp_path / "w3")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    specs = [f"{w.url}={w.vkey}" for w in witnesses] + [f"http://127.0.0.1:{port}={w3_vkey}"]
    dealer = _dealer(tmp_path / "data", specs, k=2)
    w3: WitnessProcess | None = None
    try:
        deal(dealer.target, 20)  # dealing goes on with w3 down
        two = policy_of(*witnesses)
        eventually("2 of 3 cosign", _final(dealer.target, log_vkey, two))
        assert dealer.server is not None
        failures = dealer.server.witnessing.failures.labels("witness.test/w3")._value.get()
        assert failures >= 1
        w3 = WitnessProcess(tmp_path / "w3", port=port)
        three = WitnessPolicy({**two.witnesses, "w3": CosignatureVerifier.parse(w3_vkey)}, 3)
        deal(dealer.target, 2)
        eventually("w3 catches up", _final(dealer.target, log_vkey, three))
    finally:
        dealer.close()
        if w3 is not None:
            w3.stop()


# Not serial: every wait is DEADLINE_S, for something that must happen; no timing bar. (It was
# serial as named flaky under load; beside four workers at load 10-48 it passed each of 8 runs.)
def test_a_split_view_never_gets_its_second_tree_cosigned(
    tmp_path: Path, log_vkey: str, witnesses: list[WitnessProcess]
) -> None:
    specs = [f"{w.url}={w.vkey}" for w in witnesses]
    policy = policy_of(*witnesses)
    a = _dealer(tmp_path / "data", specs)
    deal(a.target, 4)
    common = eventually("the common prefix is final", _final(a.target, log_vkey, policy))
    a.stop()
    shutil.copytree(tmp_path / "data", tmp_path / "copy", ignore=shutil.ignore_patterns("fairdeck.lock"))
    a.start()
    b: RunningDealer | None = None
    try:
        deal(a.target, 3)  # the public tree
        grown = eventually(
            "the public tree grows final",
            lambda: s if (s := _final(a.target, log_vkey, policy)()) and s > common else None,
        )
        assert grown > common
        # Then the fork: the same log key, the same origin, another tree. (Had it reached the
        # witnesses first, the public tree would be the one refused: either way, never both.)
        b = _dealer(tmp_path / "copy", specs)
        forked = deal(b.target, 6)
        # Each witness refused B's tree as inconsistent with A's (422), and logged it.
        eventually(
            "both witnesses refuse the fork",
            lambda: (
                all("refused an inconsistent checkpoint" in w.stderr_path.read_text() for w in witnesses)
                or None
            ),
        )
        with AuditClient(b.target, verifier=log_vkey, witness_policy=policy) as audit:
            with DealerClient(b.target) as d:
                hand = d.get(forked[-1])
            with pytest.raises(VerificationError) as e:
                audit.verify_hand(hand)
        assert e.value.step == "cosignatures"
        assert "signed by none; missing w1, w2" in str(e.value)
        # Without a policy the fork looks fine: this is exactly the gap witnesses close.
        with AuditClient(b.target, verifier=log_vkey) as audit, DealerClient(b.target) as d:
            audit.verify_hand(d.get(forked[-1]))
    finally:
        if b is not None:
            b.close()
        a.close()


def test_a_client_ahead_of_the_final_checkpoint_still_gets_its_consistency_proof(
    tmp_path: Path, log_vkey: str, witnesses: list[WitnessProcess]
) -> None:
    """A proof of a fresh hand uses the newest checkpoint, which is not final yet; a consistency
    proof from it must not be refused because "the latest" (final) checkpoint is smaller
    (regression: INVALID_ARGUMENT first_tree_size)."""
    w1 = witnesses[0]
    dealer = _dealer(tmp_path / "data", [f"{w1.url}={w1.vkey}"])
    try:
        deal(dealer.target, 2)
        final = eventually("w1 cosigns", _final(dealer.target, log_vkey, policy_of(w1)))
        w1.stop()  # finality stops here; dealing goes on
        fresh = deal(dealer.target, 3)[-1]
        with AuditClient(dealer.target, verifier=log_vkey) as audit:
            ahead = audit.inclusion_proof(hand_id=fresh, reveal=True).verify(Verifier.parse(log_vkey))
            assert ahead.size > final
            assert audit.checkpoint().size == final  # "the latest" is the final one
            assert audit.consistency(ahead).size >= ahead.size
    finally:
        dealer.close()
