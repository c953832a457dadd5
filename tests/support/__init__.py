"""The suite's one support layer: every helper a test uses lives here, one module per job, and
no test module imports another. ``fixtures`` holds the shared fixtures (the dealer family:
``dealer_factory``, ``module_dealer_factory``, ``dealer``, ``unlimited_dealer`` and the
``fairdeck serve`` process factories; PostgreSQL; the storage engines), registered by
tests/conftest.py. The rest: ``dealers`` (the dealer in process or as a child process), ``env``
(a clean environment for subprocesses), ``waits`` (polls with a deadline), ``pgcluster``,
``ttys``, and the kits of each subject (``faults``, ``logs``, ``ops``, ``engines``, ``witnesses``,
the references and vectors the tests read)."""
