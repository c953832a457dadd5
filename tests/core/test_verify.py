"""Verification (spec section 6): every step, in order, named in the error."""

from __future__ import annotations

import dataclasses
import hmac
from typing import Any

import pytest

from fairdeck import InvalidInput, Transcript, VerificationError, commit, deal_local
from fairdeck.core import verify


def _seed(n: int) -> bytes:
    return bytes((7 * i + 3) % 256 for i in range(n))


GOOD = deal_local("standard", "table-1:hand-9", ["alice", "bob"], entropy=_seed).transcript
SHOE = deal_local("shoe-2", "shoe-hand", ["carol"], entropy=_seed).transcript


def changed(t: Transcript = GOOD, **changes: Any) -> Transcript:
    return dataclasses.replace(t, **changes)


def swapped(cards: tuple[int, ...], i: int, j: int) -> tuple[int, ...]:
    out = list(cards)
    out[i], out[j] = out[j], out[i]
    return tuple(out)


def failing_step(t: Transcript) -> VerificationError:
    with pytest.raises(VerificationError) as caught:
        verify(t)
    return caught.value


@pytest.mark.parametrize("t", [GOOD, SHOE], ids=["standard", "shoe-2"])
def test_a_dealt_hand_verifies(t: Transcript) -> None:
    verify(t)  # returns None, raises nothing


@pytest.mark.parametrize(
    ("step", "t", "says"),
    [
        # 6.1
        ("version", changed(version="fairdeck-v2"), "unknown algorithm version"),
        ("version", changed(version=""), "unknown algorithm version"),
        # 6.2
        ("malformed", changed(deck="shoe-9"), "unknown deck spec"),
        ("malformed", changed(hand_id="bad id"), "hand id"),
        ("malformed", changed(hand_id="x" * 65), "hand id"),
        ("malformed", changed(server_seed=GOOD.server_seed[:-1]), "must be 45 bytes, got 44"),
        ("malformed", changed(server_seed=GOOD.server_seed + b"\x00"), "must be 45 bytes, got 46"),
        ("malformed", changed(client_seeds=(b"",)), "1..256 bytes"),
        ("malformed", changed(client_seeds=(bytes(257),)), "1..256 bytes"),
        ("malformed", changed(client_seeds=(b"x",) * 65), "at most 64 client seeds"),
        ("malformed", changed(commitment=GOOD.commitment[:31]), "commitment must be 32 bytes"),
        ("malformed", changed(commitment=GOOD.commitment + b"\x00"), "commitment must be 32 bytes"),
        ("malformed", changed(cards=GOOD.cards[:-1]), "has 52 cards, transcript lists 51"),
        ("malformed", changed(cards=(*GOOD.cards, 0)), "has 52 cards, transcript lists 53"),
        ("malformed", changed(deck="jokers"), "must be 46 bytes"),
        # 6.3
        ("commitment", changed(commitment=bytes(32)), "does not match the published commitment"),
        ("commitment", changed(server_seed=bytes(45)), "does not match the published commitment"),
        ("commitment", changed(hand_id="another-hand"), "does not match the published commitment"),
        ("commitment", changed(deck="shoe-1"), "does not match the published commitment"),
        # 6.4
        ("deck", changed(cards=swapped(GOOD.cards, 0, 1)), "first at position 0"),
        ("deck", changed(cards=swapped(GOOD.cards, 50, 51)), "first at position 50"),
        ("deck", changed(cards=(GOOD.cards[0], *GOOD.cards[:-1])), "first at position 1"),
        ("deck", changed(cards=tuple(range(52))), "differs from the re-derived deck"),
        ("deck", changed(client_seeds=GOOD.client_seeds[::-1]), "differs from the re-derived deck"),
        ("deck", changed(client_seeds=()), "differs from the re-derived deck"),
        ("deck", changed(client_seeds=(*GOOD.client_seeds, b"mallory")), "differs from the re-derived deck"),
        ("deck", changed(SHOE, cards=swapped(SHOE.cards, 102, 103)), "first at position 102"),
    ],
)
def test_each_failure_names_its_step(step: str, t: Transcript, says: str) -> None:
    error = failing_step(t)
    assert error.step == step
    assert str(error).startswith(f"{step}: ")
    assert says in str(error)


def test_version_is_checked_before_anything_else() -> None:
    t = changed(version="fairdeck-v9", server_seed=b"", commitment=b"", cards=())
    assert failing_step(t).step == "version"


def test_malformed_is_checked_before_the_commitment() -> None:
    t = changed(commitment=bytes(32), cards=GOOD.cards[:10])
    assert failing_step(t).step == "malformed"


def test_commitment_is_checked_before_the_deck() -> None:
    t = changed(commitment=bytes(32), cards=swapped(GOOD.cards, 0, 1))
    assert failing_step(t).step == "commitment"


def test_a_seed_that_opens_a_recomputed_commitment_still_fails_on_the_deck() -> None:
    """A dealer who swaps its seed after the fact must also recompute C, and then C differs."""
    other_seed = _seed(46)[1:]
    t = changed(server_seed=other_seed, commitment=commit("standard", GOOD.hand_id, other_seed))
    assert failing_step(t).step == "deck"
    assert failing_step(changed(server_seed=other_seed)).step == "commitment"


def test_verification_error_is_a_finding_not_invalid_input() -> None:
    assert not issubclass(VerificationError, InvalidInput)
    error = VerificationError("deck", "x")
    assert (error.step, str(error)) == ("deck", "deck: x")


def test_digests_and_decks_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    verify(GOOD)
    assert len(compared) == 2
    assert compared[0] == (GOOD.commitment, GOOD.commitment)


def test_verify_does_not_accept_text_where_the_transcript_recorded_bytes() -> None:
    """The transcript's client seeds are bytes as used; verify re-derives from exactly those."""
    t = deal_local("standard", "nfc", ["e\u0301"], entropy=_seed).transcript
    assert t.client_seeds == (b"\xc3\xa9",)
    verify(t)
    assert failing_step(changed(t, client_seeds=("e\u0301".encode(),))).step == "deck"


@pytest.mark.parametrize("bad_id", [-1, 70000])
def test_card_id_outside_the_deck_fails_verification_instead_of_crashing(bad_id: int) -> None:
    t = changed(cards=(bad_id, *GOOD.cards[1:]))
    assert failing_step(t).step in ("malformed", "deck")


# fairdeck verify on texts that are not a transcript: step 'malformed', exit 1 (it exited 2)

_CLI_TEXT = deal_local("short", "cli-hand", ["alice"], entropy=_seed).transcript.to_json().encode()


@pytest.mark.parametrize(
    ("name", "raw", "says"),
    [
        ("non-utf8", _CLI_TEXT.replace(b"cli-hand", b"cli-h\xe4nd"), "not UTF-8"),
        ("latin1-file", b'{"hand_id": "h\xe9"}', "not UTF-8"),
        ("not-json", b"{not json", "not JSON"),
        ("bom", b"\xef\xbb\xbf" + _CLI_TEXT, "byte order mark"),
        ("utf-16", _CLI_TEXT.decode().encode("utf-16"), "not UTF-8"),
        ("deeply-nested", b"[" * 100_000, "nested deeper"),
        ("duplicate-name", _CLI_TEXT.replace(b'"deck"', b'"deck": "short", "deck"'), "duplicate name"),
    ],
)
def test_verify_command_reports_text_that_is_not_a_transcript_as_malformed(
    name: str, raw: bytes, says: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: non-UTF-8 input exited 2 ("cannot read") where the README promises exit 1
    naming the step; deep nesting raised RecursionError (a traceback); a BOM or UTF-16 was read."""
    from fairdeck.cli import main

    path = tmp_path / f"{name}.json"
    path.write_bytes(raw)
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("FAILED at step malformed: ")
    assert says in out.out
    assert out.err == ""


def test_verify_command_real_program_on_non_utf8_standard_input() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "verify", "-"],
        input=_CLI_TEXT.replace(b"cli-hand", b"cli-\xff"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(b"FAILED at step malformed: the text is not UTF-8")
    assert b"Traceback" not in done.stderr


def test_verify_command_still_exits_2_when_the_file_cannot_be_opened(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairdeck.cli import main

    assert main(["verify", str(tmp_path / "missing.json")]) == 2
    assert "fairdeck verify: cannot read" in capsys.readouterr().err


def test_verify_command_accepts_a_good_transcript_as_bytes(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairdeck.cli import main

    path = tmp_path / "good.json"
    path.write_bytes(_CLI_TEXT)
    assert main(["verify", str(path)]) == 0
    assert capsys.readouterr().out.startswith("OK: hand cli-hand verified")


def test_verify_command_refuses_a_text_over_1_mib_without_reading_it_all(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairdeck.cli import main
    from fairdeck.core.strictjson import MAX_TEXT_BYTES

    path = tmp_path / "padded.json"
    path.write_bytes(_CLI_TEXT + b" " * (MAX_TEXT_BYTES - len(_CLI_TEXT) + 1))
    assert main(["verify", str(path)]) == 1
    assert "larger than 1048576 bytes" in capsys.readouterr().out
    path.write_bytes(_CLI_TEXT + b" " * (MAX_TEXT_BYTES - len(_CLI_TEXT)))
    assert main(["verify", str(path)]) == 0
