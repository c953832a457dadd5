"""An HTTP proxy in front of a real witness, for tests of the dealer's side of tlog-witness: it
records every request as the dealer sent it (method, path, headers, body, time, connection) and
forwards it, or answers in the witness's place from a script (a 429 or 503 with Retry-After, an
answer with a foreign cosignature line added), as a busy or unusual witness on the public network
would."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.waits import hold_silent


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    connection: int
    answer: int = 0


Answer = tuple[int, dict[str, str], bytes]
Script = Callable[[Seen, Callable[[], Answer]], Answer]
"""Given the request and a function that forwards it to the witness, the answer to send."""


@dataclass
class Proxy:
    upstream_port: int
    script: Script = field(default=lambda seen, forward: forward())
    seen: list[Seen] = field(default_factory=list)
    first_late: float = 0.0
    """Seconds the first request takes to arrive after its headers (a slow path to the witness:
    its body is read, and it is seen, that much later)."""

    def __post_init__(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                if proxy.first_late and not proxy.seen:
                    hold_silent(proxy.first_late)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen = Seen(
                    self.command, self.path, dict(self.headers), body, time.monotonic(), id(self.connection)
                )
                proxy.seen.append(seen)
                status, headers, answer = proxy.script(seen, lambda: proxy._forward(seen))
                seen.answer = status
                self.send_response(status)
                for name, value in {"Content-Length": str(len(answer)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _forward(self, seen: Seen) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=10)
        try:
            headers = {
                k: v for k, v in seen.headers.items() if k.lower() in ("content-type", "content-length")
            }
            conn.request(seen.method, seen.path, body=seen.body or None, headers=headers)
            response = conn.getresponse()
            kept = {k: v for k, v in response.getheaders() if k.lower() in ("content-type", "retry-after")}
            return response.status, kept, response.read()
        finally:
            conn.close()

    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
