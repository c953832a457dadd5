"""Listen addresses: parsing ``host:port``, the rule that plain text is for loopback only,
the probe that refuses a port in use before anything is made, and a URL fit for a log line
(``redact_url``: no password). No grpc here.

A dealer listening on anything but loopback (``0.0.0.0`` and ``[::]`` included) without TLS
would send seeds, cards and API tokens across the network in the clear, so ``check_listen``
refuses it unless the operator says ``insecure`` (a trusted proxy terminates TLS).
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit, urlunsplit

from fairdeck.wire import is_loopback
from fairdeck_server.refusals import StartupRefused

__all__ = ["ListenRefused", "check_listen", "is_loopback", "probe_listen", "redact_url", "split_host_port"]


class ListenRefused(StartupRefused):
    """The dealer will not listen this way (plain text off loopback)."""


def check_listen(listen: str, *, tls: bool, insecure: bool) -> None:
    """Refuse plain text on a non-loopback address unless ``insecure``."""
    if tls or insecure or is_loopback(listen):
        return
    raise ListenRefused(
        f"refusing to listen on {listen} without TLS: give --tls-cert and --tls-key "
        "(and --tls-client-ca for mTLS), listen on 127.0.0.1, or pass --insecure "
        "if a trusted proxy terminates TLS"
    )


def split_host_port(listen: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port); ValueError if malformed.

    >>> split_host_port("[::1]:9090")
    ('::1', 9090)
    """
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{listen!r} is not host:port")
    return host.removeprefix("[").removesuffix("]"), int(port)


def probe_listen(option: str, listen: str) -> None:
    """Refuse ``listen`` if none of its addresses can be bound now (port 0 always can)."""
    try:
        host, port = split_host_port(listen)
    except ValueError:
        return  # config.py refuses a malformed address before this
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as e:
        raise StartupRefused(f"{option} {listen}: cannot resolve {host!r} ({e.strerror or e})") from None
    error: OSError | None = None
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc binds
            try:
                probe.bind(address)
            except OSError as e:
                error = e
                continue
            return
    reason = f" ({error.strerror})" if error is not None and error.strerror else ""
    raise StartupRefused(
        f"{option} {listen}: cannot listen there{reason}; stop what holds it, or pick another {option}"
    )


def redact_url(url: str) -> str:
    """A URL without its password, for log lines.

    >>> redact_url("postgresql://dealer:s3cret@db:5432/fairdeck")
    'postgresql://dealer:***@db:5432/fairdeck'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + netloc))
