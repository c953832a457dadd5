"""fairdeck_server.witness: a C2SP transparency-log witness (``fairdeck witness``).

It cosigns a log's checkpoint only when it is consistent with the last one of that log it
cosigned, so a log showing two trees to two audiences cannot get both cosigned: ``add-checkpoint``
of https://c2sp.org/tlog-witness with ``cosignature/v1`` signatures, for any C2SP log it is
configured with. ``protocol`` is the pure request handling, ``state`` the durable record of what
was cosigned (SQLite), ``http`` the HTTP edge with health and metrics, ``command`` the command
line. It imports ``fairdeck.log`` for notes, checkpoints and proofs, and nothing of the dealer.
"""
