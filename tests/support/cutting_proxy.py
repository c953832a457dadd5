"""A TCP proxy that cuts a dealer's answer on its way back, for the tests of what a client
retries when it never saw an answer the dealer committed."""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttingProxy:
    """A TCP proxy on 127.0.0.1 that, when armed, cuts the connection as the dealer's answer
    passes through (the first frame of an answer after arming), so the client never reads it while
    the dealer has already committed."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.target = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.armed = threading.Event()
        self.cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        """Copies ``src`` to ``dst``; the dealer's side (``answers``) frame by frame (HTTP/2, RFC
        9113 section 4.1: a 9-byte header whose first 3 bytes are the payload's length, then its
        type and flags, then the stream id), so that once armed the cut falls on the first frame of
        an answer (HEADERS or DATA on a stream), never on the connection's own frames (a PING's
        ack, a WINDOW_UPDATE, SETTINGS): cut on those, the client lost the call before the dealer
        had committed it."""
        pending = b""
        try:
            while data := src.recv(65536):
                if not answers:
                    dst.sendall(data)
                    continue
                pending += data
                while len(pending) >= 9:
                    length = int.from_bytes(pending[:3], "big")
                    kind, stream = pending[3], int.from_bytes(pending[5:9], "big") & 0x7FFFFFFF
                    if self.armed.is_set() and kind in (0x0, 0x1) and stream != 0:
                        self.armed.clear()
                        self.cut.set()
                        for s in (src, dst):
                            # shutdown, not just close: the other pump may be blocked in recv on
                            # it, and a close alone then sends no FIN until that recv returns,
                            # so the client waited out its deadline on a loaded machine.
                            with contextlib.suppress(OSError):
                                s.shutdown(socket.SHUT_RDWR)
                            s.close()
                        return
                    if len(pending) < 9 + length:
                        break
                    dst.sendall(pending[: 9 + length])
                    pending = pending[9 + length :]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def close(self) -> None:
        self.listener.close()
