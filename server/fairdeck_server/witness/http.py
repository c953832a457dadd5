"""The witness's HTTP edge: add-checkpoint, monitor retrieval, health and metrics, at the root.

The body's size is checked on the Content-Length header, before a byte is read; every request
has a socket timeout; at most ``MAX_IN_FLIGHT`` run at once (beyond that: 503 with Retry-After).
No handler error reaches the client as a stack trace: an unexpected one is logged and answered
500. The routes and their answers: docs/witness.md ("Running a witness").
"""

from __future__ import annotations

import logging
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from fairdeck_server.witness.protocol import MAX_BODY_BYTES, TEXT, Answer, Witness
from fairdeck_server.witness.state import Latest

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 64
REQUEST_TIMEOUT_S = 10.0
_CHECKPOINT_PATH = re.compile(r"/([0-9a-f]{64})/checkpoint")


class WitnessMetrics:
    """The witness's Prometheus metrics, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "fairdeck_witness_requests",
            "add-checkpoint requests answered, by HTTP status",
            ["code"],
            registry=self.registry,
        )
        self.cosigned_size = Gauge(
            "fairdeck_witness_cosigned_size",
            "tree size of the latest checkpoint cosigned, per log origin",
            ["origin"],
            registry=self.registry,
        )
        self.cosigned_time = Gauge(
            "fairdeck_witness_cosigned_timestamp_seconds",
            "time of the latest cosignature, per log origin",
            ["origin"],
            registry=self.registry,
        )
        for code in ("200", "400", "403", "404", "409", "411", "422", "500", "503"):
            self.requests.labels(code)

    def cosigned(self, latest: Latest) -> None:
        self.cosigned_size.labels(latest.origin).set(latest.size)
        self.cosigned_time.labels(latest.origin).set(latest.cosigned_at)


class WitnessHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, address: tuple[str, int], witness: Witness, metrics: WitnessMetrics) -> None:
        self.witness = witness
        self.metrics = metrics
        self.slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        super().__init__(address, _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    server: WitnessHTTPServer
    timeout = REQUEST_TIMEOUT_S
    protocol_version = "HTTP/1.1"  # keep-alive, as tlog-witness asks clients and witnesses to use
    server_version = "fairdeck-witness"
    sys_version = ""
    # http.server's own refusals (a malformed request line, a header too long): plain text, no HTML.
    error_message_format = "%(code)d %(message)s\n"
    error_content_type = TEXT

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, answer: Answer, *, close: bool = False, extra: dict[str, str] | None = None) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer.body)

    def _text(self, status: int, text: str, **kw: Any) -> None:
        self._send(Answer(status, (text + "\n").encode("utf-8"), TEXT), **kw)

    def do_POST(self) -> None:
        if not self.server.slots.acquire(blocking=False):
            self.server.metrics.requests.labels("503").inc()
            self._text(503, "too many requests in flight", close=True, extra={"Retry-After": "1"})
            return
        try:
            answer = self._post()
        except Exception:
            log.exception("add-checkpoint failed")
            answer = Answer(500, b"internal error\n", TEXT)
            self.close_connection = True
        finally:
            self.server.slots.release()
        if self.path.split("?", 1)[0] == "/add-checkpoint":
            self.server.metrics.requests.labels(str(answer.status)).inc()
        self._send(answer, close=self.close_connection)

    def _post(self) -> Answer:
        if self.path.split("?", 1)[0] != "/add-checkpoint":
            self.close_connection = True
            return Answer(404, b"not found\n", TEXT)
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True  # the body was not read: the connection cannot be reused
            return Answer(411, b"send the body with a Content-Length, not chunked\n", TEXT)
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            self.close_connection = True
            return Answer(411, b"a Content-Length is required\n", TEXT)
        if not (length_text.isascii() and length_text.isdigit()) or len(length_text) > 12:  # not "²"
            self.close_connection = True
            return Answer(400, b"malformed Content-Length\n", TEXT)
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # not read: refused on the header, before any decoding
            return Answer(400, f"body is larger than {MAX_BODY_BYTES} bytes\n".encode(), TEXT)
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            return Answer(400, b"the body ended before its Content-Length\n", TEXT)
        return self.server.witness.add_checkpoint(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if path == "/healthz":
                healthy = self.server.witness.state.probe()
                self._text(200 if healthy else 503, "SERVING" if healthy else "NOT_SERVING")
            elif path == "/metrics":
                body = generate_latest(self.server.metrics.registry)
                self._send(Answer(200, body, CONTENT_TYPE_LATEST))
            elif m := _CHECKPOINT_PATH.fullmatch(path):
                self._send(self.server.witness.checkpoint_for(m.group(1)))
            else:
                self._text(404, "not found")
        except Exception:
            log.exception("GET %s failed", path)
            self._text(500, "internal error", close=True)

    do_HEAD = do_GET
