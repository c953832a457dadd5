"""A real ``fairdeck serve`` at the bounds of its numeric options: the values that ended in an
OverflowError traceback (gRPC's 32-bit milliseconds and ints) or killed healthy workers are
refused with exit 2 in one line, from a flag, the environment or the config file; a dealer with
every option at its maximum, and one with every option at its minimum, starts, is SERVING and
stops cleanly. Every other value is tried in process (tests/run/test_option_ranges.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.dealers import DealerProcess, deal_closed_hand
from tests.support.env import clean_env
from tests.support.forked_serve import ServeForker

MAXIMA = {
    "--handshake-timeout": "2147483.647",
    "--connection-idle-timeout": "2147483.647",
    "--max-connection-age": "2147483.647",
    "--default-deadline": "86400",
    "--max-message-bytes": "2147483647",
    "--max-request-bytes": "2147483647",
    "--max-connections": "1048576",
    "--max-connections-per-peer": "1048576",
    "--grace-seconds": "86400",
    "--checkpoint-interval": "3600",
    "--max-hand-lifetime": "31536000",
    "--rate-limit": "1000000",
    "--rate-burst": "1000000000",
    "--auth-failure-rate": "1000000",
    "--auth-failure-burst": "1000000000",
    "--max-open-hands": "1000000000",
    "--max-calls-in-flight": "1000000",
    "--max-streams": "1000000",
    "--witness-interval": "86400",
    "--worker-timeout": "86400",
    "--db-pool-size": "1000",
}
MINIMA = {
    "--handshake-timeout": "0.1",
    "--connection-idle-timeout": "0.1",
    "--max-connection-age": "0.1",
    "--default-deadline": "0.001",
    "--max-message-bytes": "65536",
    "--max-request-bytes": "65536",
    "--max-connections": "1",
    "--max-connections-per-peer": "1",
    "--grace-seconds": "0",
    "--checkpoint-interval": "0.001",
    "--max-hand-lifetime": "0.001",
    "--rate-limit": "0.001",
    "--rate-burst": "1",
    "--auth-failure-rate": "0.001",
    "--auth-failure-burst": "0",
    "--max-open-hands": "1",
    "--max-calls-in-flight": "1",
    "--max-streams": "1",
    "--witness-interval": "0.001",
    "--worker-timeout": "2",
    "--db-pool-size": "2",
}


def serve(
    forker: ServeForker, *argv: str, env: dict[str, str] | None = None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``fairdeck serve ARGV``: forked where no variable is set, else in a fresh interpreter."""
    if not env:
        return forker.run(["serve", "--listen", "127.0.0.1:0", *argv], timeout=60, cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "serve", "--listen", "127.0.0.1:0", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(**(env or {})),
        cwd=cwd,
    )


@pytest.mark.parametrize(
    ("argv", "env", "file", "names"),
    [
        (["--default-deadline", "200000"], {}, "", "--default-deadline (flag): must be 0 (no limit) or from"),
        (
            ["--handshake-timeout", "1e7"],
            {},
            "",
            "--handshake-timeout (flag): must be from 0.1 to 2147483.647",
        ),
        (
            [],
            {"FAIRDECK_CONNECTION_IDLE_TIMEOUT": "1e9"},
            "",
            "FAIRDECK_CONNECTION_IDLE_TIMEOUT (environment)",
        ),
        ([], {}, "max_connection_age = 1e9\n", "max_connection_age (config file"),
        (["--max-message-bytes", str(2**40)], {}, "", "--max-message-bytes (flag): must be 0 (no limit) or"),
        ([], {}, f"max_request_bytes = {2**40}\n", "max_request_bytes (config file"),
        (
            ["--worker-timeout", "0.4", "--processes", "2"],
            {},
            "",
            "--worker-timeout (flag): must be 0 (never)",
        ),
        ([], {"FAIRDECK_GRACE_SECONDS": "nan"}, "", "FAIRDECK_GRACE_SECONDS (environment): must be a finite"),
    ],
)
def test_overflowing_option_values_exit_2_in_one_line_not_a_traceback(
    argv: list[str], env: dict[str, str], file: str, names: str, tmp_path: Path, serve_forker: ServeForker
) -> None:
    if file:
        (tmp_path / "fairdeck.toml").write_text(file)
        argv = [*argv, "--config", str(tmp_path / "fairdeck.toml")]
    result = serve(serve_forker, "--data", str(tmp_path / "data"), *argv, env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "OverflowError" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fairdeck serve: {names}"), result.stderr
    assert "to" in lines[0]  # the allowed range


def _serving(target: str) -> bool:
    with grpc.insecure_channel(target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=20)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def _flags(values: dict[str, str]) -> list[str]:
    return [part for flag, value in values.items() for part in (flag, value)]


def test_a_dealer_with_every_option_at_its_maximum_serves_and_stops(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    with DealerProcess(
        tmp_path / "data", tmp_path / "stderr", *_flags(MAXIMA), forker=serve_forker
    ) as dealer:
        assert _serving(dealer.target)
        deal_closed_hand(dealer.target, "standard")
        assert dealer.terminate() == 0, dealer.stderr()
    assert "Traceback" not in dealer.stderr()


def test_a_dealer_with_every_option_at_its_minimum_serves_and_stops(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """At the minimum a deal is cut by its 1 ms default deadline, with that reason: the dealer
    still runs as configured; the health check is not held to the deadline."""
    with DealerProcess(
        tmp_path / "data", tmp_path / "stderr", *_flags(MINIMA), forker=serve_forker
    ) as dealer:
        assert _serving(dealer.target)
        assert dealer.terminate() == 0, dealer.stderr()
    assert "Traceback" not in dealer.stderr()
