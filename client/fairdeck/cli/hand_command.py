"""``fairdeck hand get``: a closed hand's one-file proof (docs/hand-proof.md), for the player.

The proof is fetched from a live dealer's AuditService (and GetHand on the same channel), checked
against the log key the user gives (never one read from the dealer), and written as JSON. It is
enough for ``fairdeck verify FILE --key KEY`` or the browser verifier, offline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import grpc

from fairdeck.cli import cli_credentials, numbers
from fairdeck.cli.log_keys import add_witness_arguments, verifiers, witness_policy
from fairdeck.client.audit_client import AuditClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.core.errors import VerificationError
from fairdeck.log.cosignature import CosignatureError
from fairdeck.log.note import NoteError


def cmd_hand_get(args: argparse.Namespace) -> int:
    try:
        keys = verifiers(args.key)
        policy = witness_policy(args)
        creds = cli_credentials.from_args(args)
    except (OSError, NoteError, CosignatureError, ValueError) as e:
        print(f"fairdeck hand get: {e}", file=sys.stderr)
        return 2
    try:
        with AuditClient(
            args.target,
            verifier=keys,
            witness_policy=policy,
            credentials=creds.channel,
            api_token=creds.api_token,
            insecure=creds.insecure,
            timeout=args.timeout,
        ) as log:
            proof = log.hand_proof(args.hand_id)
    except VerificationError as e:
        if e.step == "format":  # not closed yet: nothing to prove, not a finding against the dealer
            print(f"fairdeck hand get: {e.detail}", file=sys.stderr)
            return 2
        print(f"fairdeck hand get: the dealer's proof FAILED at step {e.step}: {e.detail}", file=sys.stderr)
        return 1
    except (FairdeckError, grpc.RpcError, ValueError) as e:
        print(f"fairdeck hand get: {e}", file=sys.stderr)
        return 2
    text = (proof if args.format is None else proof.as_format(args.format)).to_json()
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as e:
            print(f"fairdeck hand get: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"hand {args.hand_id}: proof written to {args.out} (checked against the log key given)")
    else:
        sys.stdout.write(text)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hand = sub.add_parser("hand", help="a hand's one-file proof, for a player to check offline")
    actions = hand.add_subparsers(dest="hand_command", metavar="{get}", required=True)
    get = actions.add_parser(
        "get",
        help="fetch a closed hand's proof (transcript, log entries, inclusion proofs, signed checkpoint)",
        description="Fetch a closed hand's one-file proof from a dealer, check it against --key, and "
        "write it (docs/hand-proof.md). `fairdeck verify FILE --key KEY` checks it again, offline.",
    )
    get.add_argument("hand_id", metavar="HAND_ID")
    get.add_argument("--target", default="127.0.0.1:50051", metavar="HOST:PORT", help="the dealer")
    get.add_argument("--key", required=True, action="append", metavar="VKEY|@FILE", help="the log's key")
    get.add_argument("--out", metavar="FILE", help="write the proof here (default: standard output)")
    get.add_argument(
        "--timeout", type=numbers.seconds(numbers.DAY), default=30.0, help="per-call deadline, seconds"
    )
    get.add_argument(
        "--format",
        type=int,
        choices=(1, 2, 3),
        default=None,
        help="1: receipts as JSON objects, read by every verifier; 2: receipts as C2SP tlog-proof "
        "texts; 3: as 2, with the log key rotation statements that lead to the checkpoint's key. "
        "Default: 3 after a rotation (a player with an older key follows them), else 1 "
        "(docs/hand-proof.md)",
    )
    add_witness_arguments(get)
    cli_credentials.add_arguments(get.add_argument_group("TLS and credentials"))
    get.set_defaults(handler=cmd_hand_get)
