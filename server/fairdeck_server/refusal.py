"""The one error type for a dealer (or an admin command) that must not start.

Raised wherever a start-up check fails: a missing or wrong key, a missing,
truncated or damaged database, a data dir another dealer holds, a port in
use, a driver not installed. ``commands.py`` turns it into one line on
stderr and exit status 2, never a traceback. The message names the file or
option at fault and what to do; it never contains key material.

A leaf module (no imports from the package), so storage engines can raise it.
"""

from __future__ import annotations


class StartupRefused(Exception):
    """The dealer refuses to start; the message is the one line the operator sees.

    Text from elsewhere in it (SQLite's quick_check report, an OS error) may hold
    newlines; they are folded here, so the message is one line whoever built it.

    >>> str(StartupRefused("damaged (*** in database main ***\\nPage 22: error)"))
    'damaged (*** in database main *** Page 22: error)'
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
