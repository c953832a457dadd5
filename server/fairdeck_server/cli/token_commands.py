"""Admin commands on a dealer's own files: ``fairdeck token create|list|revoke`` and
``fairdeck rotate-key seed|log``.

They open the storage and key files directly (``--data DIR`` or ``--db postgresql://...``), so
they need no running dealer and no credentials but access to those files. A running dealer sees a
new or revoked token within ``auth.CACHE_TTL`` seconds, a rotated key when it restarts. ``token
create`` prints the token on stdout and nothing else, once: only its digest is stored, and no
command prints it again (docs/security.md, "Managing tokens", "Key rotation").
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fairdeck_server import principal, refusals
from fairdeck_server.dealing.vault import KEY_ENV, VaultError, rotate_key_file
from fairdeck_server.policy.auth import new_token
from fairdeck_server.principal import Role
from fairdeck_server.publishing.log_signing import LogKeyError, rotate_log_key
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.storage import open_storage
from fairdeck_server.storage.base import Storage, TokenRecord

MAX_LABEL = 100


def _storage(args: argparse.Namespace) -> Storage:
    # Never creates a database: a typo in --data must not make an empty one (or a data dir).
    return open_storage(args.db, Path(args.data))


async def _with_storage(args: argparse.Namespace, work: Any) -> Any:
    storage = _storage(args)
    await storage.start()
    try:
        return await work(storage)
    finally:
        await storage.close()


def _refusing(name: str, handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``handler`` with a missing or damaged database (or driver) as one line and exit 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (StartupRefused, refusals.DealerError) as e:
            print(f"fairdeck {name}: {e}", file=sys.stderr)
            return 2

    return run


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cmd_token_create(args: argparse.Namespace) -> int:
    try:
        principal.check_tenant(args.tenant)
    except ValueError as e:
        print(f"fairdeck token create: --tenant: {e}", file=sys.stderr)
        return 2
    label = args.label or ""
    if len(label) > MAX_LABEL or not label.isprintable():
        print(
            f"fairdeck token create: --label must be at most {MAX_LABEL} printable characters",
            file=sys.stderr,
        )
        return 2

    async def create(storage: Storage) -> tuple[str, TokenRecord]:
        for _ in range(3):  # a 64-bit id collides about never; retry anyway
            token, record = new_token(args.tenant, Role(args.role), label)
            try:
                await storage.put_token(record)
            except ValueError:
                continue
            return token, record
        raise RuntimeError("could not pick an unused token id")

    token, record = asyncio.run(_with_storage(args, create))
    print(token, flush=True)
    print(
        f"created token {record.token_id} for tenant {record.tenant} ({record.role}); "
        "it is shown only this once",
        file=sys.stderr,
    )
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    async def listed(storage: Storage) -> list[TokenRecord]:
        return await storage.list_tokens(args.tenant)

    records: list[TokenRecord] = asyncio.run(_with_storage(args, listed))
    if args.json:
        rows = [
            {
                "token_id": r.token_id,
                "tenant": r.tenant,
                "role": r.role,
                "label": r.label,
                "created_ms": r.created_ms,
                "revoked_ms": r.revoked_ms,
            }
            for r in records
        ]
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'TOKEN ID':<16}  {'TENANT':<20}  {'ROLE':<7}  {'CREATED':<20}  {'REVOKED':<20}  LABEL")
    for r in records:
        print(
            f"{r.token_id:<16}  {r.tenant:<20}  {r.role:<7}  {_when(r.created_ms):<20}  "
            f"{_when(r.revoked_ms):<20}  {r.label}"
        )
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    async def revoke(storage: Storage) -> TokenRecord | None:
        return await storage.revoke_token(args.token_id, time.time_ns() // 1_000_000)

    record: TokenRecord | None = asyncio.run(_with_storage(args, revoke))
    if record is None:
        print(f"fairdeck token revoke: no token {args.token_id}", file=sys.stderr)
        return 1
    print(f"token {record.token_id} of tenant {record.tenant} revoked at {_when(record.revoked_ms)}")
    return 0


def cmd_rotate_key(args: argparse.Namespace) -> int:
    data = Path(args.data)
    try:
        if args.which == "seed":
            if KEY_ENV in os.environ:
                print(
                    f"fairdeck rotate-key: ${KEY_ENV} is set, so the key file is not used; "
                    f"put a new key first in ${KEY_ENV} instead",
                    file=sys.stderr,
                )
                return 2
            path = Path(args.key_file or data / "seed.key")
            new_id, ids = rotate_key_file(path)
            print(
                f"seed key {new_id} now seals new hands (after a restart); keys in {path}: {', '.join(ids)}"
            )
        else:
            path = Path(args.key_file or data / "log.key")
            keys = rotate_log_key(path)
            print("log signing key rotated (takes effect after a restart). Verifier keys, current first:")
            for verifier in keys.verifiers:
                print(verifier.to_string())
            print(
                f"the old key signed a statement naming the new one (kept in {path}); the dealer "
                "publishes it at its next start, so an auditor who holds only the old key can follow it",
                file=sys.stderr,
            )
    except (OSError, VaultError, LogKeyError) as e:
        print(f"fairdeck rotate-key: {e}", file=sys.stderr)
        return 2
    return 0


def _storage_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", default="fairdeck-data", metavar="DIR", help="data dir (default %(default)s)"
    )
    parser.add_argument(
        "--db", default=None, metavar="URL", help="postgresql:// URL (default: SQLite in the data dir)"
    )


def register(sub: argparse._SubParsersAction[Any]) -> None:
    token = sub.add_parser("token", help="create, list and revoke API tokens")
    actions = token.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = actions.add_parser("create", help="create a token and print it (only this once)")
    create.add_argument("--tenant", required=True, help="the tenant the token acts for")
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--label", default="", help="a note for `token list` (e.g. who holds it)")
    _storage_flags(create)
    create.set_defaults(handler=_refusing("token create", cmd_token_create))

    listing = actions.add_parser("list", help="list tokens (never their secrets)")
    listing.add_argument("--tenant", default=None, help="only this tenant's tokens")
    listing.add_argument("--json", action="store_true", help="print JSON")
    _storage_flags(listing)
    listing.set_defaults(handler=_refusing("token list", cmd_token_list))

    revoke = actions.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id", metavar="TOKEN_ID", help="the id shown by `token list`")
    _storage_flags(revoke)
    revoke.set_defaults(handler=_refusing("token revoke", cmd_token_revoke))

    rotate = sub.add_parser("rotate-key", help="rotate the seed key or the log signing key")
    rotate.add_argument("which", choices=["seed", "log"], help="which key")
    rotate.add_argument(
        "--data", default="fairdeck-data", metavar="DIR", help="data dir (default %(default)s)"
    )
    rotate.add_argument(
        "--key-file", default=None, metavar="PATH", help="the key file (default DIR/seed.key or DIR/log.key)"
    )
    rotate.set_defaults(handler=cmd_rotate_key)
