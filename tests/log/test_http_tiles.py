"""The auditor's HTTP reader of tiles (``fairdeck.cli.audit_command.HttpTiles``) against a server
that misbehaves: a gzip body that expands past the largest bundle, a truncated gzip stream, an
encoding it did not ask for, an error status. Each is a TileError naming the URL, never a hang
or a body read without bound."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fairdeck.cli.tile_source import HttpTiles
from fairdeck.log.tiles import MAX_BUNDLE_BYTES, TileError

ANSWERS: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/log/ok": (200, {"Content-Encoding": "gzip"}, gzip.compress(b"tile bytes")),
    "/log/plain": (200, {}, b"plain bytes"),
    "/log/bomb": (200, {"Content-Encoding": "gzip"}, gzip.compress(bytes(MAX_BUNDLE_BYTES + 1))),
    "/log/cut": (200, {"Content-Encoding": "gzip"}, gzip.compress(b"x" * 1000)[:-12]),
    "/log/brotli": (200, {"Content-Encoding": "br"}, b"\x00"),
    "/log/gone": (404, {}, b"not found"),
}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            status, headers, body = ANSWERS[self.path]
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/log"
    httpd.shutdown()


def test_gzip_and_identity_bodies_are_read(server: str) -> None:
    tiles = HttpTiles(server, 5)
    assert tiles.fetch("ok") == b"tile bytes"
    assert tiles.fetch("plain") == b"plain bytes"
    assert tiles.fetch("ok") == b"tile bytes"  # again, on the kept-alive connection


@pytest.mark.parametrize(
    ("rel", "says"),
    [
        ("bomb", "larger than .* once decompressed"),
        ("cut", "gzip stream ends early"),
        ("brotli", "Content-Encoding br"),
        ("gone", "HTTP 404"),
    ],
)
def test_a_misbehaving_server_is_a_tile_error_naming_the_url(server: str, rel: str, says: str) -> None:
    with pytest.raises(TileError, match=f"{server}/{rel}.*{says}|{says}"):
        HttpTiles(server, 5).fetch(rel)
