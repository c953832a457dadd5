"""The Storage contract for API tokens, on every engine."""

from __future__ import annotations

import pytest

from fairdeck_server.storage.base import Storage, TokenRecord
from tests.support.engines import Engine, run


def token(
    token_id: str, tenant: str = "t", created_ms: int = 1, digest: bytes = bytes(32), label: str = ""
) -> TokenRecord:
    return TokenRecord(token_id, tenant, "dealer", digest, created_ms, label)


def test_tokens(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        first = token("k1", created_ms=20, label="primary")
        await s.put_token(first)
        await s.put_token(token("k0", created_ms=20))  # same time: ordered by id
        await s.put_token(token("k2", tenant="u", created_ms=10, digest=b"\x09" * 32))
        with pytest.raises(ValueError, match="already exists"):
            await s.put_token(token("k1", created_ms=99))
        assert await s.get_token("k1") == first
        assert await s.get_token("missing") is None
        assert [t.token_id for t in await s.list_tokens()] == ["k2", "k0", "k1"]
        assert [t.token_id for t in await s.list_tokens("t")] == ["k0", "k1"]
        assert await s.list_tokens("nobody") == []

        revoked = await s.revoke_token("k1", 500)
        assert revoked is not None and revoked.revoked_ms == 500
        again = await s.revoke_token("k1", 900)  # idempotent: the first revocation is kept
        assert again is not None and again.revoked_ms == 500
        assert await s.revoke_token("missing", 1) is None
        stored = await s.get_token("k1")
        assert stored is not None and stored.revoked_ms == 500 and stored.label == "primary"
        other = await s.get_token("k2")
        assert other is not None and other.revoked_ms is None and other.digest == b"\x09" * 32

    run(storage_engine, scenario)


def test_tokens_survive_a_restart(storage_engine: Engine) -> None:
    async def put(s: Storage) -> None:
        await s.put_token(token("k1"))
        await s.revoke_token("k1", 7)

    async def read(s: Storage) -> TokenRecord | None:
        return await s.get_token("k1")

    run(storage_engine, put)
    stored = run(storage_engine, read)
    assert stored is not None and stored.revoked_ms == 7
