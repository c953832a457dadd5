"""Storage engines behind one interface (base.Storage): SQLite embedded, more to follow."""
