"""One gRPC call over a hand-written HTTP/2 connection, for headers no gRPC client sends.

grpcio's own client refuses a header value that is not printable ASCII
("Illegal header value"), but an attacker's client does not have to: HTTP/2
carries any octets. ``call`` sends one unary request with the headers given
as raw bytes and returns the response's headers and trailers. It speaks just
enough HTTP/2 for that: no Huffman coding on our side, and it tells the server
it accepts "true binary" metadata (grpc's setting 0xfe03), so the server's
``-bin`` values need no Huffman either; a Huffman-coded string it receives
anyway is refused with an error, never misread.
"""

from __future__ import annotations

import base64
import socket
import struct

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
GRPC_ALLOW_TRUE_BINARY_METADATA = 0xFE03
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# RFC 7541 appendix A: the static table (names and values).
_NAMES = [
    b"accept-charset",
    b"accept-encoding",
    b"accept-language",
    b"accept-ranges",
    b"accept",
    b"access-control-allow-origin",
    b"age",
    b"allow",
    b"authorization",
    b"cache-control",
    b"content-disposition",
    b"content-encoding",
    b"content-language",
    b"content-length",
    b"content-location",
    b"content-range",
    b"content-type",
    b"cookie",
    b"date",
    b"etag",
    b"expect",
    b"expires",
    b"from",
    b"host",
    b"if-match",
    b"if-modified-since",
    b"if-none-match",
    b"if-range",
    b"if-unmodified-since",
    b"last-modified",
    b"link",
    b"location",
    b"max-forwards",
    b"proxy-authenticate",
    b"proxy-authorization",
    b"range",
    b"referer",
    b"refresh",
    b"retry-after",
    b"server",
    b"set-cookie",
    b"strict-transport-security",
    b"transfer-encoding",
    b"user-agent",
    b"vary",
    b"via",
    b"www-authenticate",
]
_STATIC = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    *[(name, b"gzip, deflate" if name == b"accept-encoding" else b"") for name in _NAMES],
]
assert len(_STATIC) == 61


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def _literal(name: bytes, value: bytes) -> bytes:
    """A literal header field without indexing, new name, no Huffman."""
    return b"\x00" + _int(len(name), 7) + name + _int(len(value), 7) + value


class _Decoder:
    """HPACK decoding without Huffman (see the module docstring)."""

    def __init__(self) -> None:
        self.dynamic: list[tuple[bytes, bytes]] = []

    def _entry(self, index: int) -> tuple[bytes, bytes]:
        if index <= len(_STATIC):
            return _STATIC[index - 1]
        return self.dynamic[index - len(_STATIC) - 1]

    def decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        pos = 0

        def integer(prefix_bits: int) -> int:
            nonlocal pos
            limit = (1 << prefix_bits) - 1
            value = block[pos] & limit
            pos += 1
            if value < limit:
                return value
            shift = 0
            while True:
                byte = block[pos]
                pos += 1
                value += (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    return value

        def string() -> bytes:
            nonlocal pos
            if block[pos] & 0x80:
                raise ValueError("a Huffman-coded string: this minimal client does not decode them")
            length = integer(7)
            pos += length
            return block[pos - length : pos]

        while pos < len(block):
            byte = block[pos]
            if byte & 0x80:  # indexed field
                out.append(self._entry(integer(7)))
            elif byte & 0xC0 == 0x40:  # literal with incremental indexing
                index = integer(6)
                name = self._entry(index)[0] if index else string()
                field = (name, string())
                self.dynamic.insert(0, field)
                out.append(field)
            elif byte & 0xE0 == 0x20:  # dynamic table size update
                integer(5)
            else:  # literal without indexing / never indexed
                index = integer(4)
                name = self._entry(index)[0] if index else string()
                out.append((name, string()))
        return out


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def call(
    target: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]], timeout: float = 10.0
) -> dict[str, bytes]:
    """One unary call; returns every header and trailer of the response by name
    (``-bin`` values decoded), raising if the stream ends without a grpc-status."""
    host, port = target.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        settings = struct.pack(">HI", GRPC_ALLOW_TRUE_BINARY_METADATA, 1)
        request = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path.encode()),
            (b":authority", target.encode()),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            *headers,
        ]
        block = b"".join(_literal(name, value) for name, value in request)
        sock.sendall(
            PREFACE
            + _frame(SETTINGS, 0, 0, settings)
            + _frame(HEADERS, END_HEADERS, 1, block)
            + _frame(DATA, END_STREAM, 1, b"\x00" + struct.pack(">I", len(body)) + body)
        )
        decoder = _Decoder()
        got: dict[str, bytes] = {}
        pending = b""
        ended = False
        while True:
            head = _read_exact(sock, 9)
            length = int.from_bytes(head[:3], "big")
            kind, flags, stream = head[3], head[4], int.from_bytes(head[5:], "big") & 0x7FFFFFFF
            payload = _read_exact(sock, length)
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(_frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                sock.sendall(_frame(PING, ACK, 0, payload))
            elif kind in (GOAWAY, RST_STREAM) and stream in (0, 1):
                raise ConnectionError(f"the server ended the stream (frame type {kind})")
            elif kind in (HEADERS, CONTINUATION) and stream == 1:
                if kind == HEADERS:
                    if flags & PADDED:
                        payload = payload[1 : len(payload) - payload[0]]
                    if flags & PRIORITY:
                        payload = payload[5:]
                    ended = bool(flags & END_STREAM)
                pending += payload
                if flags & END_HEADERS:
                    for name, value in decoder.decode(pending):
                        key = name.decode()
                        if key.endswith("-bin"):
                            value = value[1:] if value[:1] == b"\x00" else base64.b64decode(value + b"==")
                        got[key] = value
                    pending = b""
                    if ended:
                        if "grpc-status" not in got:
                            raise ConnectionError("the stream ended without a grpc-status")
                        return got
