"""API tokens: made, listed and revoked by the real `fairdeck token` command
against a real data dir, and checked by the real dealer through the SDK."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.cli import main
from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError, Unauthenticated
from fairdeck_server.policy import auth
from fairdeck_server.principal import Role
from fairdeck_server.refusals import DealerError
from fairdeck_server.storage.base import TokenRecord
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.dealers import RunningDealer
from tests.support.speed import scaled
from tests.support.tokens import MakeToken, create_token
from tests.support.waits import wait_for, wait_for_async


def refusal(target: str, token: str | None) -> FairdeckError:
    with DealerClient(target, api_token=token, timeout=10) as client, pytest.raises(FairdeckError) as caught:
        client.open_hand()
    return caught.value


def test_token_format_and_what_is_stored(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = create_token(data, "acme", "dealer", capsys, label="table 7")
    parsed = auth.split_token(token)
    assert parsed is not None, token
    token_id, secret = parsed
    assert token == f"fdk_{token_id}_{secret}" and len(secret) == 43  # 32 random bytes, base64url
    with sqlite3.connect(data / "fairdeck.db") as db:
        row = db.execute("SELECT token_id, tenant, role, digest, label, revoked_ms FROM tokens").fetchone()
        dump = "\n".join(db.iterdump())
    assert row == (token_id, "acme", "dealer", auth.token_digest(token_id, secret), "table 7", None)
    assert secret not in dump and token not in dump
    # The digest binds the id: the same secret under another id does not match.
    assert auth.token_digest("0" * 16, secret) != row[3]


def test_list_and_revoke_never_print_a_secret(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = create_token(data, "acme", "dealer", capsys, label="ops laptop")
    b = create_token(data, "bravo", "auditor", capsys)
    a_id, b_id = auth.split_token(a)[0], auth.split_token(b)[0]  # type: ignore[index]
    assert main(["token", "list", "--data", str(data)]) == 0
    listing = capsys.readouterr().out
    assert a_id in listing and b_id in listing and "ops laptop" in listing and "auditor" in listing
    assert main(["token", "list", "--data", str(data), "--tenant", "bravo", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["token_id"], r["tenant"], r["role"], r["revoked_ms"]) for r in rows] == [
        (b_id, "bravo", "auditor", None)
    ]
    assert main(["token", "revoke", "--data", str(data), a_id]) == 0
    revoked = capsys.readouterr()
    assert main(["token", "revoke", "--data", str(data), "feedfacefeedface"]) == 1
    missing = capsys.readouterr()
    assert "no token feedfacefeedface" in missing.err
    assert main(["token", "list", "--data", str(data), "--json"]) == 0
    after = {r["token_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert after[a_id]["revoked_ms"] is not None and after[b_id]["revoked_ms"] is None
    printed = listing + json.dumps(rows) + json.dumps(after) + revoked.out + revoked.err + missing.out
    for token in (a, b):
        secret = auth.split_token(token)[1]  # type: ignore[index]
        assert secret not in printed
        assert auth.token_digest(*auth.split_token(token)).hex() not in printed  # type: ignore[misc]


def test_create_refuses_bad_input(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "create", "--data", str(data), "--tenant", "no spaces", "--role", "dealer"]) == 2
    assert "--tenant" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["token", "create", "--data", str(data), "--tenant", "acme", "--role", "root"])


def test_a_token_acts_for_its_tenant(secured: RunningDealer, token_for: MakeToken) -> None:
    token = token_for("acme", "dealer")
    with DealerClient(secured.target, api_token=token, timeout=10) as client:
        hand = client.open_hand()
        client.shuffle(hand.hand_id, ["alice"])
        closed = client.close_hand(hand.hand_id)
    closed.verify(commitment=hand.commitment)
    with sqlite3.connect(secured.data_dir / "fairdeck.db") as db:
        (tenant,) = db.execute("SELECT tenant FROM hands WHERE hand_id = ?", (hand.hand_id,)).fetchone()
    assert tenant == "acme"


def test_missing_unknown_garbled_and_revoked_tokens(
    secured: RunningDealer, token_for: MakeToken, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = refusal(secured.target, None)
    assert (missing.code, missing.reason, missing.field) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "MISSING_CREDENTIALS",
        "authorization",
    )
    assert isinstance(missing, Unauthenticated)

    good = token_for("acme", "dealer")
    token_id, secret = auth.split_token(good)  # type: ignore[misc]
    wrong_secret = f"fdk_{token_id}_{secret[::-1]}"
    unknown_id = f"fdk_{'0' * 16}_{secret}"
    garbled = ["x", "fdk_", good + "x", good.upper(), "Bearer " + good, good.replace("_", "-", 1)]
    answers = {(e.code, e.reason, str(e), e.field) for e in map(lambda t: refusal(secured.target, t), [
        wrong_secret, unknown_id, *garbled
    ])}  # fmt: skip

    # Revoked: refused within the cache TTL (here the dealer has seen it, so it is cached).
    with DealerClient(secured.target, api_token=good, timeout=10) as client:
        client.open_hand()
        assert main(["token", "revoke", "--data", str(secured.data_dir), token_id]) == 0
        capsys.readouterr()
        revoked_at = time.monotonic()

        def refused() -> bool:
            try:
                client.open_hand()
            except Unauthenticated as e:
                answers.add((e.code, e.reason, str(e), e.field))
                return True
            return False

        wait_for("the revocation to be seen", refused, timeout=auth.CACHE_TTL + 30)
        refused_after = time.monotonic() - revoked_at
    assert refused_after <= auth.CACHE_TTL + scaled(1.5)  # the TTL, then a call's work: scaled
    # Unknown, wrong secret, garbled and revoked: one indistinguishable answer.
    assert answers == {
        (grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "invalid API token", "authorization")
    }


def test_a_bad_token_is_refused_even_when_auth_is_optional(data: Path) -> None:
    dealer = RunningDealer(data)  # loopback: calls without credentials run as the default tenant
    dealer.start()
    try:
        with DealerClient(dealer.target, timeout=10) as client:
            client.open_hand()
        bad = refusal(dealer.target, "fdk_0123456789abcdef_" + "A" * 43)
        assert (bad.code, bad.reason) == (grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN")
    finally:
        dealer.close()


def test_health_needs_no_credentials(secured: RunningDealer) -> None:
    with grpc.insecure_channel(secured.target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_the_digest_is_compared_in_constant_time(
    secured: RunningDealer, token_for: MakeToken, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = token_for("acme", "dealer")
    token_id, secret = auth.split_token(token)  # type: ignore[misc]
    seen: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    with DealerClient(secured.target, api_token=token, timeout=10) as client:
        client.open_hand()
    assert refusal(secured.target, f"fdk_{token_id}_{'B' * 43}").reason == "INVALID_TOKEN"
    digest = auth.token_digest(token_id, secret)
    assert (digest, digest) in seen  # the accepted call went through compare_digest
    assert any(b == digest and a != digest for a, b in seen)  # and so did the refused one


def test_the_cache_keeps_a_token_at_most_its_ttl(tmp_path: Path) -> None:
    now = [100.0]

    async def scenario() -> None:
        storage = SqliteStorage(tmp_path / "t.db")
        await storage.start()
        try:
            token, record = auth.new_token("acme", Role.AUDITOR, "x")
            await storage.put_token(record)
            verifier = auth.TokenVerifier(storage, ttl=2.0, clock=lambda: now[0])
            who = await verifier.verify(token)
            assert (who.tenant, who.role, who.token_id) == ("acme", Role.AUDITOR, record.token_id)
            await storage.revoke_token(record.token_id, 1)
            now[0] += 1.9
            assert (await verifier.verify(token)).tenant == "acme"  # still cached
            now[0] += 0.2
            with pytest.raises(DealerError) as refused:
                await verifier.verify(token)
            assert refused.value.reason == "INVALID_TOKEN"
            # A token made after an unknown id was looked up is accepted once the miss expires.
            late, late_record = auth.new_token("acme", Role.DEALER)
            with pytest.raises(DealerError):
                await verifier.verify(late)
            await storage.put_token(late_record)
            now[0] += 2.1
            assert (await verifier.verify(late)).role is Role.DEALER
        finally:
            await storage.close()

    asyncio.run(scenario())


@contextlib.asynccontextmanager
async def dealer_storage(tmp_path: Path) -> AsyncIterator[SqliteStorage]:
    """A started SQLite storage in ``tmp_path``, closed after."""
    storage = SqliteStorage(tmp_path / "t.db")
    await storage.start()
    try:
        yield storage
    finally:
        await storage.close()


def watch_lookups(storage: SqliteStorage, now: list[float]) -> list[tuple[float, str]]:
    """The storage's token lookups from now on, as (the test's clock, token id), as it makes them."""
    lookups: list[tuple[float, str]] = []
    looked_up = storage.get_token

    async def get_token(token_id: str) -> TokenRecord | None:
        lookups.append((now[0], token_id))
        return await looked_up(token_id)

    storage.get_token = get_token  # type: ignore[method-assign]
    return lookups


async def _no_lookup_ahead(verifier: auth.TokenVerifier) -> None:
    """Once no lookup the verifier began in the background is under way (each is one, begun
    before ``verify`` returned)."""
    await wait_for_async("the lookups ahead to end", lambda: not verifier._ahead._tasks, every=0.01)


def test_a_token_in_use_is_looked_up_again_before_its_entry_expires(tmp_path: Path) -> None:
    """Late in its entry's life a valid token's next call starts a lookup in the background and
    goes on (regression: every ttl one call of each tenant waited for the lookup in the reader's
    queue, behind other tenants' reads). What it finds counts from when it began: a revocation
    it sees takes effect at once, and an entry never outlives ttl after its lookup began."""
    now = [100.0]

    async def scenario() -> None:
        async with dealer_storage(tmp_path) as storage:
            token, record = auth.new_token("acme", Role.DEALER)
            await storage.put_token(record)
            verifier = auth.TokenVerifier(storage, ttl=2.0, clock=lambda: now[0])
            lookups = watch_lookups(storage, now)
            assert (await verifier.verify(token)).tenant == "acme"
            now[0] += 1.5  # 1.5 s of 2: the entry as it is
            assert (await verifier.verify(token)).tenant == "acme"
            await _no_lookup_ahead(verifier)
            assert [at for at, _ in lookups] == [100.0]
            await storage.revoke_token(record.token_id, 1)
            now[0] += 0.2  # 1.7 s: this call is answered from the entry...
            assert (await verifier.verify(token)).tenant == "acme"
            # ...and the lookup it started comes back meanwhile: the clock stays 0.3 s before the
            # first entry's end.
            await _no_lookup_ahead(verifier)
            with pytest.raises(DealerError) as refused:
                await verifier.verify(token)
            assert refused.value.reason == "INVALID_TOKEN"
            assert [at for at, _ in lookups] == [100.0, pytest.approx(101.7)]
            verifier.close()

    asyncio.run(scenario())


def test_a_lookup_ahead_that_fails_is_told_by_the_next_call_that_needs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Storage failing under a lookup made ahead of need: the call that started it is answered
    from its entry, the failure is not said twice (DEBUG only), and once the entry has expired
    the next call looks the token up itself and gets STORAGE_UNAVAILABLE, as without reading
    ahead: nothing is silent, and nothing is served past the entry's ttl."""
    now = [100.0]

    async def scenario() -> None:
        async with dealer_storage(tmp_path) as storage:
            token, record = auth.new_token("acme", Role.DEALER)
            await storage.put_token(record)
            verifier = auth.TokenVerifier(storage, ttl=2.0, clock=lambda: now[0])
            assert (await verifier.verify(token)).tenant == "acme"

            async def failing(token_id: str) -> TokenRecord | None:
                raise sqlite3.OperationalError("disk I/O error")

            storage.get_token = failing  # type: ignore[method-assign]
            now[0] += 1.7
            with caplog.at_level(logging.DEBUG, logger="fairdeck_server"):
                assert (await verifier.verify(token)).tenant == "acme"
                await _no_lookup_ahead(verifier)
                ahead = [r for r in caplog.records if "read ahead failed" in r.getMessage()]
                assert [r.levelno for r in ahead] == [logging.DEBUG]
                now[0] += 0.4  # the entry made at 100.0 has expired
                with pytest.raises(DealerError) as refused:
                    await verifier.verify(token)
            assert refused.value.reason == "STORAGE_UNAVAILABLE"
            verifier.close()

    asyncio.run(scenario())


def test_only_the_tokens_own_caller_has_it_looked_up_ahead(tmp_path: Path) -> None:
    """A lookup ahead of need is started only by a call that presents the token itself, not
    revoked: a caller who knows a token id (ids are in the logs) but not its secret, or one still
    using a revoked token, starts none (regression: either did, the first one late in the entry's
    life. The lookup then ran in the sprayer's own turn in the reader's queue, behind its
    backlog, and while it was pending the token's own calls started none: at the entry's end
    they waited for a lookup again, the wait that reading ahead is for)."""
    now = [100.0]

    async def scenario() -> None:
        async with dealer_storage(tmp_path) as storage:
            token, record = auth.new_token("acme", Role.DEALER)
            revoked, revoked_record = auth.new_token("acme", Role.DEALER)
            await storage.put_token(record)
            await storage.put_token(revoked_record)
            await storage.revoke_token(revoked_record.token_id, 1)
            verifier = auth.TokenVerifier(storage, ttl=2.0, clock=lambda: now[0])
            lookups = watch_lookups(storage, now)
            assert (await verifier.verify(token)).tenant == "acme"
            with pytest.raises(DealerError):
                await verifier.verify(revoked)
            assert len(lookups) == 2
            now[0] += 1.7  # late in both entries' lives
            guessed = token[: -len("AAAA")] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
            for wrong in (guessed, revoked):
                with pytest.raises(DealerError) as refused:
                    await verifier.verify(wrong, "203.0.113.9")
                assert refused.value.reason == "INVALID_TOKEN"
            await _no_lookup_ahead(verifier)
            assert len(lookups) == 2, "a wrong secret or a revoked token started a lookup"
            assert (await verifier.verify(token)).tenant == "acme"  # the token's own call does
            await _no_lookup_ahead(verifier)
            assert [token_id for _, token_id in lookups[2:]] == [record.token_id]
            verifier.close()

    asyncio.run(scenario())


def test_digest_is_sha256_of_id_and_secret() -> None:
    # Pinned: changing it would lock out every token ever issued.
    assert (
        auth.token_digest("0123456789abcdef", "s")
        == hashlib.sha256(b"fairdeck api token v1\0" + b"0123456789abcdef" + b"\0" + b"s").digest()
    )


def test_tokens_on_postgresql_across_two_replicas(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fairdeck token` with --db, and two dealers sharing the database: a
    revocation made once reaches both within the cache TTL."""

    def cli(*args: str) -> str:
        capsys.readouterr()
        assert main([*args, "--db", pg_url, "--data", str(tmp_path / "unused")]) == 0
        return capsys.readouterr().out

    token = cli("token", "create", "--tenant", "acme", "--role", "dealer").strip()
    token_id = auth.split_token(token)[0]  # type: ignore[index]
    assert token_id in cli("token", "list", "--tenant", "acme")
    keys = {
        "seed_key_file": tmp_path / "seed.key",
        "log_key_file": tmp_path / "log.key",
    }  # shared, as replicas do, made once by `fairdeck init --keys-only` (serve never makes them)
    init = ["init", "--keys-only", "--data", str(tmp_path / "unused")]
    assert (
        main(
            [
                *init,
                "--seed-key-file",
                str(keys["seed_key_file"]),
                "--log-key-file",
                str(keys["log_key_file"]),
            ]
        )
        == 0
    )
    replicas = [RunningDealer(tmp_path / f"r{i}", db=pg_url, require_auth=True, **keys) for i in range(2)]
    try:
        for replica in replicas:
            replica.start()
        clients = [DealerClient(r.target, api_token=token, timeout=10) for r in replicas]
        hand = clients[0].open_hand()
        assert clients[1].close_hand(hand.hand_id).transcript is not None  # same tenant on the other replica
        cli("token", "revoke", token_id)
        pending = list(clients)

        def all_refuse() -> bool:
            for client in list(pending):
                try:
                    client.open_hand()
                except Unauthenticated:
                    pending.remove(client)
            return not pending

        wait_for("every replica to refuse the token", all_refuse, timeout=auth.CACHE_TTL + 1.5)
        for client in clients:
            client.close()
    finally:
        for replica in replicas:
            replica.close()
