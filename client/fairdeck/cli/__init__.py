"""fairdeck.cli: the client-side commands of the ``fairdeck`` console script.

It owns ``replay`` and ``verify`` (``commands``), ``deal`` (``deal_command``), ``audit``
(``audit_command``), ``health`` (``health_command``), ``stats`` (``stats_command`` parses, ``stats_run``
runs the ``fairdeck.stats`` library), ``lab`` (``lab_command``, over the ``fairdeck.lab`` library), and their
shared TLS and token flags (``cli_credentials``). ``dispatch`` holds the table of every command and
imports a command's module only when that command runs. It may import the core, the log, the SDK,
``fairdeck.stats`` and ``fairdeck.lab``, never ``fairdeck_server``: the server's commands
(serve, key, token, rotate-key, and the database readers of ``audit --data/--db``) are found through the
``fairdeck.commands`` entry point group, and only when asked for.
"""

from fairdeck.cli.dispatch import build_parser, main

__all__ = ["build_parser", "main"]
