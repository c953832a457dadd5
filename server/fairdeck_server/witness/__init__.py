"""fairdeck_server.witness: a C2SP transparency-log witness (``fairdeck witness``).

A witness cosigns a log's checkpoint only when it is consistent with the last checkpoint of that
log it cosigned, so a log that shows two different trees to two audiences cannot get both
cosigned. It implements ``add-checkpoint`` of https://c2sp.org/tlog-witness with
``cosignature/v1`` signatures (https://c2sp.org/tlog-cosignature), for any C2SP log, not only
fairdeck's: it is configured with the origin and verifier key of each log it witnesses.

``protocol`` is the pure request handling, ``state`` the durable record of what was cosigned (an
embedded SQLite file), ``http`` the HTTP edge with health and metrics, ``command`` the command line.
It imports ``fairdeck.log`` for notes, checkpoints and proofs, and nothing of the dealer.
"""
