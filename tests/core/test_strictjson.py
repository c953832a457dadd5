"""The depth check of fairdeck.core.strictjson against a character-by-character reading of the
same rule: brackets outside strings nest, an escape's character neither ends a string nor nests,
a string not closed runs to the end. Its fast paths (a count of the brackets that open, then the
regex engine) must refuse exactly the texts this reading refuses, deep or not, JSON or not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.core.strictjson import MAX_DEPTH, StrictJSONError, _check_depth, bounded_loads, loads


def too_deep(text: str) -> bool:
    depth, in_string, escaped = 0, False, False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif c in "]}\\":
            depth -= 1
    return False


def refused(text: str) -> bool:
    try:
        _check_depth(text)
    except StrictJSONError as e:
        assert str(e) == f"JSON nested deeper than {MAX_DEPTH} levels"
        return True
    return False


@settings(max_examples=400)
@given(st.lists(st.sampled_from(["[", "{", "]", "}", '"', "\\", "a", "\n", '"\\"', "[[[[[[[["]), max_size=80))
def test_the_depth_check_is_the_character_by_character_reading(parts: list[str]) -> None:
    text = "".join(parts)
    assert refused(text) == too_deep(text)


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ("[" * MAX_DEPTH + "]" * MAX_DEPTH, False),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), True),
        ('"' + "[" * 100 + '"', False),  # inside a string
        ('"\\"' + "[" * 100, False),  # the escaped quote does not end the string
        ('"\\\\"' + "[" * 100, True),  # an escaped backslash does not escape the quote after it
        ("\\" * 10 + "[" * (MAX_DEPTH + 10), False),  # a backslash outside a string closes a level
        ("[]" * 1000, False),
        ("[" * 100_000, True),
    ],
)
def test_the_depth_check_on_texts_at_its_edges(text: str, deep: bool) -> None:
    assert refused(text) == too_deep(text) == deep


def test_both_readers_refuse_deep_nesting_in_one_line() -> None:
    for read in (loads, lambda t: bounded_loads(t.encode(), what="x")):
        with pytest.raises(StrictJSONError, match="nested deeper"):
            read("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
        value, depth = read("[" * MAX_DEPTH + "]" * MAX_DEPTH), 1
        while value:
            value, depth = value[0], depth + 1
        assert value == [] and depth == MAX_DEPTH
