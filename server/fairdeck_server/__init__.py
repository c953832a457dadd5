"""fairdeck_server: the dealer service, in rooms, top down (each ``__init__`` says what it owns).

- ``cli/``: the commands; ``witness/``: ``fairdeck witness``;
- ``run/``: ``app`` wires a dealer from ``config``, after ``startup``'s checks; ``processes``;
- ``edge/``: all that knows gRPC (servicers, interceptors, statuses, transport, peers,
  connections): only it and ``run.app`` import grpc; ``codealer/``: ``fairdeck codealer``;
- ``publishing/``: the log's signing, live tiles, its lease and witness cosigning;
- ``dealing/``: the rules of a hand (``dealer``), ``vault``, ``reaper``, ``clock``, ``codeal_*``;
- ``policy/``: auth, limits, open work; ``observe/``: metrics, logs, storage health, the heap;
- ``storage/``: the engines behind ``base.Storage`` (``sqlite/``, ``postgres/``);
- shared by all, at the top of the package: ``refusals`` (every way the dealer says no),
  ``principal`` (who calls), ``addresses``, ``fair`` (fair turns) and ``log_causes``.

A room imports only the rooms listed below it and the shared modules (tests/test_house.py).
"""
