"""Server-side commands of the ``fairdeck`` console script: ``serve``, ``init`` and ``key``.

``serve`` takes every ServerConfig field as a flag, an environment variable
or a config file key (config.py); ``fairdeck serve --help`` lists them all.
A configuration it refuses, or a start-up check that fails (startup.py: keys,
database, data dir lock, ports), exits with status 2 and one line on stderr.
``init`` makes new keys and a database and never replaces anything; ``key``
only reads.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

from fairdeck_server.dealing.codeal_claim import check_replica_name
from fairdeck_server.dealing.vault import KEY_ENV
from fairdeck_server.observe import logging_setup
from fairdeck_server.observe.heap import tune_collector
from fairdeck_server.publishing.log_signing import LogKeyError, load_log_keys
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.run import config, startup

log = logging.getLogger(__name__)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        settings = config.load(config.flags_given(args), os.environ, args.config)
    except config.ConfigError as e:
        print(f"fairdeck serve: {e}", file=sys.stderr)
        return 2
    logging_setup.configure(settings.log_format, settings.log_level)
    log.debug("configuration: %s", settings.describe())
    # Here, not at the top: key and init (run often, by hand and by scripts) need none of the dealer.
    from fairdeck_server.run.app import serve
    from fairdeck_server.run.processes import Worker, supervise

    try:
        worker = Worker.from_environ()
        if worker is None and settings.server.processes > 1:
            return supervise(settings.server, getattr(args, "argv", None) or sys.argv[1:])
        tune_collector()
        asyncio.run(serve(settings.server, described=settings.describe(), worker=worker))
    except StartupRefused as e:  # every start-up refusal: one line, exit 2, never a traceback
        log.debug("startup failed", exc_info=e)
        print(f"fairdeck serve: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    """Print the log's verifier key. Read-only: a missing key is an error, never a new key."""
    path = Path(args.log_key_file or Path(args.data) / "log.key")
    try:
        keys = load_log_keys(path, args.log_origin)
    except LogKeyError as e:
        hint = "" if path.exists() else " (restore it from backup; `fairdeck init` makes new keys)"
        print(f"fairdeck key: {e}{hint}", file=sys.stderr)
        return 2
    print(keys.signer.verifier.to_string())
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    """Make new keys (and a database): the explicit start of a new log."""
    data = Path(args.data)
    if args.log_origin is not None and (problem := origin_problem(args.log_origin)):
        print(f"fairdeck init: --log-origin {args.log_origin}: {problem}", file=sys.stderr)
        return 2
    if args.codeal_record:
        return _init_codeal_record(args, data)
    if args.take_over:
        print("fairdeck init: --take-over goes with --codeal-record (and --db)", file=sys.stderr)
        return 2
    log_key = Path(args.log_key_file) if args.log_key_file else None
    seed_key = Path(args.seed_key_file) if args.seed_key_file else None
    try:
        keys = startup.init(
            data,
            log_key_file=log_key,
            seed_key_file=seed_key,
            log_origin=args.log_origin,
            keys_only=args.keys_only,
        )
    except StartupRefused as e:
        print(f"fairdeck init: {e}", file=sys.stderr)
        return 2
    made = [f"log key {log_key or data / 'log.key'}"]
    made.append(
        f"seed key from ${KEY_ENV}" if KEY_ENV in os.environ else f"seed key {seed_key or data / 'seed.key'}"
    )
    if not args.keys_only:
        made.append(f"database {data / startup.DB_NAME}")
    print(f"created {', '.join(made)}; the log's verifier key (give it to auditors):", file=sys.stderr)
    if args.log_origin is None:
        print(
            f"the log's origin is {keys.signer.name}, a random name. A log published as tiles (serve "
            "--tiles) should be named for the URL its tiles are served at, without the scheme: make "
            "the new log with --log-origin, e.g. --log-origin example.com/fairdeck/log "
            '(tlog-tiles; docs/log-format.md, "Live tiles")',
            file=sys.stderr,
        )
    print(keys.signer.verifier.to_string())
    return 0


def _init_codeal_record(args: argparse.Namespace, data: Path) -> int:
    """A new, empty DATA_DIR/codeal.db with a new record id, made knowingly (serve refuses to make
    one beside a log that holds co-dealt hands: the old one was lost), bound to the log of the data
    dir's key file; or, with --take-over, the record of the codeal.db there claimed for this replica
    on the PostgreSQL database (a replica moved knowingly: dealing/codeal_claim.py)."""
    from fairdeck_server.dealing.codeal_store import CodealStoreError, create_record

    path = data / "codeal.db"
    if not data.is_dir():
        print(f"fairdeck init: --data {data} is not a directory; give the dealer's data dir", file=sys.stderr)
        return 2
    if args.take_over and args.db is None:
        print(
            "fairdeck init: --take-over needs --db URL (the replicas' PostgreSQL database)", file=sys.stderr
        )
        return 2
    if args.replica_name is not None:
        try:
            check_replica_name(args.replica_name)
        except ValueError as e:
            print(f"fairdeck init: --replica-name: {e}", file=sys.stderr)
            return 2
    try:
        keys = load_log_keys(Path(args.log_key_file or data / "log.key"))
        bound = [keys.signer.verifier.to_string(), *(v.to_string() for v in keys.retired)]
    except LogKeyError as e:
        if args.take_over:  # the record's log is checked before it is claimed: never skipped
            fix = ""
            if args.log_key_file is None and not (data / "log.key").exists():  # no key here: name the option
                fix = "; give --log-key-file PATH (the log key the replicas serve with)"
            print(
                f"fairdeck init: --take-over checks the record against its log's key, and {e}{fix}",
                file=sys.stderr,
            )
            return 2
        bound = []  # no key here yet: serve binds the record to its log at its first start
    try:
        lock = startup.DataDirLock.acquire(data)  # never beside a dealer that serves
        try:
            if args.take_over:
                return _take_over(args.db, data, path, bound, args.replica_name)
            record = create_record(path, bound)
        finally:
            lock.release()
    except (CodealStoreError, StartupRefused) as e:
        print(f"fairdeck init: {e}", file=sys.stderr)
        return 2
    print(
        f"created co-dealt hands {path} (record {record.record_id}), empty: co-dealt hands of the record "
        "it replaces stay open in the log and are ended by their co-dealers at their lifetime",
        file=sys.stderr,
    )
    return 0


def _take_over(url: str, data: Path, path: Path, bound: list[str], name: str | None) -> int:
    """The record of DATA_DIR/codeal.db claimed for this host and data dir, from a holder silent
    for ``codeal_claim.STALE_S`` at least."""
    import psycopg

    from fairdeck_server.dealing.codeal_claim import ClaimRefused, CodealClaim, Holder
    from fairdeck_server.dealing.codeal_open import open_codeal_store
    from fairdeck_server.storage.postgres.diagnosis import describe, what

    # as serve opens it: a lost file, another log's, or an older fairdeck's file whose hands are
    # not at their logged index in this log (a restored backup, a copy) is refused, never claimed
    store = open_codeal_store(data, url, bound, missing="--take-over claims the record of one there")
    try:
        holder = Holder.here(data, name)
        CodealClaim(url, path, store.record, holder).claim(store.hand_ids, take_over=True)
    except ClaimRefused as e:
        raise StartupRefused(str(e)) from None
    except psycopg.Error as e:
        raise StartupRefused(
            f"cannot reach the PostgreSQL database {describe(url)} ({what(e)}); retry"
        ) from None
    finally:
        store.close()
    print(
        f"co-dealt record {store.record.record_id} of {path} is now held by {holder.place()}", file=sys.stderr
    )
    return 0


def origin_problem(origin: str) -> str | None:
    """What is wrong with an origin meant as the log's URL prefix (tlog-tiles: "The origin line
    SHOULD be the scheme-less URL prefix of the log with no trailing slashes"), or None."""
    if "://" in origin:
        return f"the origin is the URL prefix without the scheme: {origin.split('://', 1)[1].rstrip('/')}"
    if origin.endswith("/"):
        return f"the origin has no trailing slash: {origin.rstrip('/')}"
    return None


def register(sub: argparse._SubParsersAction[Any]) -> None:
    key = sub.add_parser("key", help="print the transparency log's verifier key (signed-note form)")
    key.add_argument("--data", default="fairdeck-data", metavar="DIR", help="data dir (default %(default)s)")
    key.add_argument("--log-key-file", default=None, metavar="PATH", help="default DIR/log.key")
    key.add_argument("--log-origin", default=None, help="refuse unless the key is for this origin")
    key.set_defaults(handler=cmd_key)

    init = sub.add_parser(
        "init",
        help="make new keys and a new database (a new log); never replaces anything",
        description="Make the keys (and, for SQLite, the database) of a new log. Refuses if any of them "
        "exists. Prints the log's verifier key. `serve` does this by itself only in a fresh data dir.",
    )
    init.add_argument("--data", default="fairdeck-data", metavar="DIR", help="data dir (default %(default)s)")
    init.add_argument("--log-key-file", default=None, metavar="PATH", help="default DIR/log.key")
    init.add_argument(
        "--seed-key-file",
        default=None,
        metavar="PATH",
        help=f"default DIR/seed.key; not made if ${KEY_ENV} is set",
    )
    init.add_argument(
        "--log-origin",
        default=None,
        metavar="ORIGIN",
        help="the log's name, fixed for its life: the URL prefix its tiles are served at, without the "
        "scheme and with no trailing slash, e.g. example.com/fairdeck/log (default fairdeck.log/RANDOM)",
    )
    init.add_argument(
        "--keys-only",
        action="store_true",
        help="make only the keys (replicas on PostgreSQL, which make their database on first start)",
    )
    init.add_argument(
        "--codeal-record",
        action="store_true",
        help="make only a new, empty DIR/codeal.db (the co-dealt hands' record), after it was lost "
        "and cannot be restored: serve refuses to make one beside a log with co-dealt hands",
    )
    init.add_argument(
        "--take-over",
        action="store_true",
        help="with --codeal-record and --db: keep DIR/codeal.db and claim its record for this host and "
        "data dir (a replica moved knowingly; its old place must be stopped for good)",
    )
    init.add_argument("--db", default=None, metavar="URL", help="the replicas' PostgreSQL URL (--take-over)")
    init.add_argument(
        "--replica-name",
        default=os.environ.get("FAIRDECK_REPLICA_NAME") or None,
        metavar="NAME",
        help="with --take-over: the name the replica serves under (serve --replica-name, "
        "$FAIRDECK_REPLICA_NAME; default the host name)",
    )
    init.set_defaults(handler=cmd_init)

    serve_parser = sub.add_parser(
        "serve",
        help="run the dealer (gRPC)",
        description="Run the dealer: gRPC on --listen, optionally Prometheus /metrics on --metrics-listen.",
        epilog=config.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    config.add_arguments(serve_parser)
    serve_parser.set_defaults(handler=cmd_serve)
