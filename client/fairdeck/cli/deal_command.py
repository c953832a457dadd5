"""``fairdeck deal``: a demo Texas hold'em hand dealt by a running dealer.

Opens a hand (its commitment is printed before any card is seen), shuffles
with a seed of this client's own, made after the commitment, deals hole cards
round by round, burns and deals the board through draws, closes the hand and
verifies the transcript locally against the commitment printed first.

``--out FILE`` then writes the hand's one-file proof (docs/hand-proof.md), and
``--json`` prints the hand as JSON. TLS and ``--token``/``$FAIRDECK_TOKEN`` are
the flags ``audit`` has.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fairdeck.cli import cli_credentials, numbers
from fairdeck.cli.log_keys import verifiers
from fairdeck.client import AuditClient, DealerClient, Hand
from fairdeck.client.exceptions import FairdeckError
from fairdeck.core.cards import Card
from fairdeck.core.errors import VerificationError
from fairdeck.log.note import NoteError
from fairdeck.v1 import audit_pb2, audit_pb2_grpc


def _show(cards: Sequence[Card]) -> str:
    return " ".join(c.pretty() for c in cards)


def deal_holdem(
    dealer: DealerClient, players: int, client_seed: str | None, out: Callable[[str], None] = print
) -> tuple[int, Hand, list[list[Card]], dict[str, tuple[Card, ...]]]:
    opened = dealer.open_hand("standard")
    out(f"hand {opened.hand_id} ({opened.deck}, {opened.version})")
    out(f"commitment  {opened.commitment.hex()}  (log index {opened.commit_receipt.index})")
    seed = client_seed or secrets.token_hex(8)  # made after the commitment was published
    dealer.shuffle(opened.hand_id, [seed])
    out(f"client seed {seed!r}")
    dealt: list[Card] = []  # every card drawn, burns included, to check against the reveal

    def draw(count: int) -> tuple[Card, ...]:
        cards = dealer.draw(opened.hand_id, count).cards
        dealt.extend(cards)
        return cards

    hole: list[list[Card]] = [[] for _ in range(players)]
    for _ in range(2):  # one card at a time around the table, twice
        for seat in range(players):
            hole[seat].extend(draw(1))
    board: dict[str, tuple[Card, ...]] = {}
    for seat, held in enumerate(hole, start=1):
        out(f"seat {seat}: {_show(held)}")
    for name, count in (("flop", 3), ("turn", 1), ("river", 1)):
        draw(1)  # burn
        board[name] = draw(count)
        out(f"{name + ':':6} {_show(board[name])}")
    closed = dealer.close_hand(opened.hand_id)
    assert closed.reveal_receipt is not None
    out(f"closed: server seed {closed.transcript.server_seed.hex() if closed.transcript else '?'}")
    out(f"        revealed at log index {closed.reveal_receipt.index}")
    try:
        closed.verify(commitment=opened.commitment, dealt=dealt)
    except VerificationError as e:
        out(f"NOT VERIFIED: {e}")
        return 1, closed, hole, board
    out(f"verified: the revealed seed opens the commitment and re-derives all {len(dealt)} cards dealt")
    return 0, closed, hole, board


def _unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written as a file (its folder missing or read-only, a folder itself,
    a name the system refuses)."""
    try:
        if path.is_dir():
            return "it is a directory"
        folder = path.parent
        if not folder.is_dir():
            return f"no such directory {folder}"
        if not os.access(path if path.exists() else folder, os.W_OK):
            return "permission denied"
    except OSError as e:  # a name too long, a loop of links: is_dir and exists raise these
        return str(e.strerror or e)
    return None


def cmd_deal(args: argparse.Namespace) -> int:
    if not 2 <= args.players <= 10:
        print("fairdeck deal: --players must be 2..10", file=sys.stderr)
        return 2
    try:
        creds = cli_credentials.from_args(args)
        keys = verifiers(args.key) if args.key else None
    except (OSError, ValueError, NoteError) as e:
        print(f"fairdeck deal: {e}", file=sys.stderr)
        return 2
    if args.out and (why := _unwritable(Path(args.out))):
        # Before the deal: a hand dealt whose proof then has nowhere to go is of no use.
        print(f"fairdeck deal: cannot write --out {args.out}: {why}", file=sys.stderr)
        return 2
    common = {
        "credentials": creds.channel,
        "api_token": creds.api_token,
        "insecure": creds.insecure,
        "timeout": args.timeout,
    }
    try:
        with DealerClient(args.target, **common) as dealer:
            quiet = args.json
            status, closed, hole, board = deal_holdem(
                dealer, args.players, args.client_seed, out=(lambda _: None) if quiet else print
            )
        if args.json:
            assert closed.transcript is not None
            print(json.dumps({
                "hand_id": closed.hand_id,
                "verified": status == 0,
                "seats": [[c.code for c in held] for held in hole],
                "board": {name: [c.code for c in cards] for name, cards in board.items()},
                "transcript": closed.transcript.to_dict(),
            }, indent=2))  # fmt: skip
        if args.out and status == 0:
            if keys is None:  # the dealer's own key: the proof checks the log, and says whose key it used
                with AuditClient(args.target, verifier=_dealer_key(args.target, common), **common) as log:
                    proof = log.hand_proof(closed)
            else:
                with AuditClient(args.target, verifier=keys, **common) as log:
                    proof = log.hand_proof(closed)
            Path(args.out).write_text(proof.to_json(), encoding="utf-8")
            if not args.json:
                print(
                    f"hand proof written to {args.out}: check it with `fairdeck verify {args.out} --key KEY`"
                )
        return status
    except FairdeckError as e:
        print(f"fairdeck deal: {e.code.name}: {e}", file=sys.stderr)
        return 1
    except VerificationError as e:
        print(f"fairdeck deal: the hand's proof FAILED at step {e.step}: {e.detail}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"fairdeck deal: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
        return 2


def _dealer_key(target: str, common: dict[str, object]) -> str:
    """The log key the dealer itself announces (GetPublicKey). Good enough to write a proof; a player
    checks it later against the key the operator publishes, never this one."""
    with DealerClient(target, **common) as client:  # type: ignore[arg-type]
        channel = client._channel
        response = audit_pb2_grpc.AuditServiceStub(channel).GetPublicKey(
            audit_pb2.GetPublicKeyRequest(),
            timeout=client.config.timeout,
            metadata=client.config.call_metadata(),
        )
    return str(response.verifier_key)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    deal = sub.add_parser("deal", help="deal a demo hold'em hand from a running dealer and verify it")
    deal.add_argument("--target", default="127.0.0.1:50051", metavar="HOST:PORT", help="default %(default)s")
    deal.add_argument("--players", type=int, default=2, help="2..10 (default 2)")
    deal.add_argument("--client-seed", default=None, help="your seed (default: random)")
    deal.add_argument(
        "--timeout", type=numbers.seconds(numbers.DAY), default=10.0, help="per-call deadline in seconds"
    )
    deal.add_argument("--json", action="store_true", help="print the hand as JSON")
    deal.add_argument("--out", metavar="FILE", help="write the hand's one-file proof (docs/hand-proof.md)")
    deal.add_argument(
        "--key",
        action="append",
        metavar="VKEY|@FILE",
        help="check the proof against this log key (default: the key the dealer announces)",
    )
    cli_credentials.add_arguments(deal.add_argument_group("TLS and credentials"))
    deal.set_defaults(handler=cmd_deal)
