"""fairdeck_server.run: making and running a dealer process.

- ``config`` (with ``option_ranges``): every option, from flags, environment, file, defaults;
- ``startup``: the checks before serving (keys and data are identities, one dealer per dir);
- ``app``: wires storage, the dealer, the policies and the edge into one ``DealerServer``;
- ``processes``: ``serve --processes N``, its supervisor and workers.

Invariant: the top of the dealer; it may import every room below it (observe, policy,
dealing, publishing, codealer, edge, storage) and nothing imports it but ``cli`` and
``witness`` (the data dir's lock). ``app`` is the one module here that imports grpc.
"""
