"""``fairdeck stats``: deal many decks, test them, and draw what the tests saw.

The package is split by what each part owns:

* ``exact``: distributions of a uniform shuffle (Eulerian numbers, successions), in integers;
* ``checks``: the statistical tests and the Holm-Bonferroni correction;
* ``tally``: streaming counts of dealt decks, and the duplicate test's 64-bit hashes;
* ``controls``: the known-broken shuffles kept as controls, one deck at a time, in pure Python;
* ``batch`` and ``mt``: the broken controls of ``fairdeck.stats.controls``, vectorised
  and tested to be the same algorithms, plus one under-shuffled extra;
* ``sampling``: where decks come from (the derivation, the controls) and the worker processes;
* ``remote``: decks from a live dealer, each verified against its commitment;
* ``analysis``: every test on every source, and the verdict rules;
* ``report``: the HTML report and its PNG charts.

The command line is ``fairdeck.cli.stats_command`` and ``stats_run``. Only ``exact`` imports
without numpy, scipy and matplotlib (the ``stats`` extra). It may import the core and (``remote``,
for ``--target``) the SDK, never the command line or the server.
"""

__all__: list[str] = []  # the parts are the modules above; nothing is re-exported here
