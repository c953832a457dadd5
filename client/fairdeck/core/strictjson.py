"""Strict JSON text reading for transcripts and receipts (docs/fairness-spec.md section 7.1).

Two conforming verifiers must reach the same verdict on the same bytes, so the text layer leaves
nothing to the JSON library: RFC 8259 JSON in UTF-8 without a byte order mark, at most
``MAX_TEXT_BYTES`` (checked on the raw bytes first) and ``MAX_DEPTH`` deep, no duplicate name, no
lone surrogate, no ``NaN`` or ``Infinity``. Numbers are never converted: each becomes a
``Number`` holding its text, so no number, however long, can fail a conversion. What Python's
``json`` would have let through: docs/fairness-spec.md, appendix A.4.

>>> loads(b'{"a": [1, "x"]}')
{'a': [Number(text='1'), 'x']}
>>> loads(b'{"a": 1, "a": 2}')
Traceback (most recent call last):
    ...
fairdeck.core.strictjson.StrictJSONError: duplicate name in a JSON object
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_TEXT_BYTES = 1 << 20
"""A longer text is refused before it is decoded. The largest fairdeck-v1
transcript (shoe-8, 64 client seeds of 256 bytes) is under 50 kB."""
MAX_DEPTH = 32
"""Arrays and objects nested deeper are refused (fairdeck-v1 needs 2)."""

_BOM = b"\xef\xbb\xbf"
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
"""A string from its quote to its closing quote (an escape's character, whatever it is, neither
ends nor nests), or to the end of the text when it is not closed."""
_NOT_BRACKET = re.compile(r"[^\[\]{}\\]+")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class StrictJSONError(ValueError):
    """A text that section 7.1 does not accept; the message says why (never echoing the text)."""


@dataclass(frozen=True)
class Number:
    """A JSON number, kept as its text."""

    text: str


class _DuplicateName(Exception):
    pass


def loads(text: str | bytes) -> Any:
    """The JSON value of ``text`` (bytes as read, or str), or StrictJSONError."""
    if isinstance(text, str):
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            raise StrictJSONError("the text is not valid Unicode") from None
    elif isinstance(text, bytes | bytearray):
        raw = bytes(text)
    else:
        raise StrictJSONError("a JSON text is str or bytes")
    if len(raw) > MAX_TEXT_BYTES:
        raise StrictJSONError(f"the text is larger than {MAX_TEXT_BYTES} bytes")
    if raw.startswith(_BOM):
        raise StrictJSONError("the text starts with a byte order mark")
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StrictJSONError(f"the text is not UTF-8 (byte {e.start})") from None
    _check_depth(decoded)
    try:
        value = json.loads(
            decoded,
            object_pairs_hook=_no_duplicates,
            parse_constant=_not_json,
            parse_int=Number,
            parse_float=Number,
        )
    except _DuplicateName:
        raise StrictJSONError("duplicate name in a JSON object") from None
    except ValueError as e:
        raise StrictJSONError(f"not JSON: {e}") from None
    _check_strings(value)
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Different JSON parsers keep different copies of a duplicate name: refuse them all."""
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise _DuplicateName
        out[name] = value
    return out


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON (RFC 8259 has no NaN or Infinity)")


_BOUNDED = json.JSONDecoder(parse_constant=_not_json)
"""``bounded_loads``' decoder, made once: ``json.loads`` with an argument builds one a call, a
fifth of a transcript line's parse (a collection's check reads hundreds of thousands)."""


def bounded_loads(raw: bytes, *, what: str, max_bytes: int = MAX_TEXT_BYTES) -> Any:
    """``json.loads`` of a file fairdeck wrote but cannot trust (a collection's manifest, a saved
    state): at most ``max_bytes`` and ``MAX_DEPTH`` deep (checked before parsing, which would
    otherwise recurse that deep), no ``NaN``; numbers as Python's. StrictJSONError naming ``what``."""
    if len(raw) > max_bytes:
        raise StrictJSONError(f"{what} is larger than {max_bytes:,} bytes")
    try:
        text = raw.decode("utf-8")
        _check_depth(text)
        return _BOUNDED.decode(text)
    except StrictJSONError as e:
        raise StrictJSONError(f"{what}: {e}") from None
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError among them
        raise StrictJSONError(f"{what} is not JSON ({e})") from None


def _check_depth(text: str) -> None:
    """Refuse nesting beyond MAX_DEPTH before parsing, which would otherwise recurse that deep.

    A text with at most MAX_DEPTH brackets that open cannot nest deeper: counted first (a Python
    loop over each quote of a transcript cost ten times its parse). Otherwise strings are cut out
    and every character but a bracket or a backslash dropped by the regex engine, and the rest
    walked. Outside a string a backslash closes a level, as the character-by-character reading
    this replaces did (such a text is not JSON: the parse refuses it)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for c in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise StrictJSONError(f"JSON nested deeper than {MAX_DEPTH} levels")
        else:
            depth -= 1


def _check_strings(value: Any) -> None:
    """No string, name or value, may hold a lone surrogate: it is not Unicode text."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise StrictJSONError("a JSON string holds a lone surrogate (an escape such as \\ud800)")
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_strings(name)
            _check_strings(item)
