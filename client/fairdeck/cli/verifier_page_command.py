"""``fairdeck verifier-page --out DIR``: write the browser verifier page, one static HTML file.

The page (built from ``client/web``, docs/hand-proof.md) checks a hand proof or a transcript in the
player's browser, with no server behind it and no network use. The package ships the built copy,
so a Python-only user gets it with ``pip install``. ``--key`` pins the log's verifier key into the
copy written, so that an operator can host a page that opens with its key filled in (a player can
still replace it).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import sys
from importlib import resources
from pathlib import Path

from fairdeck.cli.audit_command import _verifiers
from fairdeck.log.note import NoteError

PAGE_NAME = "fairdeck-verifier.html"
_KEY_SLOT = '<meta name="fairdeck-log-key" content="">'


def page_html(key: str | None = None) -> str:
    """The page as shipped, with ``key`` (a log verifier key, already checked) pinned in it."""
    text = resources.files("fairdeck").joinpath("web/verifier.html").read_text(encoding="utf-8")
    if key is None:
        return text
    if text.count(_KEY_SLOT) != 1:  # pragma: no cover - the built page always has one
        raise RuntimeError("the packaged verifier page has no key slot")
    return text.replace(_KEY_SLOT, f'<meta name="fairdeck-log-key" content="{html.escape(key, quote=True)}">')


def cmd_verifier_page(args: argparse.Namespace) -> int:
    key = None
    if args.key is not None:
        try:
            key = _verifiers([args.key])[0].to_string()
        except (OSError, NoteError) as e:
            print(
                f"fairdeck verifier-page: --key: {e} (give the log's verifier key, from `fairdeck key`)",
                file=sys.stderr,
            )
            return 2
    text = page_html(key)
    out = Path(args.out)
    target = out / PAGE_NAME
    try:
        out.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"fairdeck verifier-page: cannot write {target}: {e.strerror or e}", file=sys.stderr)
        return 2
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    pinned = f", log key {key} pinned" if key else ""
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
        "--key", default=None, metavar="VKEY|@FILE", help="pin this log verifier key into the page"
    )
    page.set_defaults(handler=cmd_verifier_page)
