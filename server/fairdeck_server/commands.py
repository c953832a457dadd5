"""Server-side commands of the ``fairdeck`` console script: ``serve``."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any

from fairdeck_server.app import ServerConfig, serve
from fairdeck_server.transparency import load_or_create_signer


def cmd_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServerConfig(
        listen=args.listen,
        data_dir=Path(args.data),
        seed_key_file=args.seed_key_file,
        log_key_file=args.log_key_file,
        log_origin=args.log_origin,
        max_hand_lifetime=args.max_hand_lifetime,
    )
    asyncio.run(serve(config))
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
    serve_parser.add_argument(
        "--log-key-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="log signing key (default DIR/log.key)",
    )
    serve_parser.add_argument("--log-origin", default=None, help="origin line of a new log key")
    serve_parser.add_argument(
        "--max-hand-lifetime",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="hands open longer are voided: revealed and logged (default %(default)s)",
    )
    serve_parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve_parser.set_defaults(handler=cmd_serve)
