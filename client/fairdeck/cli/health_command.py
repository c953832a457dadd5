"""``fairdeck health``: ask a server's standard gRPC health service (``grpc.health.v1.Health/Check``)
whether it serves.

The container image ships no grpc_health_probe binary, yet Docker's HEALTHCHECK, compose's
``service_healthy`` and an operator after a deploy all need a probe that speaks gRPC, plain text
or TLS/mTLS, and answers with an exit status. Exit 0 when the server (or ``--service``) is
SERVING; 1 when it answers anything else, the service is unknown, or it cannot be reached in
time; 2 for bad usage (such as ``--cert`` without ``--key`` or an unreadable file).
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.client.local_files import read_local

DEFAULT_TARGET = "127.0.0.1:50051"
MAX_TIMEOUT = 3600.0


class UsageError(Exception):
    """Options that cannot make a channel; exit status 2."""


def _read(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return read_local(path)
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror or e}") from None


def credentials(args: argparse.Namespace) -> grpc.ChannelCredentials | None:
    """TLS credentials from --tls/--ca/--cert/--key, or None for plain text."""
    if (args.cert is None) != (args.key is None):
        raise UsageError("--cert and --key go together (a client certificate for mTLS)")
    if not (args.tls or args.ca or args.cert):
        if args.server_name:
            raise UsageError("--server-name needs TLS (--tls or --ca)")
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_read(args.ca, "--ca"),
        private_key=_read(args.key, "--key"),
        certificate_chain=_read(args.cert, "--cert"),
    )


def check(
    target: str,
    service: str = "",
    creds: grpc.ChannelCredentials | None = None,
    timeout: float = 5.0,
    server_name: str | None = None,
) -> str:
    """The serving status's name (SERVING, NOT_SERVING, ...); raises grpc.RpcError."""
    options: list[tuple[str, str]] = []
    if creds is not None and server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    channel = (
        grpc.secure_channel(target, creds, options)
        if creds is not None
        else grpc.insecure_channel(target, options)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return name


def cmd_health(args: argparse.Namespace) -> int:
    if not 0 < args.timeout <= MAX_TIMEOUT:  # also refuses nan; inf would overflow gRPC's deadline
        print(
            f"fairdeck health: --timeout must be over 0 and at most {MAX_TIMEOUT:g} seconds", file=sys.stderr
        )
        return 2
    try:
        creds = credentials(args)
    except UsageError as e:
        print(f"fairdeck health: {e}", file=sys.stderr)
        return 2
    what = f"{args.target} service {args.service!r}" if args.service else args.target
    try:
        status = check(args.target, args.service, creds, args.timeout, args.server_name)
    except grpc.RpcError as e:
        code: grpc.StatusCode = e.code()
        if code == grpc.StatusCode.NOT_FOUND:
            print(f"SERVICE_UNKNOWN: {what} has no such service")
        else:
            print(f"fairdeck health: {what}: {code.name}: {e.details()}", file=sys.stderr)
        return 1
    print(status if status == "SERVING" else f"{status}: {what}")
    return 0 if status == "SERVING" else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    health = sub.add_parser(
        "health",
        help="check a server's gRPC health (exit 0 when SERVING)",
        description="Call grpc.health.v1.Health/Check. Exit 0 when SERVING, 1 otherwise, 2 on bad usage.",
    )
    health.add_argument(
        "--target", default=DEFAULT_TARGET, metavar="HOST:PORT", help="the server (default %(default)s)"
    )
    health.add_argument(
        "--service",
        default="",
        metavar="NAME",
        help="a service's full name, e.g. fairdeck.v1.DealerService (default: the whole server)",
    )
    health.add_argument("--tls", action="store_true", help="use TLS with the system's trusted CAs")
    health.add_argument("--ca", metavar="PEM", help="CA bundle to verify the server with (implies TLS)")
    health.add_argument("--cert", metavar="PEM", help="client certificate chain, for mTLS (with --key)")
    health.add_argument(
        "--key", "--cert-key", dest="key", metavar="PEM", help="client private key, for mTLS (with --cert)"
    )
    health.add_argument(
        "--server-name", metavar="NAME", help="the name the server's certificate is for, if not the host"
    )
    health.add_argument(
        "--timeout", type=float, default=5.0, metavar="SECONDS", help="deadline (default %(default)s)"
    )
    health.set_defaults(handler=cmd_health)
