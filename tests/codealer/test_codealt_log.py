"""Co-dealt hands in the transparency log: a real ``fairdeck codealer`` process and a real dealer on
127.0.0.1:0 deal through the SDK, the dealer logs each hand's entries (codealing-spec section 11),
and ``fairdeck audit`` passes over the log; logs made bad (an entry dropped, a share altered,
entries out of order or doubled) fail, naming the hand and the step."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from fairdeck.client import AuditClient, DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, seat_releases
from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, SHARES, SHUFFLE, CodealEntry, decode_entry
from fairdeck.log.audit import AuditReport
from fairdeck.log.note import Signer
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import RunningDealer, deal_closed_hand
from tests.support.forked_serve import ServeForker
from tests.support.logs import (
    LONG_LIFETIME,
    CliResult,
    database,
    fairdeck,
    read_entries,
    resign_all,
    verifier_key,
)
from tests.support.waits import wait_for

pytestmark = pytest.mark.xdist_group("codealer_codealt_log")
"""One worker runs the module, so the co-dealt log is dealt once a run."""

CODEALT = (SETUP, SHUFFLE, SHARES, SEEDS, SEALS)


@dataclass
class CodealtLog:
    """A stopped dealer's data dir whose log holds co-dealt hands: ``closed`` (dealt and closed),
    ``still_open`` (opened only), and one ordinary hand."""

    data_dir: Path
    closed: list[str] = field(default_factory=list)
    still_open: list[str] = field(default_factory=list)
    live: AuditReport | None = None
    codealer_key: str = ""
    """The co-dealer's identity key (hex), as an auditor pins it."""
    seat_keys: list[bytes] = field(default_factory=list)
    """The seat key each closed hand's seat cards were sealed to."""
    """The SDK's audit of the running dealer (AuditClient.audit, as ``audit --target``)."""

    def copy(self, to: Path) -> Path:
        shutil.copytree(self.data_dir, to)
        return to


def kind(entry: bytes) -> int:
    return entry[4]


def codealt(entry: bytes, hand_id: str) -> bool:
    return kind(entry) in CODEALT and decode_entry(entry).hand_id == hand_id


def wait_signed(dealer: RunningDealer) -> None:
    """Until the dealer's signed checkpoint covers every entry it has stored."""
    with AuditClient(dealer.target, verifier=verifier_key(dealer.data_dir), timeout=10) as log:
        wait_for(
            "a checkpoint that covers the log",
            lambda: log.checkpoint().size >= len(read_entries(dealer.data_dir)),
            every=0.02,
        )


@pytest.fixture(scope="module")
def codealt_log(tmp_path_factory: pytest.TempPathFactory, serve_forker: ServeForker) -> Iterator[CodealtLog]:
    root = tmp_path_factory.mktemp("codealt-log")
    init_codealer(root / "cd1")
    built = CodealtLog(root / "data")
    with CodealerProcess(root / "cd1", forker=serve_forker) as codealer:
        built.codealer_key = codealer.identity
        config = {
            "codealer": codealer.target,
            "codealer_key": codealer.identity,
            "codealer_token": f"@{codealer.token_file}",
            "checkpoint_interval": 0.02,
        }
        with RunningDealer(built.data_dir, **config) as dealer, DealerClient(dealer.target, timeout=30) as c:
            hands = CodealHands(c)
            for deck, seat_cards, board in (("standard", 2, 3), ("short", 1, 0)):
                hand = hands.open_hand(deck)
                # Acknowledged, so durable: the setup and both shuffles are in the log already.
                assert [kind(e) for e in read_entries(built.data_dir) if codealt(e, hand.hand_id)] == [
                    SETUP,
                    SHUFFLE,
                    SHUFFLE,
                ]
                seat = SeatKey.generate()
                built.seat_keys.append(seat.public_key)
                got = hands.draw(hand.hand_id, seat_cards, seat_public_key=built.seat_keys[-1])
                if board:
                    hands.draw(hand.hand_id, board)
                hands.close_hand(hand.hand_id, seat_releases=seat_releases(hand, got.sealed_cards, seat))
                built.closed.append(hand.hand_id)
            built.still_open.append(hands.open_hand("short").hand_id)
            deal_closed_hand(dealer.target, "standard")
            wait_signed(dealer)
            with AuditClient(dealer.target, verifier=verifier_key(dealer.data_dir), timeout=30) as log:
                built.live = log.audit(max_hand_lifetime=float(LONG_LIFETIME))
    yield built


def audit(data_dir: Path, *extra: str) -> CliResult:
    key = verifier_key(data_dir)
    return fairdeck(
        "audit", "--data", str(data_dir), "--key", key, "--max-hand-lifetime", LONG_LIFETIME, *extra
    )


def rewrite(data_dir: Path, change: Callable[[list[bytes]], list[bytes]]) -> None:
    """Replace the log's entries with ``change(entries)`` and sign the result with the real key
    (the dealer itself lying): only the co-dealt checks can tell."""
    entries = change(read_entries(data_dir))
    with database(data_dir) as conn:
        conn.execute("DELETE FROM log_entries")
        conn.executemany("INSERT INTO log_entries (idx, entry) VALUES (?, ?)", list(enumerate(entries)))
    resign_all(data_dir)


def where(entries: list[bytes], hand_id: str, wanted: int, nth: int = 0) -> int:
    """The index of the ``nth`` co-dealt entry of type ``wanted`` of ``hand_id``."""
    return [i for i, e in enumerate(entries) if codealt(e, hand_id) and kind(e) == wanted][nth]


def test_the_log_holds_each_codealt_hand_in_order_and_the_audit_verifies_it(codealt_log: CodealtLog) -> None:
    entries = read_entries(codealt_log.data_dir)
    first = [kind(e) for e in entries if codealt(e, codealt_log.closed[0])]
    assert first == [SETUP, SHUFFLE, SHUFFLE, *[SHARES] * 5, SEALS, SEEDS]
    shares = [decode_entry(e) for e in entries if codealt(e, codealt_log.closed[0]) and kind(e) == SHARES]
    assert [s.position for s in shares] == [0, 1, 2, 3, 4] and all(len(s.records) == 2 for s in shares)
    assert [kind(e) for e in entries if codealt(e, codealt_log.still_open[0])] == [SETUP, SHUFFLE, SHUFFLE]

    live = codealt_log.live
    assert live is not None and live.ok, live
    assert (live.codeal_hands, live.codeal_verified, live.codeal_open) == (3, 2, 1)
    result = audit(codealt_log.data_dir, "--json")
    assert result.rc == 0, result.out + result.err
    assert result.report["codeal"] == {
        "hands": 3,
        "verified": 2,
        "open": 1,
        "repeated": 0,
        "seals_verified": 0,
        "unsealed": 0,
        "open_past_lifetime": 0,
    }
    assert (result.report["hands"], result.report["closed"]) == (1, 1)  # the ordinary hand
    text = audit(codealt_log.data_dir)
    assert text.rc == 0
    assert (
        "  co-dealt hands 3: closed and verified 2 (codealing-spec section 10; the co-dealers' "
        "identities are not in the log, not checked), still open 1; seals entries verified under "
        "--codealer-key 0, closed without seals 0"
    ) in text.out.splitlines()


def failed(data_dir: Path, *extra: str) -> list[tuple[int, str, str]]:
    result = audit(data_dir, "--json", *extra)
    assert result.rc == 1, result.out + result.err
    return [(f["index"], f["hand_id"], f["problem"]) for f in result.findings]


def test_the_seals_entry_is_logged_with_the_close_and_verifies_under_the_codealer_key(
    codealt_log: CodealtLog,
) -> None:
    """After the close, the co-dealer's signed seal statements are in the log (one seals entry, after
    the shares, before the seeds) naming the seat key each seat card went to, and ``fairdeck audit
    --codealer-key`` verifies their signatures; without the key it says none were verified."""
    entries = read_entries(codealt_log.data_dir)
    for hand_id, seat_key, sealed in zip(
        codealt_log.closed, codealt_log.seat_keys, ([0, 1], [0]), strict=True
    ):
        seals = decode_entry(entries[where(entries, hand_id, SEALS)])
        assert seals.position == 1  # co-dealer 1's statements
        assert [(p, key) for p, key, _, _ in seals.seals()] == [(p, seat_key) for p in sealed]
    result = audit(codealt_log.data_dir, "--codealer-key", codealt_log.codealer_key, "--json")
    assert result.rc == 0, result.out + result.err
    assert (result.report["codeal"]["verified"], result.report["codeal"]["seals_verified"]) == (2, 2)
    text = audit(codealt_log.data_dir, "--codealer-key", codealt_log.codealer_key)
    assert "seals entries verified under --codealer-key 2, closed without seals 0" in text.out
    bad = audit(codealt_log.data_dir, "--codealer-key", "12ab")
    assert bad.rc == 2 and bad.err.startswith("fairdeck audit: bad --codealer-key: '12ab' is not 64 hex")


@pytest.mark.parametrize("change", ["signature", "another seat key"])
def test_a_seal_statement_altered_or_naming_another_key_fails_the_audit_naming_the_hand_and_position(
    codealt_log: CodealtLog, tmp_path: Path, change: str
) -> None:
    """A dealer that rewrote a logged statement (to hide that a card went to its own key) fails under
    the pinned co-dealer key; the log alone cannot tell, so without it the audit passes."""
    data = codealt_log.copy(tmp_path / "data")
    hand_id = codealt_log.closed[0]
    at = where(read_entries(data), hand_id, SEALS)

    def alter(es: list[bytes]) -> list[bytes]:
        e = decode_entry(es[at])
        p, key, digest, signature = e.seals()[1]
        if change == "signature":
            signature = signature[:10] + bytes([signature[10] ^ 1]) + signature[11:]
        else:
            key = SeatKey.generate().public_key
        record = p.to_bytes(4, "big") + key + digest + signature
        bad = CodealEntry(SEALS, e.time_ms, hand_id, records=(e.records[0], record), position=1)
        return [*es[:at], bad.encode(), *es[at + 1 :]]

    rewrite(data, alter)
    assert failed(data, "--codealer-key", codealt_log.codealer_key) == [
        (
            at,
            hand_id,
            "co-dealt seals entry of co-dealer 1: position 1: the seal statement does not verify under "
            "co-dealer 1's pinned identity key (codealing-spec section 9.1)",
        )
    ]
    unkeyed = audit(data, "--json")
    assert unkeyed.rc == 0 and unkeyed.report["codeal"]["seals_verified"] == 0


def test_a_dropped_shuffle_entry_fails_the_hand(codealt_log: CodealtLog, tmp_path: Path) -> None:
    data = codealt_log.copy(tmp_path / "data")
    hand_id = codealt_log.closed[0]
    dropped = where(read_entries(data), hand_id, SHUFFLE, 1)
    rewrite(data, lambda es: es[:dropped] + es[dropped + 1 :])
    assert failed(data) == [
        (
            dropped,
            hand_id,
            "co-dealt shares entry after 1 of the hand's 2 shuffle entries (section 11: every shuffle "
            "is logged before any card is dealt)",
        )
    ]


def test_a_dropped_shuffle_of_a_hand_still_open_fails_it_at_the_end(
    codealt_log: CodealtLog, tmp_path: Path
) -> None:
    data = codealt_log.copy(tmp_path / "data")
    hand_id = codealt_log.still_open[0]
    entries = read_entries(data)
    setup, dropped = where(entries, hand_id, SETUP), where(entries, hand_id, SHUFFLE, 1)
    rewrite(data, lambda es: es[:dropped] + es[dropped + 1 :])
    problem = (
        "co-dealt hand set up with 2 key holders has 1 shuffle entries (section 11: all are logged "
        "when it opens)"
    )
    assert failed(data) == [(setup, hand_id, problem)]


def test_an_altered_share_fails_the_hand_at_step_share(codealt_log: CodealtLog, tmp_path: Path) -> None:
    data = codealt_log.copy(tmp_path / "data")
    hand_id = codealt_log.closed[0]
    at = where(read_entries(data), hand_id, SHARES, 2)

    def alter(es: list[bytes]) -> list[bytes]:
        e = decode_entry(es[at])
        theirs = bytearray(e.records[1])
        theirs[96] ^= 1  # the low bit of z (little-endian): still a reduced scalar, a wrong one
        bad = CodealEntry(SHARES, e.time_ms, hand_id, records=(e.records[0], bytes(theirs)), position=2)
        return [*es[:at], bad.encode(), *es[at + 1 :]]

    rewrite(data, alter)
    seeds = where(read_entries(data), hand_id, SEEDS)
    assert failed(data) == [
        (
            seeds,
            hand_id,
            "co-dealt hand fails at step share (codealing-spec section 10): position 2, holder 1: the "
            "DLEQ proof fails against the key",
        )
    ]


@pytest.mark.parametrize(
    "swap",
    [
        pytest.param((SHUFFLE, 0, SHUFFLE, 1), id="shuffles-in-the-wrong-holder-order"),
        pytest.param((SHARES, 4, SEEDS, 0), id="a-share-after-the-seeds"),
        pytest.param((SHARES, 0, SHARES, 1), id="positions-out-of-order"),
    ],
)
def test_entries_out_of_order_fail_the_hand(
    codealt_log: CodealtLog, tmp_path: Path, swap: tuple[int, int, int, int]
) -> None:
    data = codealt_log.copy(tmp_path / "data")
    hand_id = codealt_log.closed[0]
    entries = read_entries(data)
    a, b = where(entries, hand_id, swap[0], swap[1]), where(entries, hand_id, swap[2], swap[3])

    def swapped(es: list[bytes]) -> list[bytes]:
        es = list(es)
        if swap[2] == SEEDS:  # the last shares moved after the seeds (the seals stay before them)
            es.insert(b, es.pop(a))
        else:
            es[a], es[b] = es[b], es[a]
        return es

    rewrite(data, swapped)
    found = failed(data)
    # The first entry out of place: for the seeds before the last shares, that shares entry (the
    # seeds close a hand of four dealt positions, which verifies; nothing may follow them).
    assert len(found) == 1 and found[0][:2] == (b if swap[2] == SEEDS else a, hand_id), found
    words = {
        SHUFFLE: "co-dealt shuffle entry of holder 1 where holder 0's is due",
        SEEDS: "co-dealt shares entry after the hand's seeds entry",
        SHARES: "co-dealt shares entry for position 1 where position 0's is due",
    }
    assert found[0][2].startswith(words[swap[2]]), found


def test_a_setup_of_other_keys_under_a_logged_hand_and_an_entry_of_no_hand_are_findings(
    codealt_log: CodealtLog, tmp_path: Path
) -> None:
    data = codealt_log.copy(tmp_path / "data")
    hand_id = codealt_log.closed[1]
    entries = read_entries(data)
    setup = decode_entry(entries[where(entries, hand_id, SETUP)])
    theirs = bytearray(setup.records[1])
    theirs[0] ^= 1  # another key record: another deal under a hand id already logged
    other = CodealEntry(SETUP, setup.time_ms, hand_id, setup.deck, (setup.records[0], bytes(theirs))).encode()
    stray = CodealEntry(SEEDS, 1, "no-such-hand", records=(bytes(32), bytes(32))).encode()
    rewrite(data, lambda es: [*es, other, stray])
    assert failed(data) == [
        (len(entries), hand_id, "co-dealt setup entry for a co-dealt hand already in the log"),
        (len(entries) + 1, "no-such-hand", "co-dealt seeds entry for a hand with no setup entry"),
    ]


def test_a_hand_logged_again_by_a_retry_is_no_finding(codealt_log: CodealtLog, tmp_path: Path) -> None:
    """The bug: a dealer that crashed between appending a hand's entries and noting them logged
    logs them again on its retry (docs/codealing-spec.md section 11, "When, exactly"), and the
    audit called the honest dealer's repeat a finding ("a setup twice", "shares after the seeds").
    An entry equal to one the hand logged, its time aside, is now counted as repeated."""
    data = codealt_log.copy(tmp_path / "data")
    hand_id = codealt_log.closed[1]
    entries = read_entries(data)
    last_ms = max(t for t in (decode_entry(e).time_ms for e in entries if codealt(e, hand_id)))
    again = [
        CodealEntry(d.kind, last_ms + 1000, d.hand_id, d.deck, d.records, d.position).encode()
        for d in (decode_entry(e) for e in entries if codealt(e, hand_id))
    ]
    rewrite(data, lambda es: [*es, *again])
    result = audit(data, "--json")
    assert result.rc == 0, result.out + result.err
    assert result.report["codeal"]["repeated"] == len(again)
    assert (result.report["codeal"]["hands"], result.report["codeal"]["verified"]) == (3, 2)


def test_on_postgresql_the_entries_are_logged_durably_and_audited(
    pg_url: str, tmp_path: Path, serve_forker: ServeForker
) -> None:
    """The same path on the PostgreSQL engine: the opening is in the database when OpenHand has
    answered, and ``fairdeck audit --db`` verifies the closed hand."""
    keys = ["--seed-key-file", str(tmp_path / "seed.key"), "--log-key-file", str(tmp_path / "log.key")]
    made = fairdeck("init", "--keys-only", "--data", str(tmp_path / "unused"), *keys)
    assert made.rc == 0, made.err
    init_codealer(tmp_path / "cd1")
    (tmp_path / "data").mkdir()  # the co-dealt hands' own file (codeal.db) is local even on --db
    vkey = Signer.parse((tmp_path / "log.key").read_text().strip()).verifier.to_string()
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        config = {
            "db": pg_url,
            "seed_key_file": tmp_path / "seed.key",
            "log_key_file": tmp_path / "log.key",
            "codealer": codealer.target,
            "codealer_key": codealer.identity,
            "codealer_token": f"@{codealer.token_file}",
            "checkpoint_interval": 0.02,
        }
        with (
            RunningDealer(tmp_path / "data", **config) as dealer,
            DealerClient(dealer.target, timeout=30) as c,
        ):
            hands = CodealHands(c)
            hand = hands.open_hand("short")
            with psycopg.connect(pg_url) as db:
                stored = [bytes(e) for (e,) in db.execute("SELECT entry FROM log_entries ORDER BY idx")]
            assert [kind(e) for e in stored] == [SETUP, SHUFFLE, SHUFFLE]
            hands.draw(hand.hand_id, 2)
            hands.close_hand(hand.hand_id)
            with AuditClient(dealer.target, verifier=vkey, timeout=10) as log:
                wait_for("a checkpoint that covers the log", lambda: log.checkpoint().size >= 6, every=0.02)
    result = fairdeck("audit", "--db", pg_url, "--key", vkey, "--max-hand-lifetime", LONG_LIFETIME, "--json")
    assert result.rc == 0, result.out + result.err
    assert result.report["codeal"] == {
        "hands": 1,
        "verified": 1,
        "open": 0,
        "repeated": 0,
        "seals_verified": 0,
        "unsealed": 0,
        "open_past_lifetime": 0,
    }


def test_the_audit_counts_a_codealt_hand_open_past_the_lifetime_and_finds_nothing_in_it(
    codealt_log: CodealtLog,
) -> None:
    """A co-dealt hand left open past the lifetime was counted only as open, like one opened a
    moment ago. It is counted apart now, and still not a finding: the dealer alone cannot shop a
    co-dealt deck, and its void may wait for a co-dealer that is down (codealing-spec section 11)."""
    key = verifier_key(codealt_log.data_dir)
    result = fairdeck(
        "audit", "--data", str(codealt_log.data_dir), "--key", key, "--max-hand-lifetime", "0.001", "--json"
    )
    assert result.report["codeal"]["open"] == 1
    assert result.report["codeal"]["open_past_lifetime"] == 1
    assert not [f for f in result.findings if f["hand_id"] == codealt_log.still_open[0]]
    text = fairdeck(
        "audit", "--data", str(codealt_log.data_dir), "--key", key, "--max-hand-lifetime", "0.001"
    )
    assert "still open 1 (1 of them past the lifetime: counted, not a finding" in text.out
