"""fairdeck_server.dealing: the rules of a hand, ordinary and co-dealt, on top of a Storage.

- ``dealer``: open, shuffle, deal, close and void a hand; ``bulk``: DealHands, many at once;
- ``vault``: seeds at rest; ``stored_decks``: a stored hand's seed opened, its cards derived;
- ``reaper`` and ``voids``: every hand closed before its lifetime passes; ``clock``: the
  dealer's clock, the time it writes into the log;
- ``codeal_*``: co-dealt hands on the dealer's side (the dealing, its record in codeal.db with
  that record's identity and, on PostgreSQL, its claim, its log entries, the co-dealer's seals,
  its health and the voiding of stale co-dealt hands).

Invariant: imports only the shared top-level modules and ``storage``; no grpc (a co-dealer is
reached through a link the edge gives it), nothing of observe, policy, publishing or run.
"""
