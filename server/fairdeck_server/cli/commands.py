"""Server-side commands of the ``fairdeck`` console script: ``serve`` and ``key``.

``serve`` takes every ServerConfig field as a flag, an environment variable
or a config file key (config.py); ``fairdeck serve --help`` lists them all.
A configuration it refuses exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

from fairdeck_server import config, errors, logs
from fairdeck_server.app import serve
from fairdeck_server.tls import ListenRefused, TlsConfigError
from fairdeck_server.transparency import LogKeyError, load_or_create_signer
from fairdeck_server.vault import VaultError

STARTUP_ERRORS = (
    ListenRefused,
    TlsConfigError,
    VaultError,
    LogKeyError,
    OSError,
    ValueError,
    errors.DealerError,
)
"""What a refused configuration or an unreachable resource raises while the
dealer starts: reported as one line and exit status 2, never a traceback."""

log = logging.getLogger(__name__)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        settings = config.load(config.flags_given(args), os.environ, args.config)
    except config.ConfigError as e:
        print(f"fairdeck serve: {e}", file=sys.stderr)
        return 2
    logs.configure(settings.log_format, settings.log_level)
    log.info("configuration: %s", settings.describe())
    try:
        asyncio.run(serve(settings.server))
    except STARTUP_ERRORS as e:
        log.debug("startup failed", exc_info=e)
        print(f"fairdeck serve: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    """Print the log's verifier key (creating the key like serve would)."""
    signer = load_or_create_signer(Path(args.log_key_file or Path(args.data) / "log.key"), args.log_origin)
    print(signer.verifier.to_string())
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    key = sub.add_parser("key", help="print the transparency log's verifier key (signed-note form)")
    key.add_argument("--data", default="fairdeck-data", metavar="DIR", help="data dir (default %(default)s)")
    key.add_argument("--log-key-file", default=None, metavar="PATH", help="default DIR/log.key")
    key.add_argument("--log-origin", default=None, help="origin for a new key")
    key.set_defaults(handler=cmd_key)

    serve_parser = sub.add_parser(
        "serve",
        help="run the dealer (gRPC)",
        description="Run the dealer: gRPC on --listen, optionally Prometheus /metrics on --metrics-listen.",
        epilog=config.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    config.add_arguments(serve_parser)
    serve_parser.set_defaults(handler=cmd_serve)
