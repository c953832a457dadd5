"""The ``fairdeck`` commands ``replay`` and ``verify``. The command line around them (``main``,
``build_parser``, the table of every command) is ``dispatch``'s, named here too for the callers
that import it from here.

Exit status: 0 when the command did what it says, 1 when a verification
failed, 2 for bad usage or input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fairdeck.cli import numbers
from fairdeck.cli.dispatch import build_parser, main
from fairdeck.core.commitment import commit
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.errors import InvalidInput, VerificationError
from fairdeck.core.seeds import normalize_client_seed
from fairdeck.core.strictjson import MAX_TEXT_BYTES
from fairdeck.core.transcript import Transcript
from fairdeck.core.verify import verify
from fairdeck.core.versions import CURRENT_VERSION, SUPPORTED_VERSIONS
from fairdeck.log import handproof
from fairdeck.log.note import NoteError, Verifier, open_note
from fairdeck.log.rotation import check_chain, followed_keys, reached_from

__all__ = ["build_parser", "main", "register"]  # main and build_parser: the dispatcher's, named here too


def _hex_seed(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not hex") from None


def _text_seed(text: str) -> bytes:
    try:
        return normalize_client_seed(text)
    except InvalidInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_replay(args: argparse.Namespace) -> int:
    """Re-derive a revealed hand's deck and print it."""
    seeds = args.client_seeds or []
    cards = derive_deck(args.deck, args.hand_id, args.server_seed, seeds, version=args.version)
    spec = DeckSpec.parse(args.deck)
    codes = [spec.card_for_id(c).code for c in cards]
    if args.json:  # a full transcript: `fairdeck replay --json ... | fairdeck verify -` holds
        transcript = Transcript(
            version=args.version,
            deck=spec.name,
            hand_id=args.hand_id,
            commitment=commit(spec.name, args.hand_id, args.server_seed, version=args.version),
            server_seed=args.server_seed,
            client_seeds=tuple(seeds),
            cards=cards,
        )
        print(transcript.to_json(), end="")
    else:
        print(" ".join(codes))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify a transcript or a hand proof: exit 0 when it holds, 1 with the failed step."""
    from fairdeck.client.local_files import LocalFileError, read_local_head  # loads the SDK: grpc

    path: str = args.transcript
    try:
        # Bytes, not text: what the bytes are (UTF-8 or not, JSON or not) is the spec's
        # step "malformed" (section 7.1), a finding about the transcript, exit 1.
        # Only a file that cannot be read at all is exit 2. At most one byte past the
        # limit is read, so a huge file is refused without being loaded.
        limit = max(MAX_TEXT_BYTES, handproof.MAX_BYTES)
        # A FIFO or a device is refused, not waited on or read without end: - reads a pipe.
        text = sys.stdin.buffer.read(limit + 1) if path == "-" else read_local_head(path, limit)
    except OSError as e:
        hint = "; give - to read standard input" if isinstance(e, LocalFileError) else ""
        print(f"fairdeck verify: cannot read {path}: {e.strerror or e}{hint}", file=sys.stderr)
        return 2
    if handproof.TYPE.encode() in text[: 64 * 1024]:
        # Read once, strictly; the parsed "format" says which proof it is (4: a co-dealt hand). A
        # text that is not a JSON value fails at step "format" whatever keys are given.
        try:
            value = handproof.read_value(text)
        except VerificationError as e:
            print(f"FAILED at step {e.step}: {e.detail}")
            return 1
        if handproof.format_of(value) in handproof.CODEAL_FORMATS:
            return _verify_codeal_proof(args, value)
        return _verify_hand_proof(args, value)
    # A transcript has no log step, so keys and witnesses play no part; but a key, a witness or a
    # policy file given that cannot be read is the user's mistake, said as for a hand proof.
    refused = _unreadable_log_options(args)
    if refused is not None:
        print(f"fairdeck verify: {refused}", file=sys.stderr)
        return 2
    try:
        transcript = Transcript.from_json(text)
        verify(transcript)
    except VerificationError as e:
        print(f"FAILED at step {e.step}: {e.detail}")
        return 1
    print(
        f"OK: hand {transcript.hand_id} verified "
        f"({transcript.deck}, {len(transcript.cards)} cards, {transcript.version})"
    )
    return 0


def _unreadable_log_options(args: argparse.Namespace) -> str | None:
    """Why the --key, --witness or --policy given cannot be read (None: they can, or none was)."""
    from fairdeck.cli.log_keys import verifiers, witness_policy

    try:
        if args.key:
            verifiers(args.key)
        witness_policy(args)
    except (OSError, ValueError, NoteError) as e:
        return str(e)
    return None


def _verify_hand_proof(args: argparse.Namespace, value: Any) -> int:
    """A hand proof (docs/hand-proof.md): every step, against the key the user gives."""
    from fairdeck.cli.log_keys import verifiers, witness_policy

    if not args.key:
        print(
            "fairdeck verify: a hand proof is checked against the log's key: give --key "
            "(from the operator, `fairdeck key`), never the one written in the file",
            file=sys.stderr,
        )
        return 2
    try:
        keys = verifiers(args.key)
        policy = witness_policy(args)
    except (OSError, ValueError, NoteError) as e:  # NoteError: a bad --key or --witness
        print(f"fairdeck verify: {e}", file=sys.stderr)
        return 2
    try:
        proof = handproof.HandProof.from_value(value)
        checkpoint = proof.verify(keys, policy)  # every key given: a list spans the log's rotations
    except VerificationError as e:
        print(f"FAILED at step {e.step}: {e.detail}")
        return 1
    t = proof.transcript
    print(
        f"OK: hand {t.hand_id} verified ({t.deck}, {len(proof.dealt)} of {len(t.cards)} cards dealt, "
        f"in the log at tree size {checkpoint.size})"
    )
    followed = _followed_rotations(proof, keys)
    if followed:
        print(f"  signed by {followed}")
    return 0


def _verify_codeal_proof(args: argparse.Namespace, value: Any) -> int:
    """A co-dealt hand proof (docs/hand-proof.md, formats 4 and 5), against the co-dealer keys the user
    pins and, for format 5's receipts, the log keys the user gives."""
    from fairdeck.cli.log_keys import verifiers, witness_policy
    from fairdeck.codeal.handfile import CodealHandProof  # loads libsodium: co-dealt proofs only
    from fairdeck.codeal.logged_proof import LoggedCodealProof

    try:
        keys = [bytes.fromhex(k) for k in args.codealer_key]
    except ValueError:
        keys = []
    if not keys or any(len(k) != 32 for k in keys):
        print(
            "fairdeck verify: a co-dealt hand proof is checked against each co-dealer's identity key: give "
            "--codealer-key HEX (64 hex digits, from its operator), never the one written in the file",
            file=sys.stderr,
        )
        return 2
    logged = handproof.format_of(value) == handproof.LOGGED_CODEAL_FORMAT
    if logged and not args.key:
        print(
            "fairdeck verify: a co-dealt hand proof of format 5 carries log receipts, checked against the "
            "log's key: give --key (from the operator, `fairdeck key`), never the one written in the file",
            file=sys.stderr,
        )
        return 2
    if logged:
        try:
            log_keys, policy = verifiers(args.key), witness_policy(args)
        except (OSError, ValueError, NoteError) as e:  # NoteError: a bad --key or --witness
            print(f"fairdeck verify: {e}", file=sys.stderr)
            return 2
    where = ""
    try:
        if logged:
            full = LoggedCodealProof.from_value(value)
            proof = full.proof
            where = f", in the log at tree size {full.verify(keys, log_keys, policy).size}"
        else:
            proof = CodealHandProof.from_value(value)
            proof.verify(keys)
    except VerificationError as e:
        print(f"FAILED at step {e.step}: {e.detail}")
        return 1
    hand = proof.hand
    print(
        f"OK: co-dealt hand {hand.hand_id} verified ({hand.deck}, {len(hand.dealt)} cards dealt, "
        f"{len(hand.keys)} key holders, seeds {'revealed' if hand.seeds else 'not yet revealed'}{where})"
    )
    return 0


def _followed_rotations(proof: handproof.HandProof, given: list[Verifier]) -> str | None:
    """When a key the file's rotation statements led to signed the checkpoint (the proof has been
    verified): which key, and from which key given, in the page's words; else None."""
    chain = check_chain(proof.key_rotations, proof.reveal.signed_checkpoint)
    via = reached_from(given, chain)
    keys = followed_keys(given, chain)
    sigs = open_note(proof.reveal.signed_checkpoint, keys).sigs
    signers = [k for sig in sigs for k in keys if (k.name, k.key_id) == (sig.name, sig.key_id)]
    if not any(k in via for k in signers):
        return None

    def named(key: Verifier) -> str:
        if len(given) < 2:
            return f"the log key {_key_name(key)}"
        n = given.index(key) + 1
        suffix = "th" if 10 < n % 100 < 14 or n % 10 > 3 else ["th", "st", "nd", "rd"][n % 10]
        return f"the log key {_key_name(key)} (the {n}{suffix} of the {len(given)} keys given)"

    words = []
    for key in signers:
        if key not in via:
            words.append(named(key))
            continue
        start, count = via[key]
        s = "s" if count > 1 else ""
        words.append(
            f"the log key {_key_name(key)}, which {count} key rotation statement{s} in the file "
            f"lead{'' if s else 's'} to from {named(start)}"
        )
    return " and ".join(words)


def _key_name(v: Verifier) -> str:
    return f"{v.name}+{v.key_id:08x}"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add replay and verify to the ``fairdeck`` command line."""
    replay = sub.add_parser("replay", help="re-derive a deck from revealed seeds")
    replay.add_argument("--deck", default="standard", choices=SPEC_NAMES, help="deck spec (default standard)")
    replay.add_argument("--hand-id", required=True, help="the hand's id")
    replay.add_argument("--server-seed", required=True, type=_hex_seed, help="revealed server seed, hex")
    replay.add_argument(
        "--client-seed",
        dest="client_seeds",
        action="append",
        type=_text_seed,
        metavar="TEXT",
        help="a client seed as text (NFC, UTF-8); repeat in order",
    )
    replay.add_argument(
        "--client-seed-hex",
        dest="client_seeds",
        action="append",
        type=_hex_seed,
        metavar="HEX",
        help="a client seed as hex bytes; repeat in order",
    )
    replay.add_argument("--version", default=CURRENT_VERSION, choices=SUPPORTED_VERSIONS)
    replay.add_argument("--json", action="store_true", help="print JSON instead of card codes")
    replay.set_defaults(handler=cmd_replay)

    check = sub.add_parser("verify", help="verify a revealed hand's transcript, or a hand proof (JSON)")
    check.add_argument("transcript", metavar="FILE", help="transcript or hand proof, or - for standard input")
    check.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY|@FILE",
        help="the log's verifier key (needed for a hand proof, which is checked against it); repeat, or "
        "one per line in FILE: after a rotation, a proof signed by any of them verifies",
    )
    check.add_argument(
        "--witness", action="append", default=[], metavar="NAME=KEY", help="a witness (repeat)"
    )
    check.add_argument("--witness-threshold", type=numbers.whole(0, 256), default=None, metavar="K")
    check.add_argument(
        "--policy",
        metavar="FILE",
        help="a C2SP tlog-policy file (witness, group and quorum lines; - reads stdin) instead of "
        "--witness: the witnesses and the quorum the checkpoint needs",
    )
    check.add_argument(
        "--codealer-key",
        action="append",
        default=[],
        metavar="HEX",
        help="a co-dealer's identity key (co-dealt hand proofs; repeat, holder order)",
    )
    check.set_defaults(handler=cmd_verify)


if __name__ == "__main__":
    sys.exit(main())
