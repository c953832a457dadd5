"""A connection of its own for a client of the tests. gRPC shares one connection between the
channels of a process to the same target (its global subchannel pool, docs/scaling.md), and
with it the dealer's max_streams_per_connection (50): calls past it wait in the client, unseen
by the dealer. A test whose clients stand for different tenants, parties or game servers, or
that needs more than 50 calls at the dealer at once, gives each its own connection:
``options=OWN_CONNECTION`` (the SDK clients' keyword, or a grpc channel's)."""

from __future__ import annotations

from fairdeck_server.run.config import ServerConfig

OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)
"""Channel options for a connection of its own (a local subchannel pool: shared with no channel)."""
STREAMS_PER_CONNECTION = ServerConfig.max_streams_per_connection
"""The dealer's default cap on calls open at once on one connection (50)."""


def connections_for(calls: int) -> int:
    """Connections of their own that carry ``calls`` at once with none waiting in its client."""
    return -(-calls // STREAMS_PER_CONNECTION)
