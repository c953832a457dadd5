"""``fairdeck verifier-page --out DIR``: write the browser verifier page, one static HTML file.

The page (built from ``client/web``, docs/hand-proof.md) checks a hand proof or a transcript in the
player's browser, with no server behind it and no network use. The package ships the built copy,
so a Python-only user gets it with ``pip install``. ``--key`` pins the log's verifier keys into the
copy written (every key given: after a rotation, the current and the retired ones), and
``--codealer-key`` the co-dealers' identity keys (co-dealt hands, format 4), so that an operator
can host a page that opens with its keys filled in (a player can still replace them).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from fairdeck.cli.log_keys import verifiers
from fairdeck.log.note import NoteError

PAGE_NAME = "fairdeck-verifier.html"
_KEY_SLOT = '<meta name="fairdeck-log-key" content="">'
_CODEALER_SLOT = '<meta name="fairdeck-codealer-key" content="">'


def page_html(keys: Sequence[str] = (), codealer_keys: Sequence[str] = ()) -> str:
    """The page as shipped, with ``keys`` (log verifier keys, already checked) and ``codealer_keys``
    (co-dealer identity keys, 64 lower-case hex digits each, holder order) pinned in it, separated
    by spaces (the page puts each on its own line of its key box)."""
    text = resources.files("fairdeck").joinpath("web/verifier.html").read_text(encoding="utf-8")
    for slot, pinned in ((_KEY_SLOT, keys), (_CODEALER_SLOT, codealer_keys)):
        if not pinned:
            continue
        if text.count(slot) != 1:  # pragma: no cover - the built page always has one
            raise RuntimeError("the packaged verifier page has no key slot")
        content = html.escape(" ".join(pinned), quote=True)
        text = text.replace(slot, slot.replace('content=""', f'content="{content}"'))
    return text


def codealer_keys_of(given: Sequence[str]) -> list[str]:
    """Each ``--codealer-key`` (64 hex digits, or @FILE with one a line): lower-case hex, or ValueError."""
    keys: list[str] = []
    for item in given:
        if item.startswith("@"):
            with open(item[1:], encoding="utf-8") as f:
                words = [w for line in f if not line.lstrip().startswith("#") for w in line.split()]
        else:
            words = [item]
        for word in words:
            if len(word) != 64 or any(c not in "0123456789abcdefABCDEF" for c in word):
                shown = word if len(word) <= 20 else word[:20] + "..."
                raise ValueError(f"{shown!r} is not a co-dealer identity key: want 64 hex digits")
            keys.append(word.lower())
    return keys


def cmd_verifier_page(args: argparse.Namespace) -> int:
    keys: list[str] = []
    if args.key:
        try:
            keys = list(dict.fromkeys(v.to_string() for v in verifiers(args.key)))
        except (OSError, NoteError) as e:
            print(
                f"fairdeck verifier-page: --key: {e} (give the log's verifier key, from `fairdeck key`)",
                file=sys.stderr,
            )
            return 2
    try:
        codealers = codealer_keys_of(args.codealer_key)
    except (OSError, ValueError) as e:
        print(
            f"fairdeck verifier-page: --codealer-key: {e} (give each co-dealer's identity key, from its "
            "operator: `fairdeck codealer init` prints it)",
            file=sys.stderr,
        )
        return 2
    text = page_html(keys, codealers)
    out = Path(args.out)
    target = out / PAGE_NAME
    try:
        out.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"fairdeck verifier-page: cannot write {target}: {e.strerror or e}", file=sys.stderr)
        return 2
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    pinned = f", log key{'s' if len(keys) > 1 else ''} {', '.join(keys)} pinned" if keys else ""
    if codealers:
        pinned += f", co-dealer key{'s' if len(codealers) > 1 else ''} {', '.join(codealers)} pinned"
    print(f"wrote {target} ({len(text.encode('utf-8'))} bytes, sha256 {digest}{pinned})")
    print("open it in any browser (from disk or any static host) and drop a hand proof on it")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    page = sub.add_parser(
        "verifier-page",
        help="write the browser verifier page (one HTML file that checks hand proofs offline)",
    )
    page.add_argument(
        "--out", default=".", metavar="DIR", help=f"directory to write {PAGE_NAME} into (default .)"
    )
    page.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY|@FILE",
        help="pin this log verifier key into the page; repeat, or one per line in FILE (after a "
        "rotation, every key: a proof signed by any of them verifies)",
    )
    page.add_argument(
        "--codealer-key",
        action="append",
        default=[],
        metavar="HEX|@FILE",
        help="pin a co-dealer's identity key into the page (co-dealt hand proofs); repeat in holder "
        "order, or one per line in FILE",
    )
    page.set_defaults(handler=cmd_verifier_page)
