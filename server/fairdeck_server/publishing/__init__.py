"""fairdeck_server.publishing: the log as others see it, signed, tiled and cosigned.

- ``log_signing``: the log's key and the checkpoint publisher;
- ``tile_publishing``: ``serve --tiles``, live C2SP tlog-tiles in step with every checkpoint;
- ``log_lease``: which process leads the log (writes the tiles, asks the witnesses);
- ``cosigning``: asking witnesses to cosign each checkpoint.

Invariant: imports the shared top-level modules, ``storage`` and ``dealing`` (the vault's key
files, the dealer's clock); no grpc; what it reads of the configuration is named by a Protocol
of its own, never ``run.config``.
"""
