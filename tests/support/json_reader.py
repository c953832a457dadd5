"""The JSON text of a transcript (docs/fairness-spec.md section 7.1), read by hand so that
Python's json module, which the package uses, is not what both sides agree on: RFC 8259
strictly, at most 1 MiB of UTF-8 without a byte order mark, no duplicate names, at most 32
levels deep, and numbers kept as text (``Num``), never converted. Part of the independent implementation of
fairdeck-v1 (spec_reference.py); it imports nothing from ``fairdeck``.
"""

from __future__ import annotations

import re
from typing import Any

MAX_TEXT_BYTES = 1048576
MAX_DEPTH = 32


class TextError(ValueError):
    pass


class Num:
    """A JSON number; never converted."""

    def __init__(self, text: str) -> None:
        self.text = text


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WS = " \t\n\r"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def parse_text(raw: bytes) -> Any:
    """The JSON value of raw bytes under section 7.1, or TextError."""
    if len(raw) > MAX_TEXT_BYTES:
        raise TextError("too large")
    if raw[:3] == b"\xef\xbb\xbf":
        raise TextError("byte order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TextError("not UTF-8") from None
    value, at = _value(text, _skip(text, 0), 0)
    if _skip(text, at) != len(text):
        raise TextError("text after the value")
    return value


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WS:
        at += 1
    return at


def _value(text: str, at: int, depth: int) -> tuple[Any, int]:
    if at >= len(text):
        raise TextError("end of text")
    c = text[at]
    if c in "[{":
        if depth + 1 > MAX_DEPTH:
            raise TextError("too deep")
        return (_object if c == "{" else _array)(text, at + 1, depth + 1)
    if c == '"':
        return _string(text, at + 1)
    for word, meaning in (("true", True), ("false", False), ("null", None)):
        if text.startswith(word, at):
            return meaning, at + len(word)
    m = _NUMBER.match(text, at)
    if m is None:
        raise TextError("no value")
    return Num(m.group()), m.end()


def _array(text: str, at: int, depth: int) -> tuple[Any, int]:
    out: list[Any] = []
    at = _skip(text, at)
    if text[at : at + 1] == "]":
        return out, at + 1
    while True:
        item, at = _value(text, _skip(text, at), depth)
        out.append(item)
        at = _skip(text, at)
        if text[at : at + 1] == "]":
            return out, at + 1
        if text[at : at + 1] != ",":
            raise TextError("no comma")
        at += 1


def _object(text: str, at: int, depth: int) -> tuple[Any, int]:
    out: dict[str, Any] = {}
    at = _skip(text, at)
    if text[at : at + 1] == "}":
        return out, at + 1
    while True:
        if text[at : at + 1] != '"':
            raise TextError("name is not a string")
        name, at = _string(text, at + 1)
        if name in out:
            raise TextError("duplicate name")
        at = _skip(text, at)
        if text[at : at + 1] != ":":
            raise TextError("no colon")
        out[name], at = _value(text, _skip(text, at + 1), depth)
        at = _skip(text, at)
        if text[at : at + 1] == "}":
            return out, at + 1
        if text[at : at + 1] != ",":
            raise TextError("no comma")
        at = _skip(text, at + 1)


def _string(text: str, at: int) -> tuple[str, int]:
    out = []
    while True:
        if at >= len(text):
            raise TextError("unterminated string")
        c = text[at]
        if c == '"':
            return "".join(out), at + 1
        if ord(c) < 0x20:
            raise TextError("control character in a string")
        if c != "\\":
            out.append(c)
            at += 1
            continue
        e = text[at + 1 : at + 2]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            at += 2
            continue
        if e != "u":
            raise TextError("bad escape")
        unit, at = _hex4(text, at + 2)
        if 0xDC00 <= unit <= 0xDFFF:
            raise TextError("lone low surrogate")
        if 0xD800 <= unit <= 0xDBFF:
            if text[at : at + 2] != "\\u":
                raise TextError("lone high surrogate")
            low, at = _hex4(text, at + 2)
            if not 0xDC00 <= low <= 0xDFFF:
                raise TextError("lone high surrogate")
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
        out.append(chr(unit))


def _hex4(text: str, at: int) -> tuple[int, int]:
    digits = text[at : at + 4]
    if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
        raise TextError("bad \\u escape")
    return int(digits, 16), at + 4
