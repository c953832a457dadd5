"""The real `fairdeck serve` process with the security flags: TLS from PEM
files, credentials required, a token made by `fairdeck token create` while it
runs, DEBUG JSON logs on stderr that never show the token; and the refusal to
serve plain text off loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.calls import tls_credentials
from fairdeck.client.exceptions import Unauthenticated
from fairdeck_server.policy.auth import split_token
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker
from tests.support.pki import Pki
from tests.support.tokens import run_cli


def test_serve_with_tls_and_tokens(tmp_path: Path, pki: Pki, serve_forker: ServeForker) -> None:
    data = tmp_path / "data"
    stderr_path = tmp_path / "serve.log"
    with DealerProcess(
        data, stderr_path,
        "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key), "--require-auth",
        "--log-format", "json", "--log-level", "DEBUG", forker=serve_forker,
    ) as dealer:  # fmt: skip
        made = run_cli("token", "create", "--data", str(data), "--tenant", "acme", "--role", "dealer")
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
        creds = tls_credentials(ca=pki.ca_pem)
        with DealerClient(dealer.target, credentials=creds, api_token=token, timeout=20) as client:
            hand = client.open_hand()
            client.close_hand(hand.hand_id).verify(commitment=hand.commitment)
        with (
            DealerClient(dealer.target, credentials=creds, timeout=20) as anonymous,
            pytest.raises(Unauthenticated),
        ):
            anonymous.open_hand()
    logs = stderr_path.read_text()
    assert '"level": "DEBUG"' in logs or '"level": "INFO"' in logs, logs[-2000:]
    secret = split_token(token)[1]  # type: ignore[index]
    assert token not in logs and secret not in logs


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0"])
def test_serve_refuses_plain_text_off_loopback(tmp_path: Path, listen: str) -> None:
    refused = run_cli("serve", "--listen", listen, "--data", str(tmp_path / "data"))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "refusing to listen on" in refused.stderr and "--insecure" in refused.stderr
    assert not (tmp_path / "data" / "seed.key").exists()
