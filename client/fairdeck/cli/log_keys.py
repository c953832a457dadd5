"""The log's keys and witness policy as the command line gives them: ``--key`` (a verifier key, or
@FILE of them), ``--policy FILE`` or ``--witness NAME=KEY`` with ``--witness-threshold``. Shared by
``verify``, ``audit``, ``hand``, ``deal``, ``tiles`` and ``verifier-page``; it loads no grpc, so
``fairdeck verify FILE`` runs without it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from fairdeck.cli import numbers
from fairdeck.client.local_files import MAX_BYTES, LocalFileError, read_local
from fairdeck.log.cosignature import CosignatureError, WitnessPolicy
from fairdeck.log.note import NoteError, Verifier
from fairdeck.log.policy import TlogPolicy


def verifiers(values: Sequence[str]) -> list[Verifier]:
    """Each --key: a verifier key, or @FILE with one key per line (blank lines and # comments
    skipped). A file that cannot be read, or holds no key, is named in the NoteError."""
    keys = []
    for text in values:
        if not text.startswith("@"):
            keys.append(Verifier.parse(text.strip()))
            continue
        path = Path(text[1:])
        try:
            data = read_local(path, pipes=True)
        except OSError as e:
            raise NoteError(f"cannot read @{path}: {e.strerror or e}") from None
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise NoteError(f"@{path} is not UTF-8 text: not a file of keys") from None
        found = [(n, k) for n, k in enumerate(map(str.strip, lines), 1) if k and not k.startswith("#")]
        if not found:
            raise NoteError(f"@{path} holds no verifier key")
        for number, key in found:
            try:
                keys.append(Verifier.parse(key))
            except NoteError as e:
                raise NoteError(f"@{path} line {number}: {e}") from None
    if not keys:
        raise NoteError("no verifier key given")
    return keys


def witness_policy(args: argparse.Namespace) -> WitnessPolicy | None:
    """The policy of ``--policy FILE`` (C2SP tlog-policy), or of ``--witness NAME=KEY`` (repeated) and
    ``--witness-threshold K``; None without any."""
    if getattr(args, "policy", None):
        if args.witness or args.witness_threshold is not None:
            raise CosignatureError("give --policy or --witness, not both")
        path = Path(args.policy)
        try:
            stdin = args.policy == "-"
            text = sys.stdin.buffer.read(MAX_BYTES + 1) if stdin else read_local(path, pipes=True)
            if len(text) > MAX_BYTES:
                raise LocalFileError(f"it is larger than {MAX_BYTES} bytes")
        except OSError as e:
            raise CosignatureError(f"cannot read --policy {path}: {e.strerror or e}") from None
        try:
            return TlogPolicy.parse(text).witness_policy()
        except CosignatureError as e:
            raise CosignatureError(f"--policy {path}: {e}") from None
    if not args.witness:
        if args.witness_threshold is not None:
            raise CosignatureError("--witness-threshold needs at least one --witness NAME=KEY")
        return None
    return WitnessPolicy.parse(args.witness, args.witness_threshold)


def add_witness_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("witnesses (docs/witness.md)")
    group.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="NAME=KEY",
        help="a witness whose cosignatures count (repeat): its name in reports, then its vkey",
    )
    group.add_argument(
        "--policy",
        metavar="FILE",
        help="a C2SP tlog-policy file (witness, group and quorum lines; - reads stdin): the witnesses "
        "and the quorum a checkpoint needs, as the public witness network publishes them",
    )
    group.add_argument(
        "--witness-threshold",
        type=numbers.whole(0, 256),
        default=None,
        metavar="K",
        help="cosignatures from distinct --witness keys a checkpoint needs (default: all of them)",
    )
