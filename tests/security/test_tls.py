"""TLS and mTLS between the real dealer and the real SDK (certificates made
here with trustme), and the refusal of plain text off loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from fairdeck.cli import main
from fairdeck.client import AsyncDealerClient, DealerClient
from fairdeck.client.audit_client import AsyncAuditClient
from fairdeck.client.calls import ClientConfig, is_loopback, tls_credentials
from fairdeck.client.exceptions import FairdeckError, PermissionDenied, Unavailable
from fairdeck_server.addresses import ListenRefused
from fairdeck_server.edge.transport import TlsConfigError
from fairdeck_server.run.app import DealerServer
from fairdeck_server.run.config import ServerConfig
from tests.support.dealers import RunningDealer
from tests.support.fixtures import DealerFactory
from tests.support.pki import Pki
from tests.support.tokens import MakeToken


@pytest.fixture
def served_tls(data: Path, pki: Pki, dealer_factory: DealerFactory) -> RunningDealer:
    return dealer_factory(data, tls_cert=pki.server_cert, tls_key=pki.server_key, require_auth=True)


@pytest.fixture
def served_mtls(data: Path, pki: Pki, dealer_factory: DealerFactory) -> RunningDealer:
    return dealer_factory(
        data, tls_cert=pki.server_cert, tls_key=pki.server_key, tls_client_ca=pki.ca_pem, require_auth=True
    )


def test_sdk_over_tls_with_a_token(served_tls: RunningDealer, pki: Pki, token_for: MakeToken) -> None:
    token = token_for("acme", "dealer")
    creds = tls_credentials(ca=pki.ca_pem)
    with DealerClient(served_tls.target, credentials=creds, api_token=token, timeout=10) as client:
        hand = client.open_hand()
        client.shuffle(hand.hand_id, ["alice", "bob"])
        closed = client.close_hand(hand.hand_id)
    closed.verify(commitment=hand.commitment)
    vkey = served_tls.server.publisher.signer.verifier  # type: ignore[union-attr]

    async def audited() -> int:
        async with (
            AsyncDealerClient(served_tls.target, credentials=creds, api_token=token) as dealer,
            AsyncAuditClient(served_tls.target, verifier=vkey, credentials=creds, api_token=token) as log,
        ):
            again = await dealer.get(hand.hand_id)
            streamed = [h async for h in dealer.deal_hands("standard", 3, close=True)]  # token on a stream
            assert len(streamed) == 3 and all(h.server_seed for h in streamed)
            return (await log.verify_hand(again, commitment=hand.commitment)).size

    assert asyncio.run(audited()) >= 2


def test_fairdeck_audit_over_tls(
    served_tls: RunningDealer, pki: Pki, token_for: MakeToken, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = token_for("acme", "auditor")
    with DealerClient(
        served_tls.target, credentials=tls_credentials(ca=pki.ca_pem), api_token=token_for("acme", "dealer")
    ) as client:
        client.close_hand(client.deal_new_hand().hand.hand_id)
    vkey = served_tls.server.publisher.signer.verifier.to_string()  # type: ignore[union-attr]
    base = ["audit", "--target", served_tls.target, "--key", vkey, "--json"]
    assert main([*base, "--ca", str(pki.ca_pem), "--token", token]) == 0
    monkeypatch.setenv("FAIRDECK_TOKEN", token)
    assert main([*base, "--ca", str(pki.ca_pem)]) == 0
    assert main(base) == 2  # plain text to a TLS port: cannot read the log
    monkeypatch.delenv("FAIRDECK_TOKEN")
    assert main([*base, "--ca", str(pki.ca_pem)]) == 2  # no token: refused


def test_a_plaintext_client_cannot_talk_to_a_tls_dealer(served_tls: RunningDealer) -> None:
    with DealerClient(served_tls.target, timeout=3) as client, pytest.raises(Unavailable):
        client.open_hand()


def test_a_client_that_does_not_trust_the_ca_refuses_the_dealer(
    served_tls: RunningDealer, tmp_path: Path, token_for: MakeToken
) -> None:
    stranger = Pki.make(tmp_path / "other")
    token = token_for("acme", "dealer")
    creds = tls_credentials(ca=stranger.ca_pem)
    client = DealerClient(served_tls.target, credentials=creds, api_token=token, timeout=3)
    with client, pytest.raises(Unavailable):
        client.open_hand()


def test_mtls_maps_the_certificate_to_tenant_and_role(served_mtls: RunningDealer, pki: Pki) -> None:
    dealer_cert = pki.client("acme-dealer", "fairdeck://tenant/acme/role/dealer", "https://example.com/x")
    auditor_cert = pki.client("acme-auditor", "fairdeck://tenant/acme/role/auditor")
    other_cert = pki.client("beta-dealer", "fairdeck://tenant/beta/role/dealer")
    creds = {
        name: tls_credentials(ca=pki.ca_pem, cert=cert, key=key)
        for name, (cert, key) in {"dealer": dealer_cert, "auditor": auditor_cert, "other": other_cert}.items()
    }
    with DealerClient(served_mtls.target, credentials=creds["dealer"], timeout=10) as dealer:
        hand = dealer.open_hand()
        closed = dealer.close_hand(dealer.deal_new_hand().hand.hand_id)
    with DealerClient(served_mtls.target, credentials=creds["auditor"], timeout=10) as auditor:
        assert auditor.get(closed.hand_id).transcript is not None
        with pytest.raises(PermissionDenied) as denied:
            auditor.draw(hand.hand_id)
        assert denied.value.reason == "ROLE_NOT_ALLOWED"
    with DealerClient(served_mtls.target, credentials=creds["other"], timeout=10) as other:
        with pytest.raises(FairdeckError) as missing:
            other.get(hand.hand_id)
        assert missing.value.reason == "HAND_NOT_FOUND"


@pytest.mark.parametrize(
    "uris",
    [
        (),
        ("fairdeck://tenant/acme/role/root",),
        ("fairdeck://tenant/bad name/role/dealer",),
        ("fairdeck://tenant/a/role/dealer", "fairdeck://tenant/b/role/dealer"),
        ("spiffe://acme/dealer",),
    ],
    ids=["no-san", "bad-role", "bad-tenant", "two-identities", "foreign-uri"],
)
def test_mtls_refuses_a_certificate_without_one_fairdeck_identity(
    served_mtls: RunningDealer, pki: Pki, uris: tuple[str, ...]
) -> None:
    cert, key = pki.client("unmapped", *uris)
    creds = tls_credentials(ca=pki.ca_pem, cert=cert, key=key)
    client = DealerClient(served_mtls.target, credentials=creds, timeout=10)
    with client, pytest.raises(FairdeckError) as refused:
        client.open_hand()
    assert (refused.value.code, refused.value.reason) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "INVALID_CERTIFICATE",
    )


def test_mtls_refuses_no_certificate_and_a_foreign_ca(
    served_mtls: RunningDealer, pki: Pki, tmp_path: Path
) -> None:
    client = DealerClient(served_mtls.target, credentials=tls_credentials(ca=pki.ca_pem), timeout=3)
    with client, pytest.raises(Unavailable):  # the handshake fails: no call reaches the dealer
        client.open_hand()
    stranger = Pki.make(tmp_path / "other")
    cert, key = stranger.client("mallory", "fairdeck://tenant/acme/role/dealer")
    creds = tls_credentials(ca=pki.ca_pem, cert=cert, key=key)
    with DealerClient(served_mtls.target, credentials=creds, timeout=3) as client, pytest.raises(Unavailable):
        client.open_hand()


def test_a_token_wins_over_the_certificate(
    served_mtls: RunningDealer, pki: Pki, token_for: MakeToken
) -> None:
    cert, key = pki.client("acme-auditor", "fairdeck://tenant/acme/role/auditor")
    creds = tls_credentials(ca=pki.ca_pem, cert=cert, key=key)
    token = token_for("acme", "dealer")
    with DealerClient(served_mtls.target, credentials=creds, api_token=token, timeout=10) as client:
        assert client.open_hand().hand_id  # the token's dealer role, not the certificate's auditor role


async def _start(config: ServerConfig) -> int:
    server = DealerServer(config, trim_heap=False)
    try:
        port = await server.start()
    except BaseException:
        await server.storage.close()
        raise
    await server.stop()
    return port


def test_plaintext_off_loopback_is_refused_unless_insecure(tmp_path: Path, pki: Pki) -> None:
    for address in ("0.0.0.0:0", "[::]:0", "10.0.0.1:0"):
        with pytest.raises(ListenRefused, match="without TLS"):
            asyncio.run(_start(ServerConfig(listen=address, data_dir=tmp_path / "a")))
    assert not (tmp_path / "a" / "seed.key").exists()  # refused before anything was made
    listen = "0.0.0.0:0"
    assert asyncio.run(_start(ServerConfig(listen=listen, data_dir=tmp_path / "b", insecure=True))) > 0
    tls = ServerConfig(
        listen=listen, data_dir=tmp_path / "c", tls_cert=pki.server_cert, tls_key=pki.server_key
    )
    assert asyncio.run(_start(tls)) > 0


def test_insecure_off_loopback_still_requires_credentials(tmp_path: Path) -> None:
    async def scenario() -> FairdeckError:
        server = DealerServer(
            ServerConfig(listen="0.0.0.0:0", data_dir=tmp_path, insecure=True), trim_heap=False
        )
        port = await server.start()
        try:
            async with AsyncDealerClient(f"127.0.0.1:{port}", timeout=10) as client:
                with pytest.raises(FairdeckError) as refused:
                    await client.open_hand()
                return refused.value
        finally:
            await server.stop()

    assert asyncio.run(scenario()).reason == "MISSING_CREDENTIALS"


def test_half_a_tls_config_is_refused(tmp_path: Path, pki: Pki) -> None:
    for config in [
        ServerConfig(listen="127.0.0.1:0", data_dir=tmp_path, tls_cert=pki.server_cert),
        ServerConfig(listen="127.0.0.1:0", data_dir=tmp_path, tls_client_ca=pki.ca_pem),
        ServerConfig(
            listen="127.0.0.1:0",
            data_dir=tmp_path,
            tls_cert=pki.server_cert,
            tls_key=tmp_path / "missing.key",
        ),
        ServerConfig(
            listen="127.0.0.1:0", data_dir=tmp_path, tls_cert=pki.server_cert, tls_key=pki.ca_pem.parent
        ),
    ]:
        with pytest.raises(TlsConfigError):
            asyncio.run(_start(config))


def test_loopback_detection() -> None:
    loopback = [
        "127.0.0.1:1",
        "127.5.6.7:1",
        "[::1]:1",
        "localhost:1",
        "LOCALHOST:1",
        "ipv4:127.0.0.1:1",
        "unix:/x",
    ]
    remote = ["0.0.0.0:1", "[::]:1", "10.0.0.1:1", "example.com:1", "dns:///example.com:1", "[2001:db8::1]:1"]
    assert [is_loopback(a) for a in loopback] == [True] * len(loopback)
    assert [is_loopback(a) for a in remote] == [False] * len(remote)


def test_the_sdk_will_not_send_a_token_in_plain_text_off_loopback(pki: Pki) -> None:
    with pytest.raises(ValueError, match="plain text"):
        ClientConfig("dealer.example:50051", api_token="fdk_x")
    with pytest.raises(ValueError, match="plain text"):
        DealerClient("10.1.2.3:50051", api_token="fdk_x")
    ClientConfig("dealer.example:50051", api_token="fdk_x", insecure=True)
    ClientConfig("dealer.example:50051", credentials=tls_credentials(ca=pki.ca_pem), api_token="fdk_x")
    ClientConfig("127.0.0.1:50051", api_token="fdk_x")
    with pytest.raises(ValueError, match="both"):
        tls_credentials(ca=pki.ca_pem, cert=pki.server_cert)
