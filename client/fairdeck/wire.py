"""What the SDK and the dealer agree on beyond the .proto files: the metadata key of
the API token, and which addresses count as loopback (where plain text is allowed).

Both ``fairdeck.client`` and ``fairdeck_server`` import it, so it lives at the top of
the package and imports only the standard library: the server reaches it without
loading the SDK, and the SDK without the server.
"""

from __future__ import annotations

import ipaddress

__all__ = ["AUTHORIZATION", "is_loopback"]


AUTHORIZATION = "authorization"
"""The metadata key of the API token: ``authorization: Bearer fdk_<id>_<secret>``."""


def is_loopback(address: str) -> bool:
    """Whether ``address`` (host:port, [v6]:port, or a gRPC target) stays on this machine.

    127.0.0.0/8, ::1, ``localhost`` and unix sockets are; the wildcards
    ``0.0.0.0`` and ``[::]`` listen on every interface, so they are not.

    >>> [is_loopback(a) for a in ("127.0.0.2:1", "[::1]:1", "localhost:1", "0.0.0.0:1", "[::]:1")]
    [True, True, True, False, False]
    """
    for scheme in ("unix:", "unix-abstract:"):
        if address.startswith(scheme):
            return True
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if address.startswith(scheme):
            address = address[len(scheme) :]
            break
    host = address
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
