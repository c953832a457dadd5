"""``fairdeck audit``: audit a dealer's transparency log from a live server
(``--target``), a data dir read-only (``--data``) or, for replicas on
PostgreSQL, the database read-only (``--db``), with the log's public key.

``--key`` may be given several times (or name a file with one key per line):
after a rotation of the log's signing key, pass the current and the retired
keys, and checkpoints signed by either verify. With ``--target``, ``--ca``
(and ``--cert``/``--cert-key`` for mTLS) turn on TLS, and ``--token`` (or
``$FAIRDECK_TOKEN``) sends an API token.

Exit 0 only when every check of fairdeck.log.audit holds; otherwise 1 and a
report naming each bad entry and why (``--json`` for machines). With
``--since FILE`` the audit also proves the log only grew since the checkpoint
saved in FILE, and saves the new checkpoint there when it passes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import entry_points
from pathlib import Path

import grpc

from fairdeck.cli import cli_credentials
from fairdeck.client.calls import ClientConfig
from fairdeck.log.audit import Auditor, AuditReport, Finding
from fairdeck.log.note import NoteError, Verifier
from fairdeck.v1 import audit_pb2, audit_pb2_grpc

PAGE = 1000


def remote_log(
    target: str, timeout: float, config: ClientConfig | None = None
) -> tuple[int, list[bytes], Iterator[bytes]]:
    """(entry count at the latest checkpoint, [its note], the entries) from an AuditService.

    ``config`` carries TLS credentials and the API token (default: plain text, no token).
    """
    base = config or ClientConfig(target)
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    if base.credentials is not None:
        channel = grpc.secure_channel(base.target, base.credentials, options)
    else:
        channel = grpc.insecure_channel(base.target, options)
    metadata = base.call_metadata()
    stub = audit_pb2_grpc.AuditServiceStub(channel)
    try:
        head = stub.GetCheckpoint(audit_pb2.GetCheckpointRequest(), timeout=timeout, metadata=metadata)
    except BaseException:
        channel.close()
        raise

    def entries() -> Iterator[bytes]:
        token, start = "", 0
        try:
            while True:
                page = stub.ListEntries(
                    audit_pb2.ListEntriesRequest(start_index=start, page_size=PAGE, page_token=token),
                    timeout=timeout,
                    metadata=metadata,
                )
                for e in page.entries:
                    if e.index != start:
                        raise ValueError(f"server sent entry {e.index} where {start} was due")
                    start += 1
                    yield e.data
                if not page.next_page_token:
                    return
                token = page.next_page_token
        finally:
            channel.close()

    return head.tree_size, [head.signed_checkpoint], entries()


def run_audit(
    source: tuple[int, list[bytes], Iterator[bytes]],
    verifier: Verifier | Sequence[Verifier],
    *,
    since: bytes | None,
    max_hand_lifetime_ms: int,
    now_ms: int,
    progress: bool = False,
) -> AuditReport:
    count, notes, entries = source
    auditor = Auditor(
        verifier, now_ms=now_ms, max_hand_lifetime_ms=max_hand_lifetime_ms, since=since, checkpoints=notes
    )
    step = max(1, count // 200)
    try:
        for i, entry in enumerate(entries):
            auditor.add(entry)
            if progress and i % step == 0:
                done = (i + 1) / max(count, 1)
                bar = "#" * int(30 * min(done, 1.0))
                print(f"\raudit [{bar:<30}] {i + 1:,}/{count:,} entries", end="", file=sys.stderr, flush=True)
    except (ValueError, grpc.RpcError) as e:
        detail = e.details() if isinstance(e, grpc.RpcError) else str(e)
        auditor.report.findings.append(Finding(f"could not read the whole log: {detail}"))
    if progress:
        print(file=sys.stderr)
    return auditor.finish()


def _server_source(kind: str, value: str) -> tuple[int, list[bytes], Iterator[bytes]]:
    """--data or --db: a reader of the dealer's own storage, from the server package.

    It is found by entry point (fairdeck_server.cli.audit_sources), so that the
    client never imports the server, and ``audit --target`` never loads it.
    """
    found = [ep for ep in entry_points(group="fairdeck.audit_sources") if ep.name == kind]
    if not found:
        raise OSError(
            f"--{kind} reads the dealer's storage and needs its package (fairdeck_server) installed"
        )
    reader: Callable[[str], tuple[int, list[bytes], Iterator[bytes]]] = found[0].load()
    return reader(value)


def _verifiers(values: Sequence[str]) -> list[Verifier]:
    """Each --key: a verifier key, or @FILE with one key per line (blank lines and # comments skipped)."""
    keys = []
    for text in values:
        lines = Path(text[1:]).read_text().splitlines() if text.startswith("@") else [text]
        keys += [Verifier.parse(k) for k in map(str.strip, lines) if k and not k.startswith("#")]
    if not keys:
        raise NoteError("no verifier key given")
    return keys


def _client_config(args: argparse.Namespace) -> ClientConfig:
    c = cli_credentials.from_args(args)
    return ClientConfig(args.target, c.channel, c.api_token, insecure=c.insecure)


def cmd_audit(args: argparse.Namespace) -> int:
    try:
        verifier = _verifiers(args.key)
    except (OSError, NoteError) as e:
        print(f"fairdeck audit: bad --key: {e}", file=sys.stderr)
        return 2
    since_path = Path(args.since) if args.since else None
    since = since_path.read_bytes() if since_path is not None and since_path.exists() else None
    try:
        if args.data:
            source = _server_source("data", args.data)
        elif args.db:
            source = _server_source("db", args.db)
        else:
            source = remote_log(args.target, args.timeout, _client_config(args))
    except ValueError as e:  # bad TLS flags, or a token refused for plain text
        print(f"fairdeck audit: {e}", file=sys.stderr)
        return 2
    except (OSError, grpc.RpcError) as e:
        detail = e.details() if isinstance(e, grpc.RpcError) else str(e)
        print(f"fairdeck audit: cannot read the log: {detail}", file=sys.stderr)
        return 2
    started = time.monotonic()
    report = run_audit(
        source,
        verifier,
        since=since,
        max_hand_lifetime_ms=int(args.max_hand_lifetime * 1000),
        now_ms=time.time_ns() // 1_000_000,
        progress=sys.stderr.isatty() and not args.json,
    )
    elapsed = time.monotonic() - started
    if report.ok and since_path is not None:
        since_path.write_bytes(report.checkpoint_note)
    if args.json:
        print(json.dumps({**report.to_dict(), "seconds": round(elapsed, 3)}, indent=2))
    else:
        _print_report(report, elapsed, since_path)
    return 0 if report.ok else 1


def _print_report(report: AuditReport, elapsed: float, since_path: Path | None) -> None:
    verdict = "OK" if report.ok else "FAILED"
    print(f"audit {verdict}: {report.entries:,} entries, {report.hands:,} hands in {elapsed:.1f}s")
    print(f"  signed tree size {report.tree_size:,}, root {report.root.hex() or '-'}")
    print(
        f"  closed and verified {report.closed:,}, voided {report.voided:,}, "
        f"still open within their lifetime {report.open_in_time:,}"
    )
    if report.ok and since_path is not None:
        print(f"  consistent with the saved checkpoint; new checkpoint saved to {since_path}")
    for finding in report.findings[:1000]:
        print(f"  BAD {finding}")
    if len(report.findings) > 1000:
        print(f"  ... and {len(report.findings) - 1000:,} more findings")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = sub.add_parser("audit", help="audit a dealer's transparency log")
    where = audit.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", metavar="HOST:PORT", help="a live dealer's AuditService")
    where.add_argument("--data", metavar="DIR", help="a dealer's data dir, read-only")
    where.add_argument(
        "--db",
        metavar="URL",
        help="the replicas' postgresql:// database, read-only; a read-only role will do, and its "
        "password belongs in PGPASSWORD or ~/.pgpass (arguments show in ps)",
    )
    audit.add_argument(
        "--key",
        required=True,
        action="append",
        metavar="VKEY|@FILE",
        help="the log's verifier key (from `fairdeck key`); repeat, or one per line in FILE, "
        "to accept keys retired by a rotation",
    )
    audit.add_argument(
        "--since", metavar="FILE", help="checkpoint saved by an earlier audit; updated on success"
    )
    audit.add_argument(
        "--max-hand-lifetime",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="the operator's maximum hand lifetime (default %(default)s)",
    )
    audit.add_argument("--timeout", type=float, default=30.0, help="per-call deadline with --target")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    cli_credentials.add_arguments(audit.add_argument_group("TLS and credentials (with --target)"))
    audit.set_defaults(handler=cmd_audit)
