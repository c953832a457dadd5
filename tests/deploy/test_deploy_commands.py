"""The deploy files' `fairdeck serve` command lines, run for real.

No container runs here, so the command lines of the Dockerfile (SQLite),
compose.yaml and the Kubernetes Deployment (PostgreSQL) are run as processes
of the installed console script, with only what a container changes swapped
for local equivalents: 0.0.0.0 becomes 127.0.0.1 (loopback only), the
container paths of the data dir and key files become temp dirs, and only the
modules the image installs can be imported (runtime_only.py). The keys are
made as deploy/README.md says. Each run must become SERVING (`fairdeck
health`), deal and reveal a hand, serve /metrics, log JSON where asked, and
drain and exit 0 on SIGTERM.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import sysconfig
import urllib.request
from pathlib import Path

import grpc
import pytest

from fairdeck.cli.health_command import check
from fairdeck.client import DealerClient
from tests.support import deployfiles as d
from tests.support.env import clean_env
from tests.support.waits import wait_for

FAIRDECK = Path(sys.executable).parent / "fairdeck"
# `fairdeck` with only the image's modules importable (runtime_only.py): as in the container.
IMAGE_FAIRDECK = [sys.executable, str(Path(__file__).resolve().parents[1] / "support" / "runtime_only.py")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def make_keys(where: Path) -> None:
    """As deploy/README.md: `fairdeck init --keys-only` makes both key files and prints the verifier key."""
    where.mkdir(mode=0o700)
    made = subprocess.run(
        [
            str(FAIRDECK),
            "init",
            "--keys-only",
            "--seed-key-file",
            str(where / "seed.key"),
            "--log-key-file",
            str(where / "log.key"),
            "--log-origin",
            "deploy.test/log",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("deploy.test/log+")
    assert (where / "seed.key").stat().st_mode & 0o777 == 0o600


def localise(args: list[str], tmp_path: Path, grpc_port: int, metrics_port: int) -> list[str]:
    """The container's addresses and paths swapped for loopback and temp dirs."""
    out = []
    for arg in args:
        arg = arg.replace(f"0.0.0.0:{d.GRPC_PORT}", f"127.0.0.1:{grpc_port}")
        arg = arg.replace(f"0.0.0.0:{d.METRICS_PORT}", f"127.0.0.1:{metrics_port}")
        arg = arg.replace("/run/fairdeck-keys/", f"{tmp_path}/keys/")
        arg = arg.replace("/var/lib/fairdeck", f"{tmp_path}/data")
        assert "0.0.0.0" not in arg
        out.append(arg)
    return out


def wait_serving(target: str, proc: subprocess.Popen[str], within: float = 30.0) -> None:

    def serving() -> bool:
        assert proc.poll() is None, f"serve exited {proc.returncode}: {proc.communicate()}"
        try:
            return check(target, timeout=1.0) == "SERVING"
        except grpc.RpcError:
            return False

    wait_for(f"{target} SERVING", serving, timeout=within, every=0.1)


def run_deploy_command(args: list[str], tmp_path: Path, env: dict[str, str]) -> tuple[str, str]:
    """Run `fairdeck serve ARGS` as the deploy file would; return its stdout and stderr after SIGTERM."""
    grpc_port, metrics_port = free_port(), free_port()
    argv = [*IMAGE_FAIRDECK, "serve", *localise(args, tmp_path, grpc_port, metrics_port)]
    # Without the container's environment: what the deploy file sets, and nothing inherited.
    proc = subprocess.Popen(
        argv, env=clean_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        target = f"127.0.0.1:{grpc_port}"
        wait_serving(target, proc)
        health = subprocess.run(
            [*IMAGE_FAIRDECK, "health", "--target", target], capture_output=True, text=True
        )
        assert (health.returncode, health.stdout) == (0, "SERVING\n"), health.stderr
        with DealerClient(target, timeout=20) as dealer:
            opened = dealer.open_hand("standard")
            dealt = dealer.draw(opened.hand_id, 5).cards
            closed = dealer.close_hand(opened.hand_id)
            closed.verify(commitment=opened.commitment, dealt=dealt)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            assert response.status == 200
            assert b"fairdeck" in response.read()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "fairdeck dealer stopped" in out
    return out, err


def json_log_lines(stderr: str) -> list[dict[str, object]]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "no log lines"
    return [json.loads(line) for line in lines]


def test_dockerfile_cmd_runs(tmp_path: Path) -> None:
    """The image's default: SQLite in the data volume, keys created there."""
    args = d.serve_args_everywhere()["Dockerfile CMD"]
    run_deploy_command(args, tmp_path, {})
    assert (tmp_path / "data" / "fairdeck.db").exists()
    assert (tmp_path / "data" / "seed.key").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("where", ["compose dealer", "k8s fairdeck-dealer/dealer"])
def test_replica_command_runs_on_postgresql(where: str, tmp_path: Path, pg_url: str) -> None:
    """A replica as compose and Kubernetes run it: PostgreSQL, key files supplied, JSON logs."""
    make_keys(tmp_path / "keys")
    (tmp_path / "data").mkdir()
    args = d.serve_args_everywhere()[where]
    _, err = run_deploy_command(args, tmp_path, {"FAIRDECK_DB": pg_url})
    assert all(isinstance(entry, dict) for entry in json_log_lines(err))
    seed_key = (tmp_path / "keys" / "seed.key").read_text().strip()
    # PRIVATE+KEY+name+hash+base64: the base64 may hold "+" itself (and may end in one), so split
    # off only the first four; the last "+" would leave "" one key in 64, and "" is in any text.
    log_key = (tmp_path / "keys" / "log.key").read_text().strip().split("+", 4)[-1]
    assert seed_key and log_key
    assert seed_key not in err and log_key not in err
    # Nothing durable in the data dir: hands and the log live in PostgreSQL, keys were supplied.
    assert not (tmp_path / "data" / "fairdeck.db").exists()
    assert not (tmp_path / "data" / "seed.key").exists()


def run_image_default(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The image's CMD as is (0.0.0.0, no TLS, no FAIRDECK_INSECURE), data dir aside."""
    args = [
        a.replace("/var/lib/fairdeck", f"{tmp_path}/data")
        for a in d.serve_args_everywhere()["Dockerfile CMD"]
    ]
    return subprocess.run(
        [*IMAGE_FAIRDECK, "serve", *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_image_default_refuses_plain_text_off_loopback(tmp_path: Path) -> None:
    """Plain text off loopback is refused before anything listens: the image is safe by
    default, and compose and Kubernetes must say --insecure (TLS ends in front of it)."""
    result = run_image_default(tmp_path)
    assert result.returncode != 0
    assert f"refusing to listen on 0.0.0.0:{d.GRPC_PORT} without TLS" in result.stderr


def test_refusal_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    result = run_image_default(tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr


def test_runtime_only_blocks_what_the_image_lacks() -> None:
    from tests.support.runtime_only import OnlyImageModules, image_modules

    finder = OnlyImageModules(image_modules())
    for absent in ("numpy", "scipy", "matplotlib", "pokerkit", "pytest", "yaml", "trustme", "hypothesis"):
        with pytest.raises(ImportError, match="not installed in the image"):
            finder.find_spec(absent, None)
    for present in ("grpc", "grpc_health", "psycopg", "psycopg_pool", "cryptography", "prometheus_client"):
        assert finder.find_spec(present, None) is None
    # A private stdlib module that sys.stdlib_module_names does not list (imported by zoneinfo via psycopg).
    private = [p.stem for p in Path(sysconfig.get_path("stdlib")).glob("_sysconfigdata_*.py")]
    for own_or_stdlib in ("fairdeck", "fairdeck_server", "json", "asyncio", *private):
        assert finder.find_spec(own_or_stdlib, None) is None
