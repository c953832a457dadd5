"""The transcript and its strict JSON form (spec section 7)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fairdeck import Transcript, VerificationError, deal_local
from fairdeck.core import verify

KEYS = ["version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards"]
GOOD = deal_local("standard", "h1", ["alice", b"\x00\xff"], entropy=lambda n: bytes(range(n))).transcript
SHOE = deal_local("shoe-3", "h2", entropy=lambda n: bytes(n)).transcript


def good_dict(t: Transcript = GOOD) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(t.to_json())
    return data


def rejected(data: Any) -> VerificationError:
    with pytest.raises(VerificationError) as caught:
        Transcript.from_dict(data)
    assert caught.value.step == "malformed"
    assert str(caught.value).startswith("malformed: ")
    return caught.value


def with_(**changes: Any) -> dict[str, Any]:
    data = good_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize("t", [GOOD, SHOE], ids=["standard", "shoe-3"])
def test_round_trip(t: Transcript) -> None:
    assert Transcript.from_json(t.to_json()) == t
    assert Transcript.from_dict(t.to_dict()) == t
    assert Transcript.from_json(t.to_json().encode()) == t


def test_json_layout() -> None:
    text = GOOD.to_json()
    assert text.endswith("}\n")
    assert list(json.loads(text)) == KEYS
    assert text.startswith('{\n  "version": "fairdeck-v1",\n')
    data = json.loads(text)
    assert data["client_seeds"] == ["616c696365", "00ff"]
    assert data["cards"] == GOOD.codes()
    assert all(isinstance(code, str) for code in data["cards"])


def test_shoe_cards_are_written_in_shoe_form() -> None:
    assert all(code.count(".") == 1 for code in good_dict(SHOE)["cards"])


def test_key_order_and_whitespace_are_free() -> None:
    data = good_dict()
    compact = json.dumps(dict(reversed(list(data.items()))), separators=(",", ":"))
    assert Transcript.from_json(compact) == GOOD


@pytest.mark.parametrize("key", KEYS)
def test_missing_key_is_rejected(key: str) -> None:
    data = good_dict()
    del data[key]
    assert key in str(rejected(data))


@pytest.mark.parametrize("key", ["extra", "Version", "cards ", "signature"])
def test_unknown_key_is_rejected(key: str) -> None:
    assert key in str(rejected(with_(**{key: "x"})))


@pytest.mark.parametrize("key", ["commitment", "server_seed"])
@pytest.mark.parametrize(
    "mangle",
    [
        str.upper,
        lambda h: h[:-1],  # odd length
        lambda h: "0x" + h,
        lambda h: h[:4] + " " + h[4:],
        lambda h: "g" + h[1:],
        lambda h: h + "\n",
    ],
    ids=["upper", "odd", "0x", "space", "non-hex", "newline"],
)
def test_non_canonical_hex_is_rejected(key: str, mangle: Any) -> None:
    error = rejected(with_(**{key: mangle(good_dict()[key])}))
    assert "lower-case hex with an even number of digits" in str(error)


def test_non_canonical_hex_in_a_client_seed_is_rejected() -> None:
    assert "client_seeds[1]" in str(rejected(with_(client_seeds=["616c696365", "00FF"])))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("version", 1),
        ("version", None),
        ("deck", ["standard"]),
        ("hand_id", 7),
        ("hand_id", None),
        ("commitment", 0),
        ("commitment", ["00"]),
        ("server_seed", None),
        ("server_seed", True),
        ("client_seeds", "00"),
        ("client_seeds", {"0": "00"}),
        ("client_seeds", [0]),
        ("client_seeds", [None]),
        ("cards", "As Ks"),
        ("cards", list(range(52))),
        ("cards", [None] * 52),
        ("cards", {"0": "As"}),
    ],
)
def test_wrong_types_are_rejected(key: str, value: Any) -> None:
    rejected(with_(**{key: value}))


@pytest.mark.parametrize("value", [[], "transcript", 1, None, True])
def test_top_level_must_be_an_object(value: Any) -> None:
    assert "JSON object" in str(rejected(value))


@pytest.mark.parametrize("text", ["", "{", "{'version': 1}", "not json", b"\xff\xfe{}", "[1,]"])
def test_text_that_is_not_json_is_rejected(text: str | bytes) -> None:
    with pytest.raises(VerificationError) as caught:
        Transcript.from_json(text)
    assert caught.value.step == "malformed"


@pytest.mark.parametrize("deck", ["shoe-9", "Standard", ""])
def test_unknown_deck_is_rejected_while_parsing(deck: str) -> None:
    assert "unknown deck spec" in str(rejected(with_(deck=deck)))


@pytest.mark.parametrize(
    ("deck_source", "position", "code"),
    [
        ("standard", 0, "As.1"),
        ("standard", 0, "X1"),
        ("standard", 0, "as"),
        ("standard", 3, "1s"),
        ("shoe-3", 0, "As"),
        ("shoe-3", 0, "As.4"),
        ("shoe-3", 0, "As.01"),
        ("shoe-3", 5, "X2"),
    ],
)
def test_card_codes_of_the_wrong_deck_form_are_rejected(deck_source: str, position: int, code: str) -> None:
    data = good_dict(GOOD if deck_source == "standard" else SHOE)
    data["cards"][position] = code
    rejected(data)


def test_the_position_of_a_foreign_form_code_is_named() -> None:
    data = good_dict(SHOE)
    data["cards"][7] = data["cards"][7].split(".")[0]
    assert "cards[7]" in str(rejected(data))


def test_lengths_are_left_to_verify() -> None:
    """Parsing accepts them; step 6.2 judges them."""
    parsed = Transcript.from_dict(with_(server_seed="", client_seeds=[""]))
    assert (parsed.server_seed, parsed.client_seeds) == (b"", (b"",))
    with pytest.raises(VerificationError, match=r"^malformed: "):
        verify(parsed)


def test_unknown_version_is_reported_as_version_before_deck_or_cards() -> None:
    """A future version may have decks and codes this one does not know: say "version", not "malformed"."""
    for extra in ({}, {"deck": "shoe-99", "cards": ["Zz"]}):
        with pytest.raises(VerificationError, match=r"^version: "):
            Transcript.from_dict(with_(version="fairdeck-v7", **extra))


def test_codes_of_a_transcript() -> None:
    assert GOOD.codes() == good_dict()["cards"]


def test_duplicate_names_are_rejected() -> None:
    text = GOOD.to_json()
    duplicated = text[: text.rindex("}")].rstrip() + ', "hand_id": "other"\n}\n'
    with pytest.raises(VerificationError):
        Transcript.from_json(duplicated)
