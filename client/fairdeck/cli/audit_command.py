"""``fairdeck audit``: audit a dealer's transparency log with the log's public key, from a live
server (``--target``), a data dir read-only (``--data``), for replicas on PostgreSQL the
database read-only (``--db``), or static tiles (``--tiles``).

``--key`` may be given several times, or name a file with one key per line, so that checkpoints
signed by the current or a retired key verify; docs/security.md has that and the TLS flags.
Exit 0 only when every check of ``fairdeck.log.audit`` holds; 1 and a report naming each bad
entry and why otherwise (``--json`` for machines); 2 when the log cannot be read at all. With
``--since FILE`` it also proves the log only grew; a first audit (no FILE yet) says in so many
words that consistency was NOT checked, and never claims it was (docs/log-format.md, "The audit").
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from importlib.metadata import entry_points
from pathlib import Path

import grpc

from fairdeck.cli import cli_credentials, numbers
from fairdeck.cli import progress as progress_bar
from fairdeck.cli.log_keys import add_witness_arguments, verifiers, witness_policy
from fairdeck.cli.tile_source import Item, Source, tiles_log
from fairdeck.client.audit_client import codeal_checks
from fairdeck.client.calls import ClientConfig
from fairdeck.client.channel import EntryPager
from fairdeck.client.exceptions import from_rpc_error
from fairdeck.client.local_files import read_local
from fairdeck.core.errors import VerificationError
from fairdeck.log import safefiles
from fairdeck.log.audit import Auditor, AuditReport, Finding, LogUnreadable, SavedCheckpointUnreadable
from fairdeck.log.audit_pool import PARALLEL_FROM, RevealChecks, default_workers
from fairdeck.log.cosignature import CosignatureError, WitnessPolicy
from fairdeck.log.note import NoteError, Verifier
from fairdeck.v1 import audit_pb2, audit_pb2_grpc
from fairdeck.wire import Reason

PAGE = 1000


def remote_log(
    target: str, timeout: float, config: ClientConfig | None = None
) -> tuple[int, list[bytes], Iterator[bytes]]:
    """(entry count at the latest checkpoint, [its note and the key rotation statements], the
    entries) from an AuditService.

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
        try:
            head = stub.GetCheckpoint(audit_pb2.GetCheckpointRequest(), timeout=timeout, metadata=metadata)
            notes = [head.signed_checkpoint]
        except grpc.RpcError as e:
            # A fresh dealer has nothing to sign yet. The entries are still listed: if there are
            # any, the auditor reports that no checkpoint covers them.
            if from_rpc_error(e).reason != Reason.NO_CHECKPOINT:
                raise
            head, notes = audit_pb2.GetCheckpointResponse(), []
        notes += _rotations(stub, timeout, metadata)
    except BaseException:
        channel.close()
        raise

    def entries() -> Iterator[bytes]:
        pager = EntryPager(0, PAGE)
        try:
            while not pager.done:
                page = stub.ListEntries(pager.request(), timeout=timeout, metadata=metadata)
                for _, data in pager.take(page):
                    yield data
        except VerificationError as e:  # out of order: the log could not be read whole
            raise ValueError(e.detail) from None
        finally:
            channel.close()

    return head.tree_size, notes, entries()


def _rotations(
    stub: audit_pb2_grpc.AuditServiceStub, timeout: float, metadata: tuple[tuple[str, str], ...]
) -> list[bytes]:
    """The log key's rotation statements (an auditor holding an old key follows them); none from
    a server that does not serve GetPublicKey (a proxy exposing the log alone)."""
    try:
        key = stub.GetPublicKey(audit_pb2.GetPublicKeyRequest(), timeout=timeout, metadata=metadata)
    except grpc.RpcError as e:
        if e.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED):
            return []
        raise
    return list(key.key_rotations)


def run_audit(
    source: Source,
    verifier: Verifier | Sequence[Verifier],
    *,
    since: bytes | None,
    max_hand_lifetime_ms: int,
    progress: bool = False,
    policy: WitnessPolicy | None = None,
    workers: int = 0,
    codealer_keys: Sequence[bytes] = (),
) -> AuditReport:
    """Replay ``source``; ``workers``: processes that check the reveals beside this one (0: none)."""
    count, notes, entries = source
    checks = RevealChecks(workers) if workers > 0 else None
    try:
        auditor = Auditor(
            verifier,
            max_hand_lifetime_ms=max_hand_lifetime_ms,
            since=since,
            checkpoints=notes,
            policy=policy,
            checks=checks,
            codeal=lambda: codeal_checks(codealer_keys),
        )
        return _replay(auditor, count, entries, progress)
    finally:
        if checks is not None:
            checks.close()


def _replay(auditor: Auditor, count: int, entries: Iterator[Item], progress: bool) -> AuditReport:
    # The total is the signed tree size; entries beyond it (not yet signed) still count, past 100%.
    # The bar is closed (its last line ended) before anything else is printed, on error too.
    with progress_bar.bar(
        total=count or None, desc="audit", unit=" entries", stream=sys.stderr, enabled=progress
    ) as shown:
        try:
            for item in entries:
                if isinstance(item, tuple):
                    auditor.add(*item)
                else:
                    auditor.add(item)
                shown.update()
        except (ValueError, grpc.RpcError) as e:
            detail = e.details() if isinstance(e, grpc.RpcError) else str(e)
            auditor.report.unread = detail
            auditor.report.findings.append(Finding(f"could not read the whole log: {detail}"))
    return auditor.finish()


def _server_source(kind: str, value: str) -> tuple[int, list[bytes], Iterator[bytes]]:
    """--data or --db: a reader of the dealer's own storage, from the server package.

    It is found by entry point (fairdeck_server.cli.audit_sources), so that the
    client never imports the server, and ``audit --target`` never loads it.
    """
    found = [ep for ep in entry_points(group="fairdeck.audit_sources") if ep.name == kind]
    if not found:
        raise LogUnreadable(
            f"--{kind} reads the dealer's storage and needs its package (fairdeck_server) installed"
        )
    reader: Callable[[str], tuple[int, list[bytes], Iterator[bytes]]] = found[0].load()
    return reader(value)


def _workers(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > 256:
        raise argparse.ArgumentTypeError(f"--workers is a whole number 0 to 256, not {text!r}")
    return int(text)


def _client_config(args: argparse.Namespace) -> ClientConfig:
    c = cli_credentials.from_args(args)
    return ClientConfig(args.target, credentials=c.channel, api_token=c.api_token, insecure=c.insecure)


def cmd_audit(args: argparse.Namespace) -> int:
    try:
        verifier = verifiers(args.key)
    except (OSError, NoteError) as e:
        print(f"fairdeck audit: bad --key: {e}", file=sys.stderr)
        return 2
    try:
        policy = witness_policy(args)
    except CosignatureError as e:
        print(f"fairdeck audit: bad --policy or --witness: {e}", file=sys.stderr)
        return 2
    try:
        codealer_keys = [_codealer_key(v) for v in args.codealer_key or ()]
    except ValueError as e:
        print(f"fairdeck audit: bad --codealer-key: {e}", file=sys.stderr)
        return 2
    since_path = Path(args.since) if args.since else None
    try:
        since = _read_since(since_path)
    except OSError as e:
        print(f"fairdeck audit: cannot read --since {since_path}: {e.strerror or e}", file=sys.stderr)
        return 2
    source: Source
    try:
        if args.data:
            source = _server_source("data", args.data)
        elif args.db:
            source = _server_source("db", args.db)
        elif args.tiles:
            source = tiles_log(args.tiles, args.timeout, args.workers)
        else:
            source = remote_log(args.target, args.timeout, _client_config(args))
    except (ValueError, LogUnreadable) as e:  # bad TLS flags, a token refused for plain text; no log
        print(f"fairdeck audit: {e}", file=sys.stderr)
        return 2
    except (OSError, grpc.RpcError) as e:
        detail = e.details() if isinstance(e, grpc.RpcError) else str(e)
        print(f"fairdeck audit: cannot read the log: {detail}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        report = run_audit(
            source,
            verifier,
            since=since,
            max_hand_lifetime_ms=int(args.max_hand_lifetime * 1000),
            progress=progress_bar.wanted(args.progress, stream=sys.stderr, json=args.json),
            policy=policy,
            workers=default_workers(source[0]) if args.workers is None else args.workers,
            codealer_keys=codealer_keys,
        )
    except LogUnreadable as e:  # damage found part way through the file
        print(f"fairdeck audit: {e}", file=sys.stderr)
        return 2
    except SavedCheckpointUnreadable as e:  # our own file: nothing said about the dealer
        print(
            f"fairdeck audit: cannot use --since {since_path}: {e}. It is this auditor's own file, not the "
            "log: restore it, or move it away to audit from scratch (consistency is then NOT checked)",
            file=sys.stderr,
        )
        return 2
    except BrokenProcessPool:
        print(
            "fairdeck audit: a worker process that checks reveals died (out of memory?); nothing was "
            "concluded: run again, with --workers 0 to check in this process alone",
            file=sys.stderr,
        )
        return 2
    elapsed = time.monotonic() - started
    if since_path is not None and since is None:
        report.consistency = f"consistency NOT checked: no saved checkpoint at {since_path} (a first audit)"
    saved = False
    if report.ok and since_path is not None and report.checkpoint_note:
        try:
            _save_since(since_path, report.checkpoint_note)
            saved = True
        except OSError as e:
            print(
                f"fairdeck audit: cannot save the checkpoint to {since_path}: {e.strerror or e}",
                file=sys.stderr,
            )
            return 2
    if args.json:
        print(json.dumps({**report.to_dict(), "seconds": round(elapsed, 3)}, indent=2))
    else:
        _print_report(report, elapsed, since_path, saved)
    if report.keys_needed and report.ok:  # nothing wrong found, but not everything checked
        key, count = next(iter(report.keys_needed.items()))
        print(
            f"fairdeck audit: incomplete: {count:,} checkpoint(s) are signed by {key}, the log's key "
            "before a rotation that a key you gave signed; add it (--key) to check them",
            file=sys.stderr,
        )
        return 2
    return 0 if report.ok else 1


def _codealer_key(value: str) -> bytes:
    """64 hex digits: a co-dealer's Ed25519 identity key."""
    try:
        key = bytes.fromhex(value)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ValueError(f"{value!r} is not 64 hex digits (a co-dealer's identity key)")
    return key


def _read_since(path: Path | None) -> bytes | None:
    """The checkpoint saved by an earlier audit; None when there is none yet (a first audit)."""
    if path is None:
        return None
    try:
        return read_local(path)  # a regular file only: it is written back in its place
    except FileNotFoundError:
        return None


def _save_since(path: Path, note: bytes) -> None:
    """Replace the saved checkpoint atomically: a crash leaves the old one or the new one, never half;
    written under a fresh name (a link planted at a fixed temporary name is never followed)."""
    safefiles.write_path(path, note)


def _print_report(report: AuditReport, elapsed: float, since_path: Path | None, saved: bool) -> None:
    verdict = ("INCOMPLETE" if report.keys_needed else "OK") if report.ok else "FAILED"
    if report.unread is not None:  # the cause first: not "0 entries", which reads as an empty log
        print(f"audit FAILED: could not read the whole log: {report.unread}")
        print(f"  read and checked the {report.entries:,} entries before it ({report.hands:,} hands)")
    else:
        print(f"audit {verdict}: {report.entries:,} entries, {report.hands:,} hands in {elapsed:.1f}s")
    if report.checkpoint is not None:
        print(f"  signed tree size {report.tree_size:,}, root {report.root.hex()}")
    elif report.unread is not None:
        pass
    elif report.entries == 0:
        print(f"  the empty log: nothing to sign yet, root {report.root.hex()} (the empty tree)")
    else:
        print("  no signed checkpoint matches these entries")
    print(
        f"  closed and verified {report.closed:,}, voided {report.voided:,}, "
        f"still open within their lifetime {report.open_in_time:,}"
    )
    if report.codeal_hands:
        print(
            f"  co-dealt hands {report.codeal_hands:,}: closed and verified {report.codeal_verified:,} "
            f"(codealing-spec section 10; the co-dealers' identities are not in the log, not checked), "
            f"still open {report.codeal_open:,}"
            + (
                f" ({report.codeal_open_past_lifetime:,} of them past the lifetime: counted, not a "
                "finding, codealing-spec section 11)"
                if report.codeal_open_past_lifetime
                else ""
            )
            + f"; seals entries verified under --codealer-key {report.codeal_seals_verified:,}, "
            f"closed without seals {report.codeal_unsealed:,}"
            + (
                f"; {report.codeal_repeated:,} entries logged again by a retry (identical but for "
                "their time, counted once)"
                if report.codeal_repeated
                else ""
            )
        )
    if report.open_in_time and report.last_entry is not None:
        index, time_ms = report.last_entry
        print(f"  pending: the dealer has logged nothing since {_utc(time_ms)} (entry {index:,}); open hands")
        print("    are judged by what the log holds after them, never by this machine's clock")
    for rotation in report.rotations:
        print(f"  followed a log key rotation: {rotation} (a statement signed by both keys)")
    if report.consistency is not None:
        print(f"  {report.consistency}")
    if report.witnesses is not None:
        print(f"  {report.witnesses}")
    if saved:
        print(f"  new checkpoint saved to {since_path}")
    elif report.ok and since_path is not None:
        print(f"  no checkpoint to save to {since_path} yet: the log is empty")
    for finding in report.findings[:1000]:
        print(f"  BAD {finding}")
    if len(report.findings) > 1000:
        print(f"  ... and {len(report.findings) - 1000:,} more findings")


def _utc(time_ms: int) -> str:
    """An entry's time in ISO 8601 UTC, to the millisecond (any u64: far times are shown as numbers)."""
    try:
        when = datetime.datetime.fromtimestamp(time_ms / 1000, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return f"time_ms {time_ms}"
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = sub.add_parser(
        "audit",
        help="audit a dealer's transparency log",
        description="Replay a dealer's whole transparency log and check every signed checkpoint and "
        "every hand. Exit status: 0 every check holds (an empty log too), 1 something does not hold "
        "(each finding is named), 2 the log or an argument cannot be read.",
    )
    where = audit.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", metavar="HOST:PORT", help="a live dealer's AuditService")
    where.add_argument("--data", metavar="DIR", help="a dealer's data dir, read-only")
    where.add_argument(
        "--tiles",
        metavar="DIR|URL",
        help="the log as C2SP tlog-tiles (`fairdeck tiles`), in a directory or at an http(s):// prefix",
    )
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
        "--since",
        metavar="FILE",
        help="checkpoint saved by an earlier audit: prove the log only grew since, and save the new "
        "checkpoint there when the audit passes. If FILE does not exist, this is a first audit: "
        "the report says consistency was NOT checked, and the checkpoint is saved to FILE",
    )
    audit.add_argument(
        "--max-hand-lifetime",
        type=numbers.lifetime,
        default=3600.0,
        metavar="SECONDS",
        help="the operator's maximum hand lifetime (default %(default)s): an open hand is overdue once "
        "the log holds a later entry timestamped more than this after it",
    )
    audit.add_argument(
        "--timeout", type=numbers.seconds(numbers.DAY), default=30.0, help="per-call deadline with --target"
    )
    audit.add_argument(
        "--workers",
        type=_workers,
        default=None,
        metavar="N",
        help="processes that check reveals (seed, commitment, deck) beside the one reading the log; "
        "0: check them in that one (default: one per core beside it, here "
        f"{default_workers(PARALLEL_FROM)}, for a log of at least {PARALLEL_FROM:,} entries)",
    )
    audit.add_argument(
        "--codealer-key",
        action="append",
        metavar="HEX",
        help="a co-dealer's pinned identity key (64 hex digits; repeat, holder order 1..K-1): the "
        "seals entries' signatures are checked under it (codealing-spec section 11); without it, "
        "only their structure",
    )
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    progress_bar.add_argument(audit)
    add_witness_arguments(audit)
    cli_credentials.add_arguments(audit.add_argument_group("TLS and credentials (with --target)"))
    audit.set_defaults(handler=cmd_audit)
