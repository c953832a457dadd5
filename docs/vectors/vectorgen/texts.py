"""fairdeck-v1-texts.json: raw transcript texts (docs/fairness-spec.md section 7.1), the bytes
a parsed vectors file cannot hold (layouts, escapes, duplicate names, encodings, text that
is not JSON, the limits), each with the step that must fail first, or none.
"""

from __future__ import annotations

import json
from typing import Any

from .hands import VERSION, Vector, transcript_of


def text_vectors(valid_list: list[Vector]) -> dict[str, Any]:
    """Raw texts (section 7.1): what the vectors file cannot hold because it holds parsed values."""
    example = transcript_of({v["name"]: v for v in valid_list}["short/worked-example"])
    pretty = json.dumps(example, indent=2) + "\n"  # the reference layout (section 7)
    compact = json.dumps(example, separators=(",", ":"))
    reordered = json.dumps(dict(reversed(list(example.items()))), separators=(", ", ": "))
    v2 = dict(example, version="fairdeck-v2")
    out: list[Vector] = []

    def case(name: str, step: str | None, description: str, raw: bytes) -> None:
        out.append({"name": name, "description": description, "expected_step": step, "text": raw.hex()})

    body = compact[1:-1]
    case(
        "valid/reference-layout",
        None,
        "the layout fairdeck writes: two-space indent, newline",
        pretty.encode(),
    )
    case("valid/compact", None, "no whitespace at all", compact.encode())
    case("valid/reordered", None, "names in reverse order", reordered.encode())
    case(
        "valid/json-whitespace",
        None,
        "all four JSON whitespace characters (space, tab, CR, LF) around every token",
        ("\t\r\n " + compact.replace(",", " ,\r\n\t").replace(":", "\t:\n ") + "\r\n").encode(),
    )
    case(
        "valid/escapes",
        None,
        "escapes are decoded before any rule applies: \\u0066 is 'f', \\u005f is '_', \\u0030 is '0'",
        compact.replace('"fairdeck-v1"', '"\\u0066airdeck-v1"')
        .replace('"hand_id"', '"hand\\u005fid"')
        .replace('"server_seed":"00', '"server_seed":"\\u00300')
        .encode(),
    )
    # duplicate names (section 7.1: MUST be rejected, wherever they are)
    case(
        "duplicate/same-value",
        "malformed",
        "the name 'deck' twice, with the same value",
        ("{" + body + ',"deck":"short"}').encode(),
    )
    case(
        "duplicate/version-first-unknown",
        "malformed",
        "'version' twice, first 'fairdeck-v2' then 'fairdeck-v1': no parser may pick one",
        ('{"version":"fairdeck-v2",' + body + "}").encode(),
    )
    case(
        "duplicate/by-escape",
        "malformed",
        "'cards' and '\\u0063ards' are the same name once unescaped",
        ("{" + body + ',"\\u0063ards":[]}').encode(),
    )
    case(
        "duplicate/nested-in-unknown-version",
        "malformed",
        "a duplicate name inside an object of a fairdeck-v2 transcript: the text fails before the version",
        (b'{"version":"fairdeck-v2","extra":{"a":1,"a":2}}'),
    )
    # encodings
    case(
        "encoding/bom",
        "malformed",
        "a UTF-8 byte order mark before the text",
        b"\xef\xbb\xbf" + pretty.encode(),
    )
    case("encoding/utf-16le", "malformed", "the text in UTF-16LE with its BOM", pretty.encode("utf-16"))
    case("encoding/utf-16be-no-bom", "malformed", "the text in UTF-16BE", pretty.encode("utf-16-be"))
    case(
        "encoding/invalid-utf8-in-string",
        "malformed",
        "a byte 0xff inside the hand id string",
        compact.encode().replace(b"example-1", b"example-\xff"),
    )
    case(
        "encoding/invalid-utf8-in-unknown-version",
        "malformed",
        "a byte 0xff in a fairdeck-v2 transcript: the text is rejected before the version",
        json.dumps(v2, separators=(",", ":")).encode().replace(b"example-1", b"example-\xff"),
    )
    case(
        "encoding/overlong-utf8",
        "malformed",
        "'/' as the overlong two-byte sequence c0 af",
        compact.encode().replace(b"example-1", b"example\xc0\xaf1"),
    )
    case(
        "encoding/utf8-surrogate",
        "malformed",
        "U+D800 encoded in UTF-8 (ed a0 80), which UTF-8 forbids",
        compact.encode().replace(b"example-1", b"example\xed\xa0\x801"),
    )
    case(
        "encoding/lone-surrogate-escape",
        "malformed",
        "the escape \\ud800 without a low surrogate, in a fairdeck-v2 transcript",
        json.dumps(dict(v2, hand_id="x")).replace('"x"', '"\\ud800"').encode(),
    )
    case(
        "encoding/non-ascii-utf8",
        "malformed",
        "valid UTF-8 text, but a hand id with U+00E4 breaks the hand-id rule (6.2)",
        json.dumps(dict(example, hand_id="h\u00e4nd"), ensure_ascii=False).encode(),
    )
    # not JSON
    for name, description, raw in [
        ("empty", "zero bytes", b""),
        ("whitespace-only", "only whitespace", b" \n"),
        ("truncated", "the text cut before its last brace", pretty.encode()[:-2]),
        ("trailing-data", "a second value after the object", pretty.encode() + b"{}"),
        ("trailing-comma", "a comma after the last member", ("{" + body + ",}").encode()),
        ("single-quotes", "names in single quotes", ("{" + body.replace('"', "'") + "}").encode()),
        ("comment", "a // comment", ("{// note\n" + body + "}").encode()),
        ("nan", "NaN as a value in a fairdeck-v2 transcript", b'{"version":"fairdeck-v2","x":NaN}'),
        ("infinity", "Infinity in a fairdeck-v2 transcript", b'{"version":"fairdeck-v2","x":-Infinity}'),
        (
            "control-character",
            "a raw tab inside a string",
            compact.encode().replace(b"example-1", b"example\t1"),
        ),
        ("bad-escape", "the escape \\x41", compact.encode().replace(b"example-1", b"example\\x41")),
        ("leading-zero", "the number 01 in a fairdeck-v2 transcript", b'{"version":"fairdeck-v2","x":01}'),
        (
            "too-deep",
            "an object holding arrays nested 32 deep, 33 levels, in a fairdeck-v2 transcript (at most 32)",
            b'{"version":"fairdeck-v2","x":' + b"[" * 32 + b"]" * 32 + b"}",
        ),
    ]:
        case(f"not-json/{name}", "malformed", description, raw)
    case(
        "limits/deep-enough",
        "version",
        "an object holding arrays nested 31 deep, 32 levels, in a fairdeck-v2 transcript: the limit is met",
        b'{"version":"fairdeck-v2","x":' + b"[" * 31 + b"]" * 31 + b"}",
    )
    case(
        "limits/long-number",
        "version",
        "a 5000-digit integer in a fairdeck-v2 transcript is JSON; numbers are never converted",
        b'{"version":"fairdeck-v2","x":' + b"7" * 5000 + b"}",
    )
    case("top-level/array", "malformed", "a JSON array", b"[]")
    case("top-level/string", "malformed", "a JSON string", b'"fairdeck-v1"')
    return {
        "version": VERSION,
        "description": (
            "Raw transcript texts of docs/fairness-spec.md section 7.1, made by docs/vectors/generate.py. "
            "'text' is the hex of the exact bytes; 'expected_step' is null when the text verifies, "
            "else the step that must fail first. Never edit by hand."
        ),
        "texts": out,
    }
