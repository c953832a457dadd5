"""fairdeck_server.cli: the server's commands of the ``fairdeck`` console script (serve, key, token,
rotate-key)."""
