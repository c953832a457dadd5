"""The command line's way to reach a dealer: TLS, mTLS and an API token.

``fairdeck audit --target`` and ``fairdeck stats --target`` take the same
flags and read them the same way. (``fairdeck health`` has its own set,
shaped like grpc_health_probe's.)
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import grpc

from fairdeck.client.calls import tls_credentials

TOKEN_ENV = "FAIRDECK_TOKEN"  # noqa: S105 - the variable's name


@dataclass(frozen=True)
class Credentials:
    channel: grpc.ChannelCredentials | None
    """TLS credentials, or None for plain text."""
    api_token: str | None
    insecure: bool
    """Allow sending the token in plain text off loopback."""


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """--tls, --ca, --cert, --cert-key, --token and --insecure."""
    group.add_argument("--tls", action="store_true", help="use TLS with the system's root CAs")
    group.add_argument(
        "--ca", metavar="PEM", help="CA bundle that signed the dealer's certificate (turns TLS on)"
    )
    group.add_argument("--cert", metavar="PEM", help="client certificate chain, for mTLS")
    group.add_argument("--cert-key", metavar="PEM", help="client private key, for mTLS")
    group.add_argument(
        "--token", metavar="TOKEN", help=f"API token (default ${TOKEN_ENV}; prefer it: arguments show in ps)"
    )
    group.add_argument(
        "--insecure", action="store_true", help="allow sending the token in plain text off loopback"
    )


def from_args(args: argparse.Namespace) -> Credentials:
    """What the flags of ``add_arguments`` (and $FAIRDECK_TOKEN) ask for. Raises
    ValueError for a key without its certificate, OSError for an unreadable PEM file."""
    token = args.token or os.environ.get(TOKEN_ENV) or None
    tls = args.tls or args.ca or args.cert or args.cert_key
    channel = tls_credentials(args.ca, args.cert, args.cert_key) if tls else None
    return Credentials(channel, token, bool(args.insecure))
