"""Server-side commands of the ``fairdeck`` console script: ``serve``."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any

from fairdeck_server.app import ServerConfig, serve


def cmd_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServerConfig(listen=args.listen, data_dir=Path(args.data), seed_key_file=args.seed_key_file)
    asyncio.run(serve(config))
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    serve_parser = sub.add_parser("serve", help="run the dealer (gRPC)")
    serve_parser.add_argument(
        "--listen", default="127.0.0.1:50051", metavar="HOST:PORT", help="default %(default)s"
    )
    serve_parser.add_argument(
        "--data", default="fairdeck-data", metavar="DIR", help="data dir (default %(default)s)"
    )
    serve_parser.add_argument(
        "--seed-key-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="AES-256 key for seeds at rest (default DIR/seed.key, made 0600); $FAIRDECK_SEED_KEY overrides",
    )
    serve_parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve_parser.set_defaults(handler=cmd_serve)
