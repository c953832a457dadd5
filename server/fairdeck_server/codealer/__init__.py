"""fairdeck_server.codealer: ``fairdeck codealer``, an independent key holder of co-dealt hands.

``ledger`` is its durable record (SQLite, fsynced before it answers), ``holder`` its rules (a share
only for the next position of the deal order, only once, only to one seat, only for a deck that
descends from its own signed shuffle), its gRPC service is
``fairdeck_server.edge.codealer_servicer`` (only the edge imports grpc) and its command line
``fairdeck_server.cli.codealer_command``.
"""
