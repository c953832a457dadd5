"""Raw TCP connections to a server on 127.0.0.1, to see when it closes them: ``closed_after`` sends
some bytes and then nothing, and reads until the server closes (its SETTINGS and pings read, never
answered); ``in_threads`` runs several such cases at once, so their bounds overlap."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable


def closed_after(port: int, sends: list[bytes], limit: float) -> float | None:
    """Seconds until the dealer closed a connection that sent ``sends`` and then nothing (the
    dealer's SETTINGS and pings are read, never answered); None if still open after ``limit``."""
    with socket.create_connection(("127.0.0.1", port), timeout=limit) as sock:
        start = time.monotonic()
        for data in sends:
            sock.sendall(data)
        try:
            while sock.recv(65536):
                if time.monotonic() - start > limit:
                    return None
        except TimeoutError:
            return None
        except OSError:  # reset
            pass
        return time.monotonic() - start


def in_threads(cases: dict[str, Callable[[], float | None]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    threads = [threading.Thread(target=lambda k=k, f=f: out.__setitem__(k, f())) for k, f in cases.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out
