"""fairdeck_server: the dealer service. Where each part lives:

- ``edge/``: everything that knows gRPC: the servicers, the interceptors, the one translation of
  errors into statuses, reflection and the transport (nothing else imports grpc but ``app``);
- ``dealer.py``: the rules of a hand (open, shuffle, draw, close, void) on top of a Storage;
- ``storage/``: the engines behind one interface (``base.Storage``): ``sqlite/``, the embedded
  default, and ``postgres/``, for replicas; each is ``schema``, ``writer``, ``engine``, ``reader``;
- ``log_signing.py`` signs checkpoints; ``tile_publishing.py`` writes their tiles first
  (``serve --tiles``); ``log_lease.py`` says which process leads the log; ``cosigning.py`` asks
  witnesses to cosign them; ``witness/`` is ``fairdeck witness``, a C2SP witness for any log;
- the policies the edge calls, without grpc: ``auth``, ``limits``, ``metrics``, ``principal``;
  ``vault`` (seeds at rest), ``startup`` (keys and data are identities), ``refusals`` (every way
  the dealer says no), ``storage_health``, ``clock`` and ``reaper`` (log time, stale hands);
- ``app.py`` wires a dealer from ``config.py``; ``processes.py`` runs N; ``cli/`` has the commands.
"""
