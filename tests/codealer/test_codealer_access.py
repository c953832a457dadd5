"""Who may call the co-dealer: only its dealer, with the token ``fairdeck codealer init`` (or
``token``) made; the dealer's start refusals for the token; a dealer with a wrong token. Real
``fairdeck codealer`` and ``fairdeck serve`` processes on 127.0.0.1:0."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from fairdeck.client.exceptions import from_rpc_error
from fairdeck.v1 import codealer_pb2, dealer_pb2_grpc
from fairdeck.v1 import dealer_pb2 as pb
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.forked_serve import ServeForker

WRONG = "fdcd_" + "A" * 43
"""A token of the right shape that is not the co-dealer's."""


@pytest.fixture
def codealer(tmp_path: Path, serve_forker: ServeForker) -> Iterator[CodealerProcess]:
    init_codealer(tmp_path / "cd1")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as process:
        yield process


def refusal(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(grpc.RpcError) as e:
        call()
    error = from_rpc_error(e.value)
    return error.code.name, error.reason


def hands_in_ledger(directory: Path) -> int:
    with sqlite3.connect(f"file:{directory / 'codealer.db'}?mode=ro", uri=True) as db:
        count = int(db.execute("SELECT count(*) FROM hands").fetchone()[0])
    db.close()
    return count


def every_call(stub: object) -> list[Callable[[], object]]:
    """One call of each CoDealerService method, each one that would make the co-dealer work."""
    s = stub
    return [
        lambda: s.AnnounceHand(  # type: ignore[attr-defined]
            codealer_pb2.AnnounceHandRequest(hand_id="h1", deck="standard", holder=1, holder_count=2)
        ),
        lambda: s.ShuffleDeck(codealer_pb2.ShuffleDeckRequest(hand_id="h1")),  # type: ignore[attr-defined]
        lambda: s.GetShare(codealer_pb2.GetShareRequest(hand_id="h1", position=0)),  # type: ignore[attr-defined]
        lambda: s.RevealSeed(codealer_pb2.RevealSeedRequest(hand_id="h1")),  # type: ignore[attr-defined]
        lambda: s.GetIdentity(codealer_pb2.GetIdentityRequest()),  # type: ignore[attr-defined]
    ]


def test_codealer_without_authentication_anyone_could_announce_shuffle_share_or_reveal(
    codealer: CodealerProcess,
) -> None:
    """The co-dealer's port took every call from anyone who reached it: a stranger could announce
    hands into its ledger, or end a hand early with RevealSeed. Without the dealer's token each
    call is refused UNAUTHENTICATED before any work, and nothing is written."""
    for call in every_call(codealer.stub(token=None)):
        assert refusal(call) == ("UNAUTHENTICATED", "MISSING_CREDENTIALS")
    for call in every_call(codealer.stub(token=WRONG)):
        assert refusal(call) == ("UNAUTHENTICATED", "INVALID_TOKEN")
    assert refusal(every_call(codealer.stub(token="Basic x"))[0]) == ("UNAUTHENTICATED", "INVALID_TOKEN")
    assert hands_in_ledger(codealer.directory) == 0
    announced = codealer.stub().AnnounceHand(
        codealer_pb2.AnnounceHandRequest(hand_id="h1", deck="standard", holder=1, holder_count=2)
    )
    assert announced.identity_key.hex() == codealer.identity
    assert hands_in_ledger(codealer.directory) == 1
    token = codealer.token
    log = codealer.stop()
    assert token not in log and "INVALID_TOKEN" in log  # refusals are logged, the token never


def test_failed_authentications_are_limited_per_address(codealer: CodealerProcess) -> None:
    stranger = codealer.stub(token=WRONG)
    reasons = [refusal(every_call(stranger)[-1])[1] for _ in range(40)]
    assert reasons[0] == "INVALID_TOKEN" and reasons[-1] == "AUTH_RATE_LIMITED"
    assert refusal(every_call(codealer.stub(token=None))[-1]) == ("RESOURCE_EXHAUSTED", "AUTH_RATE_LIMITED")
    # The dealer, at the same address, is never locked out by a stranger's failures.
    assert (
        codealer.stub().GetIdentity(codealer_pb2.GetIdentityRequest()).identity_key.hex() == codealer.identity
    )


def test_a_new_token_replaces_the_old_at_the_codealers_restart(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    directory = tmp_path / "cd1"
    init_codealer(directory)
    old = (directory / "dealer.token").read_text().strip()
    assert (directory / "dealer.token").stat().st_mode & 0o777 == 0o600
    out = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "codealer", "token", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert out.returncode == 0 and out.stdout == "", out.stderr
    new = (directory / "dealer.token").read_text().strip()
    assert new != old and old not in out.stderr and new not in out.stderr
    assert (directory / "dealer.token").stat().st_mode & 0o777 == 0o600
    with CodealerProcess(directory, forker=serve_forker) as codealer:
        assert refusal(every_call(codealer.stub(token=old))[-1]) == ("UNAUTHENTICATED", "INVALID_TOKEN")
        assert codealer.stub(token=new).GetIdentity(codealer_pb2.GetIdentityRequest()).identity_key


def test_a_codealer_dir_without_a_dealer_token_is_refused_naming_the_command(tmp_path: Path) -> None:
    """A co-dealer made before tokens: ``serve`` says how to make one, exit 2, one line."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    (directory / "dealer.token").unlink()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fairdeck.cli",
            "codealer",
            "serve",
            "--dir",
            str(directory),
            "--listen",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert f"fairdeck codealer token --dir {directory}" in lines[0] and "--codealer-token @FILE" in lines[0]


def serve_refusal(tmp_path: Path, *flags: str) -> list[str]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fairdeck.cli",
            "serve",
            "--data",
            str(tmp_path / "data"),
            "--listen",
            "127.0.0.1:0",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines


def test_a_dealer_without_a_usable_codealer_token_refuses_to_start_naming_the_option(tmp_path: Path) -> None:
    key = "ab" * 32
    pinned = ("--codealer", "127.0.0.1:7390", "--codealer-key", key)
    (line,) = serve_refusal(tmp_path, *pinned)
    assert "--codealer needs --codealer-token @FILE" in line and "dealer.token" in line
    (line,) = serve_refusal(tmp_path, *pinned, "--codealer-token", WRONG)
    assert "--codealer-token: want @FILE" in line and WRONG not in line  # a secret is never a flag
    loose = tmp_path / "loose.token"
    loose.write_text(WRONG + "\n")
    os.chmod(loose, 0o644)
    (line,) = serve_refusal(tmp_path, *pinned, "--codealer-token", f"@{loose}")
    assert str(loose) in line and "chmod 600" in line
    garbled = tmp_path / "garbled.token"
    garbled.write_text("not a token\n")
    os.chmod(garbled, 0o600)
    (line,) = serve_refusal(tmp_path, *pinned, "--codealer-token", f"@{garbled}")
    assert str(garbled) in line and "fairdeck codealer token" in line and "not a token" not in line


def test_a_dealer_with_a_wrong_token_refuses_codealt_opens_unavailable_and_deals_ordinary_hands(
    codealer: CodealerProcess, tmp_path: Path, serve_forker: ServeForker
) -> None:
    """Consistent with a co-dealer that is down: the dealer starts (it cannot know the token is
    wrong until the co-dealer answers), co-dealt calls are UNAVAILABLE CODEALER_UNAVAILABLE saying
    why, and ordinary hands deal on."""
    wrong = tmp_path / "wrong.token"
    wrong.write_text(WRONG + "\n")
    os.chmod(wrong, 0o600)
    flags = [f"@{wrong}" if f.startswith("@") else f for f in codealer.dealer_flags()]
    with DealerProcess(tmp_path / "data", tmp_path / "dealer.log", *flags, forker=serve_forker) as dealer:
        stub = dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(dealer.target))
        with pytest.raises(grpc.RpcError) as e:
            stub.OpenHand(pb.OpenHandRequest(deck="standard", mode=pb.DEAL_MODE_CODEALT), timeout=60)
        error = from_rpc_error(e.value)
        assert (error.code.name, error.reason) == ("UNAVAILABLE", "CODEALER_UNAVAILABLE")
        assert "INVALID_TOKEN" in str(error) and "--codealer-token" in str(error) and WRONG not in str(error)
        hand = stub.OpenHand(pb.OpenHandRequest(deck="standard")).hand
        assert len(stub.DrawCards(pb.DrawCardsRequest(hand_id=hand.hand_id, count=5)).cards) == 5
    assert WRONG not in (tmp_path / "dealer.log").read_text()


def test_the_codealers_work_is_capped_calls_beyond_are_refused_too_many_calls(tmp_path: Path) -> None:
    """Work at the co-dealer had no bound: every call went to a worker thread's queue. Past its
    cap (here 1, the servicer's own parameter) a call is refused RESOURCE_EXHAUSTED
    TOO_MANY_CALLS with a retry delay, before any work, and the next one after is served."""
    import asyncio

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from fairdeck.v1 import codealer_pb2_grpc
    from fairdeck_server.codealer.dealer_token import TokenCheck, new_token
    from fairdeck_server.codealer.holder import CoDealer
    from fairdeck_server.codealer.ledger import Ledger
    from fairdeck_server.dealing.vault import SeedVault
    from fairdeck_server.edge.codealer_servicer import CoDealerServicer

    token = new_token()
    codealer = CoDealer(
        Ledger(tmp_path / "codealer.db"), Ed25519PrivateKey.generate(), SeedVault(bytes(range(32)))
    )
    metadata = (("authorization", f"Bearer {token}"),)

    async def run() -> list[object]:
        server = grpc.aio.server()
        codealer_pb2_grpc.add_CoDealerServiceServicer_to_server(
            CoDealerServicer(codealer, TokenCheck(token), max_in_flight=1), server
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = codealer_pb2_grpc.CoDealerServiceStub(channel)
                calls = [
                    stub.AnnounceHand(
                        codealer_pb2.AnnounceHandRequest(
                            hand_id=f"cap-{i}", deck="shoe-8", holder=1, holder_count=2
                        ),
                        metadata=metadata,
                    )
                    for i in range(4)
                ]
                results = await asyncio.gather(*calls, return_exceptions=True)
                after = await stub.GetIdentity(codealer_pb2.GetIdentityRequest(), metadata=metadata)
                return [*results, after]
        finally:
            await server.stop(None)

    *results, after = asyncio.run(run())
    refused = [from_rpc_error(r) for r in results if isinstance(r, grpc.RpcError)]
    assert 1 <= len(refused) <= 3, results
    assert {(e.code.name, e.reason) for e in refused} == {("RESOURCE_EXHAUSTED", "TOO_MANY_CALLS")}
    assert all(e.retry_delay is not None for e in refused)
    assert after.identity_key == codealer.identity_key  # type: ignore[attr-defined]
    codealer.ledger.close()
