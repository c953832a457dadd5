"""The suite's shared fixtures live in tests/support/fixtures.py (the dealer family, PostgreSQL,
the storage engines); this registers them for every test package. A folder's conftest holds only
what is local to that folder."""

pytest_plugins = ["tests.support.fixtures"]
