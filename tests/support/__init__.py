"""What every test package shares, in one place: a clean environment for subprocesses
(``env.clean_env``), one way to run the real dealer as a process (``dealers.DealerProcess``),
one in-process dealer (``dealers.RunningDealer``, the ``running_dealer`` fixture of
tests/conftest.py), a throwaway PostgreSQL cluster (``pgcluster``) and the console script on a
pseudo-terminal (``ttys``)."""
