"""A real nginx (Debian's package) on 127.0.0.1 serving a directory with the shipped tlog-tiles rules
(deploy/nginx/fairdeck-tiles.locations.conf), and an HTTP reader of what it serves.

``Nginx(root)`` writes a minimal nginx.conf in a temp dir (its pid file, logs and temp paths
there too), whose one server block has ``root`` and includes the shipped locations file
verbatim, and runs ``nginx -g 'daemon off;'`` until ``stop``. ``find_nginx`` is None where nginx
is not installed; CI installs it (.ci/run), and ``CI_REQUIRE_NGINX=1`` turns its absence into a
failure rather than a skip.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.waits import wait_for

REPO = Path(__file__).resolve().parents[2]
LOCATIONS = REPO / "deploy" / "nginx" / "fairdeck-tiles.locations.conf"


def find_nginx() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )


def require_nginx() -> str:
    """nginx's path; skips the test (fails it on CI) where it is not installed."""
    path = find_nginx()
    if path is None:
        message = "nginx is not installed (apt-get install nginx; .ci/run does)"
        if os.environ.get("CI_REQUIRE_NGINX"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]


class Nginx:
    def __init__(self, root: Path, locations: Path = LOCATIONS) -> None:
        binary = require_nginx()
        self.dir = Path(tempfile.mkdtemp(prefix="fairdeck-nginx-"))
        for sub in ("logs", "tmp"):
            (self.dir / sub).mkdir()
        self.port = _free_port()
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read pytest's 0700 temp dirs
        temp = self.dir / "tmp"
        conf = f"""{user}worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    keepalive_timeout 30;
    server {{
        listen 127.0.0.1:{self.port};
        root {root};
        location / {{ return 404; }}
        include {locations};
    }}
}}
"""
        self.conf = self.dir / "nginx.conf"
        self.conf.write_text(conf)
        check = subprocess.run([binary, "-t", "-p", str(self.dir), "-c", str(self.conf)], capture_output=True)
        assert check.returncode == 0, check.stderr.decode()
        self.proc = subprocess.Popen(
            [binary, "-p", str(self.dir), "-c", str(self.conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.url = f"http://127.0.0.1:{self.port}"

        def listening() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                assert self.proc.poll() is None, f"nginx did not start: {self.errors()}"
                return False

        try:
            wait_for("nginx to listen", listening, timeout=20)
        except AssertionError as e:
            raise AssertionError(f"nginx did not start: {self.errors()}") from e

    def errors(self) -> str:
        path = self.dir / "logs" / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def get(self, path: str, headers: dict[str, str] | None = None) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            return Answer(response.status, response.read(), {k.lower(): v for k, v in response.getheaders()})
        finally:
            conn.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Nginx:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
