"""``fairdeck codealer``: make a co-dealer, print its identity key, run it.

A co-dealer's directory holds its identity: ``codealer.key`` (its long-term Ed25519 key, hex,
0600), ``secrets.key`` (the AES key its per-hand secrets are sealed with, 0600) and
``codealer.db`` (its ledger: every hand, shuffle and share it gave). ``init`` makes all three and
never replaces any; ``serve`` makes nothing and refuses, in one line (exit 2), to start without
them, because a co-dealer that forgot what it shared could give a card to a second seat.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck_server.codealer.ledger import Ledger, LedgerError
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.startup import DataDirLock
from fairdeck_server.vault import (
    SeedVault,
    VaultError,
    create_key_file,
    read_key_file,
    read_private_text,
    write_private_file,
)

KEY_NAME = "codealer.key"
SECRETS_NAME = "secrets.key"
LEDGER_NAME = "codealer.db"
if TYPE_CHECKING:  # the co-dealer's code needs libsodium; `fairdeck --help` must not load it
    from fairdeck_server.codealer.holder import CoDealer

DEFAULT_LISTEN = "127.0.0.1:7390"

EPILOG = f"""\
A co-dealer is an independent key holder of co-dealt hands (docs/codealing-spec.md): the
dealer cannot see a card without it. Run it somewhere the dealer's operator has no shell.

  fairdeck codealer init --dir cd1          # identity key, secrets key, ledger; prints the key
  fairdeck codealer serve --dir cd1 --listen 127.0.0.1:7390

Then start the dealer with `--codealer 127.0.0.1:7390 --codealer-key KEY` (the key `init`
and `fairdeck codealer key --dir cd1` print). Files: DIR/{KEY_NAME}, DIR/{SECRETS_NAME},
DIR/{LEDGER_NAME}. See docs/operations.md, "Co-dealer".
"""


def _refuse(command: str, message: str) -> int:
    print(f"fairdeck codealer {command}: {' '.join(message.split())}", file=sys.stderr)
    return 2


def load_identity(directory: Path) -> Ed25519PrivateKey:
    path = directory / KEY_NAME
    if not path.exists():
        raise StartupRefused(
            f"no co-dealer key at {path}: make a co-dealer with `fairdeck codealer init --dir {directory}`, "
            "or restore the key from backup"
        )
    text = read_private_text(path, "co-dealer key file", StartupRefused).strip()
    try:
        return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(text))
    except ValueError:
        raise StartupRefused(f"co-dealer key file {path}: want 64 hex digits (an Ed25519 key)") from None


def _load_vault(directory: Path) -> SeedVault:
    path = directory / SECRETS_NAME
    if not path.exists():
        raise StartupRefused(f"no secrets key at {path} beside the co-dealer key: restore it from backup")
    try:
        keys = read_key_file(path)
    except VaultError as e:
        raise StartupRefused(f"secrets key file {path}: {e}") from None
    return SeedVault(keys[0], tuple(keys[1:]))


def _open_ledger(directory: Path) -> Ledger:
    path = directory / LEDGER_NAME
    if not path.exists():
        raise StartupRefused(
            f"no co-dealer ledger at {path}: restore it from backup (a co-dealer that forgot what it "
            "shared could give a card to two seats); `fairdeck codealer init` makes a new co-dealer"
        )
    try:
        ledger = Ledger(path, create=False)
        ledger.hand("")  # a file that is not our ledger fails here
    except LedgerError as e:
        raise StartupRefused(str(e)) from None
    return ledger


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    for name in (KEY_NAME, SECRETS_NAME, LEDGER_NAME):
        if (directory / name).exists():
            return _refuse(
                "init", f"{directory / name} exists: a co-dealer is never replaced; use another --dir"
            )
    identity = Ed25519PrivateKey.generate()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_private_file(directory / KEY_NAME, identity.private_bytes_raw().hex() + "\n", create=True)
        create_key_file(directory / SECRETS_NAME)
        Ledger(directory / LEDGER_NAME).close()
    except (OSError, LedgerError) as e:
        return _refuse("init", f"{directory}: {getattr(e, 'strerror', None) or e}")
    print(
        f"created co-dealer {directory}; its identity key (give it to the dealer's --codealer-key):",
        file=sys.stderr,
    )
    print(identity.public_key().public_bytes_raw().hex())
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    try:
        print(load_identity(Path(args.dir)).public_key().public_bytes_raw().hex())
    except StartupRefused as e:
        return _refuse("key", str(e))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    directory = Path(args.dir)
    try:
        if not directory.is_dir():
            raise StartupRefused(
                f"no co-dealer dir {directory}: make one with `fairdeck codealer init --dir {directory}`"
            )
        identity = load_identity(directory)
        vault = _load_vault(directory)
        lock = DataDirLock.acquire(directory, holder="co-dealer", option="--dir")
        ledger = _open_ledger(directory)
    except StartupRefused as e:
        return _refuse("serve", str(e))
    from fairdeck_server.codealer.holder import CoDealer

    try:
        return asyncio.run(_serve(CoDealer(ledger, identity, vault), args.listen))
    finally:
        ledger.close()
        lock.release()


async def _serve(codealer: CoDealer, listen: str) -> int:
    from fairdeck_server.edge.codealer_servicer import start_codealer_server

    try:
        server, port = await start_codealer_server(codealer, listen)
    except RuntimeError:
        port = 0
    if not port:
        return _refuse("serve", f"--listen {listen}: cannot listen there; pick another --listen (HOST:PORT)")
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped.set)
    host = listen.rpartition(":")[0] or "127.0.0.1"
    print(
        f"fairdeck codealer listening on {host}:{port} (identity {codealer.identity_key.hex()})", flush=True
    )
    await stopped.wait()
    await server.stop(5)
    print("fairdeck codealer stopped", flush=True)
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    codealer = sub.add_parser(
        "codealer",
        help="run a co-dealer: an independent key holder of co-dealt hands",
        description="A co-dealer shuffles co-dealt decks under encryption after the dealer and gives each "
        "card's share only to its seat.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = codealer.add_subparsers(dest="codealer_command", metavar="{init,key,serve}", required=True)
    init = actions.add_parser("init", help="make a new co-dealer: identity key, secrets key, ledger")
    init.add_argument("--dir", required=True, metavar="DIR", help="the co-dealer's directory")
    init.set_defaults(handler=cmd_init)
    key = actions.add_parser("key", help="print the co-dealer's identity key (hex Ed25519)")
    key.add_argument("--dir", required=True, metavar="DIR", help="the co-dealer's directory")
    key.set_defaults(handler=cmd_key)
    serve = actions.add_parser("serve", help="serve CoDealerService over gRPC", epilog=EPILOG)
    serve.formatter_class = argparse.RawDescriptionHelpFormatter
    serve.add_argument("--dir", required=True, metavar="DIR", help="the co-dealer's directory")
    serve.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help="default %(default)s")
    serve.set_defaults(handler=cmd_serve)
