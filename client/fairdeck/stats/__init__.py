"""``fairdeck stats``: deal many decks, test them, and draw what the tests saw.

It owns exact distributions of a uniform shuffle (``exact``), the tests (``checks``), streaming
counts (``tally``), the known-broken controls (``controls``; vectorised in ``batch`` and ``mt``),
where decks come from (``sampling``, and ``remote`` for a live dealer), the verdict
(``analysis``) and the HTML report (``report``); docs/stats/README.md explains each.

The command line is ``fairdeck.cli.stats_command`` and ``stats_run``. Only ``exact`` imports
without numpy, scipy and matplotlib (the ``stats`` extra). It may import the core and
(``remote``, for ``--target``) the SDK, never the command line or the server.
"""

__all__: list[str] = []  # the parts are the modules above; nothing is re-exported here
