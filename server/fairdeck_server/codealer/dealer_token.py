"""The dealer's token: the one credential the co-dealer's CoDealerService accepts.

``fairdeck codealer init`` (or ``token``) writes it to ``DIR/dealer.token``, mode 0600; the
co-dealer's operator copies that file to the dealer's host, where ``fairdeck serve
--codealer-token @FILE`` reads it and sends it on every call (``authorization: Bearer ...``).
The co-dealer keeps only its SHA-256 digest in memory and compares digests with
``hmac.compare_digest`` (constant time, whatever is presented). A token is never logged, put in
an error or shown by ``repr``. No grpc here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

TOKEN_NAME = "dealer.token"  # noqa: S105 - a file name, not a secret
PREFIX = "fdcd_"
_SHAPE = re.compile(r"fdcd_[A-Za-z0-9_-]{43}")
SHAPE_HELP = "want the one line `fairdeck codealer token` writes (fdcd_ and 43 characters)"


def new_token() -> str:
    """A fresh token: 256 random bits."""
    return PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def parse_token(text: str) -> str:
    """The token in a token file's text; ValueError (never quoting the text) if it is not one."""
    token = text.strip()
    if not _SHAPE.fullmatch(token):
        raise ValueError(SHAPE_HELP)
    return token


def bearer(header: object) -> str | None:
    """The token of an ``authorization`` value ``Bearer TOKEN``, or None if it is not one."""
    if not isinstance(header, str) or not (header.isascii() and header.isprintable()):
        return None
    if header[:7].lower() != "bearer ":
        return None
    return header[7:].strip(" ")


class TokenCheck:
    """Whether a presented token is the dealer's, in constant time."""

    def __init__(self, token: str) -> None:
        self._digest = hashlib.sha256(token.encode()).digest()

    def __repr__(self) -> str:
        return "TokenCheck(<hidden>)"

    def matches(self, presented: str) -> bool:
        digest = hashlib.sha256(presented.encode("utf-8", "replace")).digest()
        return hmac.compare_digest(digest, self._digest)
