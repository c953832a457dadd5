"""``fairdeck codealer``: make a co-dealer, print its identity key, run it.

A co-dealer's directory holds its identity: ``codealer.key`` (its long-term Ed25519 key, hex,
0600), ``secrets.key`` (the AES key its per-hand secrets are sealed with, 0600), ``codealer.db``
(its ledger: every hand, shuffle and share it gave) and ``dealer.token`` (the dealer's token,
0600). ``init`` makes all four and never replaces any; ``token`` makes a new token; ``serve``
makes nothing and refuses, in one line (exit 2), to start without them, because a co-dealer that
forgot what it shared could give a card to a second seat. ``serve --max-hand-lifetime`` ends the
hands its dealer never closed that long after their announce (checked every quarter of it, at
most a minute apart), ``serve --keep-closed-days`` prunes hands that ended that long ago (at start,
then hourly); hands not ended are kept until one of the two ends them. ``serve --reveal-hold``:
how long after a hand's last sealed share its seed is answered without its seats' releases.
``restored`` ends every open hand of a ledger restored from backup (it forgot later shares).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck_server.codealer.dealer_token import TOKEN_NAME, TokenCheck, new_token, parse_token
from fairdeck_server.codealer.ledger import Ledger, LedgerError
from fairdeck_server.dealing.vault import (
    SeedVault,
    VaultError,
    create_key_file,
    read_key_file,
    read_private_text,
    write_private_file,
)
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.run.config import ServerConfig
from fairdeck_server.run.option_ranges import CODEALER_RANGES
from fairdeck_server.run.startup import DataDirLock

KEY_NAME = "codealer.key"
SECRETS_NAME = "secrets.key"
LEDGER_NAME = "codealer.db"
if TYPE_CHECKING:  # the co-dealer's code needs libsodium; `fairdeck --help` must not load it
    from fairdeck_server.codealer.holder import CoDealer

DEFAULT_LISTEN = "127.0.0.1:7390"
PRUNE_EVERY = 3600.0
"""Seconds between the ledger's prunes with --keep-closed-days (the first is at start)."""
DAY_MS = 86_400_000
DEFAULT_HAND_LIFETIME = 2 * ServerConfig.max_hand_lifetime
"""Twice the dealer's default ``--max-hand-lifetime``: the least a dealer with its default takes
(a pooled deck waits up to one lifetime before it is taken, then lives one as a hand)."""
DEFAULT_REVEAL_HOLD = ServerConfig.max_hand_lifetime / 2
"""Half the dealer's default ``--max-hand-lifetime``: its void of an abandoned hand, at its
lifetime, finds the hold passed (holder.DEFAULT_REVEAL_HOLD_MS)."""
EXPIRE_EVERY_MAX = 60.0
"""Seconds between the lifetime's sweeps at most (a quarter of the lifetime when shorter)."""
log = logging.getLogger("fairdeck_server.codealer")

EPILOG = f"""\
A co-dealer is an independent key holder of co-dealt hands (docs/codealing-spec.md): the
dealer cannot see a card without it. Run it somewhere the dealer's operator has no shell.

  fairdeck codealer init --dir cd1          # identity key, secrets key, ledger, dealer token
  fairdeck codealer serve --dir cd1 --listen 127.0.0.1:7390

Then copy cd1/{TOKEN_NAME} (mode 0600) to the dealer's host and start the dealer with
`--codealer 127.0.0.1:7390 --codealer-key KEY --codealer-token @FILE` (the key `init` and
`fairdeck codealer key --dir cd1` print). Files: DIR/{KEY_NAME}, DIR/{SECRETS_NAME},
DIR/{LEDGER_NAME}, DIR/{TOKEN_NAME}. See docs/operations.md, "Co-dealer".
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


def _check_owner(ledger: Ledger, identity: Ed25519PrivateKey, vault: SeedVault) -> None:
    """Refuse a ledger of another co-dealer (its hands signed by another key, or sealed by another
    secrets key): serving it would answer its hands with signatures that are not this identity's,
    or not at all. A ledger made before its owner was kept is checked on its newest hand, then
    claimed."""
    from fairdeck.codeal.errors import CodealError
    from fairdeck.codeal.identity import key_statement, verify_identity
    from fairdeck.core.decks import DeckSpec, DeckSpecError

    key = identity.public_key().public_bytes_raw()
    path, fix = ledger.path, "put back this co-dealer's own files from one backup"
    owner = ledger.owner()
    if owner is not None and owner != key:
        raise StartupRefused(
            f"co-dealer ledger {path} belongs to co-dealer {owner.hex()}, not to the {KEY_NAME} "
            f"beside it ({key.hex()}): {fix}"
        )
    hand = ledger.newest_hand()
    if hand is not None:
        if owner is None:
            try:
                spec = DeckSpec.parse(hand.deck)
                statement = key_statement(spec, hand.hand_id, hand.holder, hand.holders, hand.key_record)
                verify_identity(key, statement, hand.key_signature, "key", "key record")
            except (CodealError, DeckSpecError):
                raise StartupRefused(
                    f"co-dealer ledger {path} holds hands another co-dealer signed, not the "
                    f"{KEY_NAME} beside it ({key.hex()}): {fix}"
                ) from None
        try:
            vault.open(hand.hand_id, hand.sealed_secrets)
        except VaultError:
            raise StartupRefused(
                f"secrets key file {path.parent / SECRETS_NAME} does not open the hands of co-dealer "
                f"ledger {path}: {fix}"
            ) from None
    ledger.claim(key)


def load_token(directory: Path) -> TokenCheck:
    path = directory / TOKEN_NAME
    fix = f"make one with `fairdeck codealer token --dir {directory}` and give the file to the dealer"
    if not path.exists():
        raise StartupRefused(f"no dealer token at {path}: {fix} (`fairdeck serve --codealer-token @FILE`)")
    text = read_private_text(path, "dealer token file", StartupRefused)
    try:
        return TokenCheck(parse_token(text))
    except ValueError as e:
        raise StartupRefused(f"dealer token file {path}: {e}; {fix}") from None


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    for name in (KEY_NAME, SECRETS_NAME, LEDGER_NAME, TOKEN_NAME):
        if (directory / name).exists():
            return _refuse(
                "init", f"{directory / name} exists: a co-dealer is never replaced; use another --dir"
            )
    identity = Ed25519PrivateKey.generate()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_private_file(directory / KEY_NAME, identity.private_bytes_raw().hex() + "\n", create=True)
        create_key_file(directory / SECRETS_NAME)
        ledger = Ledger(directory / LEDGER_NAME)
        ledger.claim(identity.public_key().public_bytes_raw())
        ledger.close()
        write_private_file(directory / TOKEN_NAME, new_token() + "\n", create=True)
    except (OSError, LedgerError) as e:
        return _refuse("init", f"{directory}: {getattr(e, 'strerror', None) or e}")
    print(
        f"created co-dealer {directory}; copy {directory / TOKEN_NAME} (mode 0600) to the dealer's host "
        "for its --codealer-token @FILE; its identity key (give it to the dealer's --codealer-key):",
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


def cmd_token(args: argparse.Namespace) -> int:
    """A new dealer token, replacing the old one at the co-dealer's next start."""
    directory = Path(args.dir)
    if not (directory / KEY_NAME).exists():
        return _refuse(
            "token", f"no co-dealer at {directory}: make one with `fairdeck codealer init --dir {directory}`"
        )
    try:
        write_private_file(directory / TOKEN_NAME, new_token() + "\n", create=False)
    except OSError as e:
        return _refuse("token", f"{directory / TOKEN_NAME}: {e.strerror or e}")
    print(
        f"wrote a new dealer token to {directory / TOKEN_NAME} (mode 0600): copy it to the dealer's host "
        "(`fairdeck serve --codealer-token @FILE`), then restart the co-dealer and the dealer; the old "
        "token is refused from the co-dealer's restart on",
        file=sys.stderr,
    )
    return 0


def cmd_restored(args: argparse.Namespace) -> int:
    """After ``codealer.db`` came back from a backup: end every hand it holds open. The backup
    forgot the shares given after it, so such a hand could give a position again, to another
    seat (the dealer's own key, say); ended, it gives none its record does not hold."""
    directory = Path(args.dir)
    try:
        if not (directory / KEY_NAME).exists():
            raise StartupRefused(
                f"no co-dealer at {directory}: restore its whole directory (`{KEY_NAME}`, "
                f"`{SECRETS_NAME}`, `{LEDGER_NAME}`, `{TOKEN_NAME}`) first"
            )
        lock = DataDirLock.acquire(directory, holder="co-dealer", option="--dir")
    except StartupRefused as e:
        return _refuse("restored", str(e))
    try:
        ledger = _open_ledger(directory)
        try:
            ended = ledger.end_open_hands(time.time_ns() // 1_000_000)
        finally:
            ledger.close()
    except (StartupRefused, LedgerError) as e:
        return _refuse("restored", str(e))
    finally:
        lock.release()
    print(
        f"ended {ended} co-dealt hands open in {directory / LEDGER_NAME}: they deal no more cards "
        "(the dealer voids them); start the co-dealer with `fairdeck codealer serve`",
        file=sys.stderr,
    )
    return 0


def _in_range(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
            CODEALER_RANGES[name].check(value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(
                str(e) if "must be" in str(e) else f"not a number: {text!r}"
            ) from None
        return value

    return parse


_days = _in_range("keep_closed_days")


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
        token = load_token(directory)
        lock = DataDirLock.acquire(directory, holder="co-dealer", option="--dir")
    except StartupRefused as e:
        return _refuse("serve", str(e))
    try:
        ledger = _open_ledger(directory)
    except StartupRefused as e:
        lock.release()
        return _refuse("serve", str(e))
    try:
        _check_owner(ledger, identity, vault)
    except (StartupRefused, LedgerError) as e:
        ledger.close()
        lock.release()
        return _refuse("serve", str(e))
    from fairdeck_server.codealer.holder import CoDealer

    lifetime_ms = round(args.max_hand_lifetime * 1000)
    hold_ms = round(args.reveal_hold * 1000)
    try:
        return asyncio.run(
            _serve(
                CoDealer(ledger, identity, vault, lifetime_ms=lifetime_ms, reveal_hold_ms=hold_ms),
                args.listen,
                token,
                args.keep_closed_days,
            )
        )
    finally:
        ledger.close()
        lock.release()


async def _prune(codealer: CoDealer, keep_days: float, stopping: threading.Event) -> None:
    """Drop hands that ended over ``keep_days`` ago, at start and then every PRUNE_EVERY seconds.
    Each pass runs whole in a worker thread, its log line too (see ``_expire``)."""
    while True:
        try:
            await asyncio.to_thread(_prune_pass, codealer, keep_days, stopping)
        except Exception:  # a defect of ours: said with its trace, and the next pass still comes
            log.exception("pruning the ledger failed unexpectedly; trying again in %g s", PRUNE_EVERY)
        await asyncio.sleep(PRUNE_EVERY)


def _prune_pass(codealer: CoDealer, keep_days: float, stopping: threading.Event) -> None:
    """One pass; its line counts the hands dropped before a failure or a stop too."""
    cutoff = codealer.clock_ms() - int(keep_days * DAY_MS)
    started = time.monotonic()
    dropped = 0

    def committed(n: int) -> bool:
        nonlocal dropped
        dropped += n
        return not stopping.is_set()

    failed: LedgerError | None = None
    try:
        codealer.ledger.prune(cutoff, committed)
    except LedgerError as e:
        failed = e
    finally:
        if dropped:
            log.info(
                "pruned %d hands that ended over %g days ago from the ledger (%.1f s)",
                dropped,
                keep_days,
                time.monotonic() - started,
            )
    if failed is not None:
        log.warning("pruning the ledger failed (%s); trying again in %g s", failed, PRUNE_EVERY)


async def _expire(codealer: CoDealer, stopping: threading.Event) -> None:
    """End the hands not ended ``lifetime`` after their announce, every quarter of it (a minute at
    most), at start first: the dealer lost them (its codeal.db) or is gone; each sweep that ended
    some says so (WARNING): the co-dealer's operator learns its dealer leaves hands behind. A sweep
    runs whole in a worker thread, its count and WARNING too: a stop cancels this task, not the
    thread, which ends after the batch under way (``stopping``) and writes its WARNING, and
    ``asyncio.run`` waits for it (written after the cancellable await, the WARNING was lost for
    good to a SIGTERM after the commit: the hands, ended, are never swept again)."""
    every = min(EXPIRE_EVERY_MAX, codealer.lifetime_ms / 4000)
    while True:
        try:
            await asyncio.to_thread(_expire_pass, codealer, every, stopping)
        except Exception:  # a defect of ours: said with its trace, and the next sweep still comes
            log.exception(
                "ending hands past --max-hand-lifetime failed unexpectedly; trying again in %g s", every
            )
        await asyncio.sleep(every)


def _expire_pass(codealer: CoDealer, every: float, stopping: threading.Event) -> None:
    """One sweep; its WARNING counts the hands ended before a failure or a stop too (no later
    sweep finds them: they are ended), then the failure's."""
    before = codealer.expired
    failed: LedgerError | None = None
    try:
        codealer.expire(go_on=lambda: not stopping.is_set())
    except LedgerError as e:
        failed = e
    finally:
        ended = codealer.expired - before
        if ended:
            log.warning(
                "ended %d hands not closed %g s after their announce (--max-hand-lifetime; %d since "
                "start): the dealer lost them or is gone; they take no more shares, and "
                "--keep-closed-days prunes them",
                ended,
                codealer.lifetime_ms / 1000,
                codealer.expired,
            )
    if failed is not None:
        log.warning("ending hands past --max-hand-lifetime failed (%s); trying again in %g s", failed, every)


async def _serve(codealer: CoDealer, listen: str, token: TokenCheck, keep_days: float) -> int:
    from fairdeck_server.edge.codealer_servicer import start_codealer_server

    try:
        server, port, watch = await start_codealer_server(codealer, listen, token)
    except RuntimeError:
        port = 0
    if not port:
        return _refuse("serve", f"--listen {listen}: cannot listen there; pick another --listen (HOST:PORT)")
    stopping = threading.Event()  # the sweeps' threads end after their batch under way
    tasks = [
        asyncio.create_task(watch.run(), name="codealer-health"),
        asyncio.create_task(_expire(codealer, stopping), name="codealer-expire"),
    ]
    if keep_days:
        tasks.append(asyncio.create_task(_prune(codealer, keep_days, stopping), name="codealer-prune"))
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped.set)
    host = listen.rpartition(":")[0] or "127.0.0.1"
    print(
        f"fairdeck codealer listening on {host}:{port} (identity {codealer.identity_key.hex()})", flush=True
    )
    await stopped.wait()
    stopping.set()
    for task in tasks:
        task.cancel()
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
    actions = codealer.add_subparsers(
        dest="codealer_command", metavar="{init,key,token,restored,serve}", required=True
    )
    init = actions.add_parser(
        "init", help="make a new co-dealer: identity key, secrets key, ledger, dealer token"
    )
    init.add_argument("--dir", required=True, metavar="DIR", help="the co-dealer's directory")
    init.set_defaults(handler=cmd_init)
    key = actions.add_parser("key", help="print the co-dealer's identity key (hex Ed25519)")
    key.add_argument("--dir", required=True, metavar="DIR", help="the co-dealer's directory")
    key.set_defaults(handler=cmd_key)
    token = actions.add_parser("token", help="make a new dealer token (DIR/dealer.token), replacing the old")
    token.add_argument("--dir", required=True, metavar="DIR", help="the co-dealer's directory")
    token.set_defaults(handler=cmd_token)
    restored = actions.add_parser(
        "restored",
        help="after restoring codealer.db from a backup, before serve: end the hands it holds open",
    )
    restored.add_argument("--dir", required=True, metavar="DIR", help="the co-dealer's directory")
    restored.set_defaults(handler=cmd_restored)
    serve = actions.add_parser("serve", help="serve CoDealerService over gRPC", epilog=EPILOG)
    serve.formatter_class = argparse.RawDescriptionHelpFormatter
    serve.add_argument("--dir", required=True, metavar="DIR", help="the co-dealer's directory")
    serve.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help="default %(default)s")
    keep = CODEALER_RANGES["keep_closed_days"]
    serve.add_argument(
        "--keep-closed-days",
        type=_days,
        default=0.0,
        metavar="DAYS",
        help=f"prune hands that ended this long ago; {keep.describe()}; default 0 (docs/operations.md)",
    )
    lifetime = CODEALER_RANGES["max_hand_lifetime"]
    serve.add_argument(
        "--max-hand-lifetime",
        type=_in_range("max_hand_lifetime"),
        default=DEFAULT_HAND_LIFETIME,
        metavar="SECONDS",
        help="end a hand the dealer has not closed this long after its announce; at least twice the "
        f"dealer's --max-hand-lifetime; {lifetime.describe()}; default %(default)g (docs/operations.md)",
    )
    hold = CODEALER_RANGES["reveal_hold"]
    serve.add_argument(
        "--reveal-hold",
        type=_in_range("reveal_hold"),
        default=DEFAULT_REVEAL_HOLD,
        metavar="SECONDS",
        help="answer a hand's seed without its seats' releases only this long after its last sealed share "
        "(an abandoned hand's void); at most the dealer's --max-hand-lifetime; "
        f"{hold.describe()}; default %(default)g (docs/operations.md)",
    )
    serve.set_defaults(handler=cmd_serve)
