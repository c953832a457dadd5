"""``fairdeck health`` against a real dealer (tests/support/dealers.py) on 127.0.0.1:
the probe the Docker HEALTHCHECK and compose's service_healthy rely on.

Plain text, TLS and mTLS (certificates from trustme), a draining dealer
(NOT_SERVING), one that is gone, one that never answers, a dealer that
requires authentication (health stays open to probes), and bad usage.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trustme

from fairdeck.cli import main
from tests.support.dealers import RunningDealer
from tests.support.fixtures import DealerFactory
from tests.support.speed import scaled

FAIRDECK = Path(sys.executable).parent / "fairdeck"


def health(*args: str) -> int:
    return main(["health", *args])


def test_serving_dealer(dealer: RunningDealer, capsys: pytest.CaptureFixture[str]) -> None:
    assert health("--target", dealer.target) == 0
    assert capsys.readouterr().out == "SERVING\n"


def test_serving_dealer_service(dealer: RunningDealer, capsys: pytest.CaptureFixture[str]) -> None:
    assert health("--target", dealer.target, "--service", "fairdeck.v1.DealerService") == 0
    assert capsys.readouterr().out == "SERVING\n"


def test_unknown_service(dealer: RunningDealer, capsys: pytest.CaptureFixture[str]) -> None:
    assert health("--target", dealer.target, "--service", "fairdeck.v1.NoSuchService") == 1
    assert capsys.readouterr().out.startswith("SERVICE_UNKNOWN")


def test_console_script_exit_status(dealer: RunningDealer) -> None:
    """The installed script, as the image's HEALTHCHECK runs it."""
    ok = subprocess.run([str(FAIRDECK), "health", "--target", dealer.target], capture_output=True, text=True)
    assert (ok.returncode, ok.stdout) == (0, "SERVING\n"), ok.stderr
    usage = subprocess.run([str(FAIRDECK), "health", "--cert", "c.pem"], capture_output=True, text=True)
    assert usage.returncode == 2 and "--cert and --key go together" in usage.stderr


def test_draining_dealer_is_not_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    running = RunningDealer(tmp_path / "data")
    running.start()
    try:
        assert running.server is not None
        # The first step of the drain on SIGTERM (DealerServer.stop), with the server still up.
        running._run(running.server.health.enter_graceful_shutdown())
        assert health("--target", running.target, "--timeout", "5") == 1
        assert capsys.readouterr().out == f"NOT_SERVING: {running.target}\n"
        running.stop()
        assert health("--target", running.target, "--timeout", "2") == 1
        err = capsys.readouterr().err
        assert "UNAVAILABLE" in err and running.target in err
    finally:
        running.close()


def test_server_that_never_answers_times_out(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never speaks HTTP/2
        port = silent.getsockname()[1]
        started = time.monotonic()
        assert health("--target", f"127.0.0.1:{port}", "--timeout", "0.5") == 1
        assert time.monotonic() - started < 0.5 + scaled(4.5)  # the --timeout; the rest, the command's work
    assert "DEADLINE_EXCEEDED" in capsys.readouterr().err


def test_health_needs_no_token_when_auth_is_required(tmp_path: Path) -> None:
    """Kubelet probes and Envoy's health checks carry no token."""
    running = RunningDealer(tmp_path / "data", require_auth=True)
    running.start()
    try:
        assert health("--target", running.target) == 0
    finally:
        running.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1, one for another name, a client certificate,
    and a CA nobody uses, as PEM files."""
    where = tmp_path_factory.mktemp("pki")
    ca, other = trustme.CA(), trustme.CA()
    files: dict[str, Path] = {}

    def put(name: str, blob: trustme.Blob | list[trustme.Blob]) -> None:
        files[name] = where / f"{name}.pem"
        blobs = blob if isinstance(blob, list) else [blob]
        files[name].write_bytes(b"".join(b.bytes() for b in blobs))

    put("ca", ca.cert_pem)
    put("other-ca", other.cert_pem)
    for name, identity in [
        ("server", "127.0.0.1"),
        ("named", "dealer.internal"),
        ("client", "client.example"),
    ]:
        cert = ca.issue_cert(identity)
        put(f"{name}-chain", cert.cert_chain_pems)
        put(f"{name}-key", cert.private_key_pem)
    return files


@pytest.fixture
def served_tls(dealer_factory: DealerFactory, pki: dict[str, Path]) -> RunningDealer:
    return dealer_factory(tls_cert=pki["server-chain"], tls_key=pki["server-key"])


def test_tls(served_tls: RunningDealer, pki: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert health("--target", served_tls.target, "--ca", str(pki["ca"])) == 0
    assert capsys.readouterr().out == "SERVING\n"
    # Plain text to a TLS port, and a CA that did not sign the server's certificate.
    assert health("--target", served_tls.target, "--timeout", "2") == 1
    assert health("--target", served_tls.target, "--ca", str(pki["other-ca"]), "--timeout", "2") == 1
    assert "UNAVAILABLE" in capsys.readouterr().err


def test_tls_server_name(tmp_path: Path, pki: dict[str, Path]) -> None:
    """A certificate for a service name, probed by address (as a container probes itself)."""
    running = RunningDealer(tmp_path / "data", tls_cert=pki["named-chain"], tls_key=pki["named-key"])
    running.start()
    try:
        ca = str(pki["ca"])
        assert health("--target", running.target, "--ca", ca, "--timeout", "2") == 1
        assert health("--target", running.target, "--ca", ca, "--server-name", "dealer.internal") == 0
    finally:
        running.close()


def test_mtls(tmp_path: Path, pki: dict[str, Path]) -> None:
    running = RunningDealer(
        tmp_path / "data", tls_cert=pki["server-chain"], tls_key=pki["server-key"], tls_client_ca=pki["ca"]
    )
    running.start()
    try:
        ca = str(pki["ca"])
        assert health("--target", running.target, "--ca", ca, "--timeout", "2") == 1
        client = ["--cert", str(pki["client-chain"]), "--key", str(pki["client-key"])]
        assert health("--target", running.target, "--ca", ca, *client) == 0
    finally:
        running.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cert", "c.pem"], "--cert and --key go together"),
        (["--key", "k.pem"], "--cert and --key go together"),
        (["--timeout", "0"], "--timeout must be over 0"),
        (["--timeout", "nan"], "--timeout must be over 0"),
        (["--timeout", "inf"], "--timeout must be over 0 and at most 3600 seconds"),
        (["--ca", "/nonexistent/ca.pem"], "cannot read --ca /nonexistent/ca.pem"),
        (["--server-name", "dealer.internal"], "--server-name needs TLS"),
    ],
)
def test_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert health("--target", "127.0.0.1:1", *args) == 2
    assert message in capsys.readouterr().err


def test_unknown_option_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        health("--no-such-option")
    assert exit_info.value.code == 2
