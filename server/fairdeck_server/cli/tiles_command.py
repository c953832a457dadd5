"""``fairdeck tiles``: publish a dealer's log as C2SP tlog-tiles in a directory.

It reads the store read-only, as ``fairdeck audit --data/--db`` does, and writes the latest
signed checkpoint's tree with ``fairdeck.log.tile_writer.TileWriter``, with the partial tiles of
every stored checkpoint's size (tlog-tiles requires them). Run again later, it adds only what is
new; tiles are immutable and every file is written atomically, the checkpoint last, so a static
web server or CDN can serve the directory while the command runs. ``fairdeck serve --tiles``
keeps such a directory up to date live (fairdeck_server.publishing.tile_publishing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fairdeck.cli.log_keys import add_witness_arguments, witness_policy
from fairdeck.log.audit import LogUnreadable
from fairdeck.log.checkpoint import Checkpoint, CheckpointError
from fairdeck.log.cosignature import CosignatureError, WitnessPolicy
from fairdeck.log.rotation import ROTATIONS_FILE, is_rotation, rotations_file
from fairdeck.log.tile_writer import TileDir, TileWriter
from fairdeck.log.tiles import TileError
from fairdeck_server.cli.audit_sources import data_log, database_log

EPILOG = """\
Serve the directory with a web server that follows tlog-tiles (deploy/nginx has nginx's rules:
the checkpoint as text/plain; charset=utf-8, full tiles immutable), then:

  fairdeck audit --tiles https://log.example.com/fairdeck --key @log.pub

`python -m http.server --directory OUT` does for a quick local look, but serves the checkpoint
as application/octet-stream, which tlog-tiles does not allow. `fairdeck serve --tiles DIR` keeps
such a directory up to date as the dealer signs, with no export to run.

Paths follow https://c2sp.org/tlog-tiles: checkpoint, tile/<L>/<N>[.p/<W>] and
tile/entries/<N>[.p/<W>], with the partial tiles of every stored checkpoint's size. The checkpoint
carries whatever cosignatures the dealer has stored with it (docs/witness.md); with --witness or
--policy, the latest checkpoint those witnesses cosigned. See docs/log-format.md, "Tiles".
"""


def _refuse(message: str) -> int:
    print(f"fairdeck tiles: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _meets(policy: WitnessPolicy, note: bytes) -> bool:
    try:
        return policy.check(note).ok
    except CosignatureError:
        return False


def _size(note: bytes) -> int:
    """A stored checkpoint's tree size (its second line); 0 if unreadable (no partial tiles then)."""
    line = note.split(b"\n", 2)[1:2]
    return int(line[0]) if line and line[0].isdigit() else 0


def cmd_tiles(args: argparse.Namespace) -> int:
    try:
        _, notes, entries = data_log(args.data) if args.data else database_log(args.db)
    except (LogUnreadable, ValueError) as e:
        return _refuse(str(e))
    rotations = [n for n in notes if is_rotation(n)]
    notes = [n for n in notes if not is_rotation(n)]
    if not notes:
        return _refuse("the log has no signed checkpoint yet: start the dealer once, then export")
    try:
        policy = witness_policy(args)
    except CosignatureError as e:
        return _refuse(f"bad --policy or --witness: {e}")
    if policy is None:
        note = notes[-1]
    else:  # the latest checkpoint the policy's witnesses cosigned: what a policy's auditor accepts
        final = [n for n in notes if _meets(policy, n)]
        if not final:
            return _refuse(
                "no stored checkpoint has the cosignatures --witness asks for yet; try again later"
            )
        note = final[-1]
    text = note.decode("utf-8", "replace")
    try:
        checkpoint = Checkpoint.parse(text[: text.rfind("\n\n") + 1])
    except CheckpointError as e:
        return _refuse(f"the latest stored checkpoint does not parse: {e}")
    out = Path(args.out)
    try:
        if rotations:  # before the checkpoint: a reader that sees the new key's checkpoint finds them
            TileDir(out).replace(ROTATIONS_FILE, rotations_file(rotations))
        report = TileWriter(out).write(
            entries, checkpoint.size, checkpoint.origin, checkpoint.root, note, map(_size, notes)
        )
    except (TileError, LogUnreadable) as e:
        return _refuse(str(e))
    except OSError as e:
        return _refuse(f"--out {out}: {e.strerror or e}")
    print(
        f"tiles of {checkpoint.origin} at tree size {checkpoint.size:,} in {out}: "
        f"{report.written} files written, {report.kept} already there"
    )
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    tiles = sub.add_parser(
        "tiles",
        help="publish the log as C2SP tlog-tiles (static files) in a directory",
        description="Write the dealer's log, up to its latest signed checkpoint, as C2SP tlog-tiles. "
        "Reads the store read-only; adds only what is new; never overwrites a tile.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = tiles.add_mutually_exclusive_group(required=True)
    where.add_argument("--data", metavar="DIR", help="a dealer's data dir (SQLite), read-only")
    where.add_argument("--db", metavar="URL", help="the replicas' postgresql:// database, read-only")
    tiles.add_argument("--out", required=True, metavar="DIR", help="the directory to write (and serve)")
    add_witness_arguments(tiles)
    tiles.set_defaults(handler=cmd_tiles)
