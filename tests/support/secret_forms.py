"""Every spelling a secret could take in a log line, a file or a memory dump: raw, hex in both
cases, base64 and base64url at each byte alignment, and a Python bytes repr. Shared by the
no-leak test and the dealer-dump search, so both look for the same forms.
"""

from __future__ import annotations

import base64
from collections.abc import Callable


def _b64_cores(data: bytes, alphabet: Callable[[bytes], bytes]) -> list[str]:
    """Substrings of base64 that appear whenever ``data`` is base64-encoded
    inside anything, at each of the three byte alignments."""
    cores = [alphabet(data).decode().rstrip("=")]
    for pad in range(3):
        text = alphabet(b"\0" * pad + data).decode()
        cores.append(text[4:-4])  # drop the groups that mix in neighbouring bytes
    return cores


def forms(secret: bytes | str) -> list[str | bytes]:
    """Every way ``secret`` could show up in a line."""
    raw = secret.encode() if isinstance(secret, str) else secret
    out: list[str | bytes] = [raw, raw.hex(), raw.hex().upper(), repr(raw)[2:-1]]
    if isinstance(secret, str):
        out.append(secret)
    out += _b64_cores(raw, base64.b64encode) + _b64_cores(raw, base64.urlsafe_b64encode)
    return [f for f in out if len(f) >= 12]
