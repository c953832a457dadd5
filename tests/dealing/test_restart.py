"""What survives a restart, and what is at rest on disk.

A hand in the middle of its life continues exactly where it was after the
dealer restarts over the same data dir. Unrevealed server seeds never appear
in the data files, raw, hex or base64; the seed key file is 0600.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import HandAlreadyShuffled
from fairdeck.client.models import HandState
from fairdeck.core.cards import Card
from fairdeck_server.dealing.vault import KEY_ENV
from fairdeck_server.refusals import StartupRefused


@pytest.fixture(autouse=True)
def _no_key_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)  # these tests are about the key file


def ids(cards: tuple[Card, ...]) -> tuple[int, ...]:
    return tuple(c.id for c in cards)


def data_bytes(data_dir: Path) -> bytes:
    """Every file the dealer keeps in its data dir (database, WAL, shm), but the keys."""
    files = sorted(p for p in data_dir.rglob("*") if p.is_file() and not p.name.endswith(".key"))
    assert any(p.name == "fairdeck.db" for p in files)
    return b"".join(p.read_bytes() for p in files)


def forms(seed: bytes) -> dict[str, bytes]:
    """The ways a seed could be spelt on disk."""
    return {
        "raw": seed,
        "hex": seed.hex().encode(),
        "HEX": seed.hex().upper().encode(),
        "base64": base64.b64encode(seed).rstrip(b"="),
        "base64url": base64.urlsafe_b64encode(seed).rstrip(b"="),
    }


def test_restart_in_the_middle_of_a_hand(running, client: DealerClient) -> None:  # type: ignore[no-untyped-def]
    shuffled = client.open_hand("standard")
    client.add_client_seeds(shuffled.hand_id, ["alice"])
    client.add_client_seeds(shuffled.hand_id, ["bob"])
    first = client.draw(shuffled.hand_id, 5)

    still_open = client.open_hand("jokers")
    client.add_client_seeds(still_open.hand_id, ["carol"])

    running.restart()  # a fresh server (new port) on the same data dir

    with DealerClient(running.target, timeout=20) as again:
        hand = again.get(shuffled.hand_id)
        assert (hand.state, hand.dealt_count, hand.client_seeds) == (
            HandState.SHUFFLED,
            5,
            (b"alice", b"bob"),
        )
        assert hand.commitment == shuffled.commitment
        assert hand.commit_receipt == shuffled.commit_receipt
        with pytest.raises(HandAlreadyShuffled):
            again.add_client_seeds(shuffled.hand_id, ["late"])
        nxt = again.draw(shuffled.hand_id, 5)
        assert (nxt.position, nxt.remaining) == (5, 42)
        closed = again.close_hand(shuffled.hand_id)
        assert closed.transcript is not None
        assert closed.transcript.cards[:10] == ids(first.cards) + ids(nxt.cards)
        assert closed.transcript.client_seeds == (b"alice", b"bob")
        closed.verify(commitment=shuffled.commitment)

        # The open hand is still open: seeds can still be added, then it deals.
        hand = again.get(still_open.hand_id)
        assert (hand.state, hand.client_seeds, hand.dealt_count) == (HandState.OPEN, (b"carol",), 0)
        again.add_client_seeds(still_open.hand_id, ["dave"])
        again.shuffle(still_open.hand_id, ["erin"])
        top = again.draw(still_open.hand_id, 3)
        closed = again.close_hand(still_open.hand_id)
        assert closed.transcript is not None
        assert closed.transcript.client_seeds == (b"carol", b"dave", b"erin")
        assert closed.transcript.cards[:3] == ids(top.cards)
        closed.verify(commitment=still_open.commitment)

        # The log continues after the entries made before the restart.
        assert closed.reveal_receipt is not None
        assert again.open_hand().commit_receipt.index == closed.reveal_receipt.index + 1


def test_closed_hand_survives_restart(running, client: DealerClient) -> None:  # type: ignore[no-untyped-def]
    deal = client.deal_new_hand("shoe-3", client_seeds=["x"])
    closed = client.close_hand(deal.hand.hand_id)
    running.restart()
    with DealerClient(running.target, timeout=20) as again:
        assert again.get(deal.hand.hand_id) == closed
        assert again.close_hand(deal.hand.hand_id) == closed  # still idempotent


def test_unrevealed_seeds_are_not_at_rest(running, client: DealerClient) -> None:  # type: ignore[no-untyped-def]
    opened = [client.open_hand(deck).hand_id for deck in ("standard", "jokers", "short", "shoe-8") * 5]
    for hid in opened[::2]:
        client.add_client_seeds(hid, ["seat"])
    for hid in opened[::3]:
        client.draw(hid, 2)
    dealt = [client.deal_new_hand("standard", client_seeds=["s"]).hand.hand_id for _ in range(10)]
    batch = [h.hand_id for h in client.deal_hands("short", 300, close=False)]
    hands = opened + dealt + batch

    # Also after a restart, which reopens the database (and may checkpoint the WAL).
    running.restart()
    with DealerClient(running.target, timeout=20) as again:
        again.get(hands[0])
    before = data_bytes(running.data_dir)

    with DealerClient(running.target, timeout=20) as again:
        seeds = []
        for hid in hands:
            t = again.close_hand(hid).transcript
            assert t is not None
            seeds.append(t.server_seed)
    assert len(set(seeds)) == len(hands)

    for seed in seeds:
        for form, spelt in forms(seed).items():
            assert spelt not in before, f"an unrevealed seed is on disk ({form})"

    # The search works: once revealed, the seeds are recorded (in the clear, by design).
    after = data_bytes(running.data_dir)
    assert all(seed in after for seed in seeds)


def test_key_files_are_private(running) -> None:  # type: ignore[no-untyped-def]
    key = running.data_dir / "seed.key"
    assert key.is_file()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(base64.b64decode(key.read_text().strip(), validate=True)) == 32
    # The transparency log's signing key, beside it, is private too.
    log_key = running.data_dir / "log.key"
    assert log_key.is_file()
    assert stat.S_IMODE(log_key.stat().st_mode) == 0o600


def test_key_file_readable_by_others_is_refused(running) -> None:  # type: ignore[no-untyped-def]
    running.stop()
    key = running.data_dir / "seed.key"
    os.chmod(key, 0o644)
    with pytest.raises(StartupRefused, match="readable by others"):
        running.start()
    running.server = None  # it never started; nothing to stop
    os.chmod(key, 0o600)
    running.start()


def test_another_key_cannot_open_old_seeds(running, client: DealerClient) -> None:  # type: ignore[no-untyped-def]
    """A wrong seed key is refused at start (it used to serve, then fail each old hand with
    INTERNAL SEED_UNAVAILABLE); the message names the key file, never the key."""
    opened = client.open_hand("standard")
    client.draw(opened.hand_id, 2)
    key = running.data_dir / "seed.key"
    original = key.read_text()
    running.stop()
    key.write_text(base64.b64encode(b"k" * 32).decode() + "\n")
    with pytest.raises(StartupRefused, match=f"seed key {key} cannot open the sealed seed") as refused:
        running.start()
    running.server = None  # it never started; nothing to stop
    assert original.strip() not in str(refused.value) and base64.b64encode(b"k" * 32).decode() not in str(
        refused.value
    )

    key.write_text(original)
    running.start()
    with DealerClient(running.target, timeout=20) as again:
        again.close_hand(opened.hand_id).verify(commitment=opened.commitment)
