"""``fairdeck witness``: make a witness, print its key, run it.

A witness's directory holds its identity: ``witness.key`` (its Ed25519 signer key, mode 0600),
``witness.db`` (what it cosigned) and ``logs.conf`` (the logs it witnesses). ``init`` makes the
key and the state file together and never replaces either; ``serve`` makes nothing, and refuses
to start with one line when the key or the state is missing, because a witness that forgot what
it cosigned could cosign a rolled-back or forked log.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

from fairdeck.log.cosignature import CosignatureError, Cosigner
from fairdeck.log.note import NoteError, Verifier
from fairdeck_server.dealing.vault import read_private_text, write_private_file
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.run.startup import DataDirLock
from fairdeck_server.witness.http import WitnessHTTPServer, WitnessMetrics
from fairdeck_server.witness.protocol import Witness
from fairdeck_server.witness.state import StateError, WitnessState

log = logging.getLogger(__name__)

KEY_NAME = "witness.key"
STATE_NAME = "witness.db"
CONFIG_NAME = "logs.conf"
DEFAULT_LISTEN = "127.0.0.1:7380"

CONFIG_TEMPLATE = """\
# The logs this witness cosigns, one per line, as in a C2SP tlog-policy file:
#   log <the log's verifier key (vkey)>
# The log's origin is the key's name. List a log twice to trust two keys (a rotation).
# For a fairdeck dealer, `fairdeck key --data DIR` prints its vkey.
"""

EPILOG = f"""\
A witness cosigns a transparency log's checkpoint only when it is consistent
with the last checkpoint of that log it cosigned (C2SP tlog-witness), so a log
cannot show two different trees to two audiences and get both cosigned.

  fairdeck witness init --dir w1 --name witness.example/w1   # key + state; prints the vkey
  echo "log $(fairdeck key --data fairdeck-data)" >> w1/{CONFIG_NAME}
  fairdeck witness serve --dir w1 --listen 127.0.0.1:7380

Then give the dealer `--witness http://127.0.0.1:7380=VKEY`, and auditors
`--witness w1=VKEY`. Endpoints: POST /add-checkpoint, GET /<origin sha256>/checkpoint,
GET /healthz, GET /metrics. See docs/witness.md.
"""


def _refuse(command: str, message: str) -> int:
    print(f"fairdeck witness {command}: {' '.join(message.split())}", file=sys.stderr)
    return 2


def load_logs(path: Path) -> dict[str, list[Verifier]]:
    """The ``log <vkey>`` lines of the config file, by origin; StartupRefused names the bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StartupRefused(
            f"no log list at {path}: create it with one `log VKEY` line per log (see --help)"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise StartupRefused(f"log list {path} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    logs: dict[str, list[Verifier]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip(" \t")
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] != "log" or len(words) < 2:
            raise StartupRefused(f"{path}:{number}: want `log VKEY`, got {line[:60]!r}")
        try:
            verifier = Verifier.parse(words[1])
        except NoteError as e:
            raise StartupRefused(f"{path}:{number}: {e}") from None
        logs.setdefault(verifier.name, []).append(verifier)
    if not logs:
        raise StartupRefused(f"log list {path} names no log: add a `log VKEY` line per log it witnesses")
    return logs


def load_cosigner(path: Path, directory: Path) -> Cosigner:
    if not path.exists():
        raise StartupRefused(
            f"no witness key at {path}: make a witness with `fairdeck witness init --dir {directory} "
            "--name NAME`, or restore the key from backup"
        )
    text = read_private_text(path, "witness key file", StartupRefused)
    try:
        return Cosigner.parse(text.strip())
    except CosignatureError as e:
        raise StartupRefused(f"witness key file {path}: {e}") from None


def open_state(path: Path, directory: Path) -> WitnessState:
    """The state file, which ``init`` made; never a new one (a new one would forget what was cosigned)."""
    if not path.exists():
        raise StartupRefused(
            f"no witness state at {path} beside its key: restore it from backup (a witness that forgot what "
            "it cosigned could cosign a forked log); `fairdeck witness init` makes a new witness"
        )
    try:
        state = WitnessState(path)
        state.latest("")  # reads the table: a file that is not our state fails here
    except (StateError, sqlite3.Error) as e:
        raise StartupRefused(f"witness state {path} cannot be opened: {e}") from None
    return state


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    key_path, state_path = directory / KEY_NAME, directory / STATE_NAME
    for path in (key_path, state_path):
        if path.exists():
            return _refuse("init", f"{path} exists: a witness is never replaced; use another --dir")
    try:
        cosigner = Cosigner.generate(args.name)
    except CosignatureError as e:
        return _refuse("init", f"--name: {e}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_private_file(key_path, cosigner.to_string() + "\n", create=True)
        WitnessState(state_path).close()
        config = directory / CONFIG_NAME
        if not config.exists():
            config.write_text(CONFIG_TEMPLATE, encoding="utf-8")
    except (OSError, StateError) as e:
        return _refuse("init", f"{directory}: {getattr(e, 'strerror', None) or e}")
    print(f"created witness key {key_path} and state {state_path}; its verifier key:", file=sys.stderr)
    print(cosigner.verifier.to_string())
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    try:
        print(load_cosigner(directory / KEY_NAME, directory).verifier.to_string())
    except StartupRefused as e:
        return _refuse("key", str(e))
    return 0


def _listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:  # not "²"
        raise StartupRefused(f"--listen {text!r}: want HOST:PORT, for example {DEFAULT_LISTEN}")
    return host.strip("[]") or "127.0.0.1", int(port)


def cmd_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    directory = Path(args.dir)
    config = Path(args.config) if args.config else directory / CONFIG_NAME
    try:
        if not directory.is_dir():
            raise StartupRefused(
                f"no witness dir {directory}: make one with "
                f"`fairdeck witness init --dir {directory} --name NAME`"
            )
        cosigner = load_cosigner(directory / KEY_NAME, directory)
        lock = DataDirLock.acquire(directory, holder="witness", option="--dir")
        state = open_state(directory / STATE_NAME, directory)
        logs = load_logs(config)
        address = _listen_address(args.listen)
        metrics = WitnessMetrics()
        for latest in state.origins():
            metrics.cosigned(latest)
        witness = Witness(cosigner, logs, state, on_cosigned=metrics.cosigned)
        try:
            server = WitnessHTTPServer(address, witness, metrics)
        except OSError as e:
            raise StartupRefused(
                f"--listen {args.listen}: cannot listen there ({e.strerror or e}); pick another --listen"
            ) from None
    except StartupRefused as e:
        return _refuse("serve", str(e))

    def _stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    host, port = str(server.server_address[0]), server.port
    print(
        f"fairdeck witness listening on {host}:{port} ({cosigner.verifier.to_string()}; "
        f"{len(logs)} log{'s' if len(logs) != 1 else ''})",
        flush=True,
    )
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        state.close()
        lock.release()
    print("fairdeck witness stopped", flush=True)
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    witness = sub.add_parser(
        "witness",
        help="run a C2SP transparency-log witness (tlog-witness add-checkpoint, cosignature/v1)",
        description="A witness for any C2SP transparency log: it cosigns checkpoints consistent with "
        "what it cosigned before.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = witness.add_subparsers(dest="witness_command", metavar="{init,key,serve}", required=True)

    init = actions.add_parser("init", help="make a new witness: its key and its state; replaces nothing")
    init.add_argument("--dir", required=True, metavar="DIR", help="the witness's directory")
    init.add_argument("--name", required=True, help="the witness's name, e.g. witness.example.com/w1")
    init.set_defaults(handler=cmd_init)

    key = actions.add_parser("key", help="print the witness's verifier key (vkey)")
    key.add_argument("--dir", required=True, metavar="DIR", help="the witness's directory")
    key.set_defaults(handler=cmd_key)

    serve = actions.add_parser("serve", help="serve add-checkpoint over HTTP", epilog=EPILOG)
    serve.formatter_class = argparse.RawDescriptionHelpFormatter
    serve.add_argument("--dir", required=True, metavar="DIR", help="the witness's directory")
    serve.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help="default %(default)s")
    serve.add_argument(
        "--config", default=None, metavar="FILE", help=f"the log list (default DIR/{CONFIG_NAME})"
    )
    serve.set_defaults(handler=cmd_serve)
