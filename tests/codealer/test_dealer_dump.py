"""Everything the dealer holds during co-dealt hands names no hole card better than chance.

A real ``fairdeck codealer serve`` and a real ``fairdeck serve --codealer`` (DEBUG logs, metrics
on) on 127.0.0.1:0; co-dealt hands dealt through the SDK to seat keys the test holds (the seats'
devices), and a flop in public. While every hand is live, the test takes what an attacker at the
house could: a copy of the dealer's data dir (SQLite files, WAL, keys), its log lines, a scrape of
its /metrics and a dump of its process memory (/proc/PID/mem, as gcore reads it). Then (a) none
of the co-dealer's secrets that would open a card (its per-hand key and seed, its re-encryption
randomness, its decryption shares of seat cards, their seals' keys, its long-term keys) nor a
seat's key is in any of it, in any encoding the house checks; (b) an attacker that opens all it
can with the dealer's files names the seats' cards at chance rate; (c) the control: the same
attacker, given the co-dealer's directory too, names every card.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import sys
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, open_cards
from fairdeck.codeal.elgamal import card_points
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import Scalar, mul, mul_base, s_add, sub
from fairdeck.codeal.keys import KeyRecord
from fairdeck.codeal.record import ShuffleRecord
from fairdeck.codeal.seal import _info, _key, open_sealed_share
from fairdeck.codeal.shuffle import permutation, randomness, seed_commitment
from fairdeck.core.decks import DeckSpec
from fairdeck_server.dealing.vault import SeedVault, VaultError, read_key_file
from tests.support.codealers import CodealerProcess, init_codealer, online_copy
from tests.support.dealers import DealerProcess
from tests.support.dumps import Region, SecretIndex, memory_dump
from tests.support.waits import wait_for

HANDS = 12
SEATS = 10
HOLE = 2
BOARD = 3
DECK = "standard"
SPEC = DeckSpec.parse(DECK)
FALSE_ALARM = 1e-9
"""The test fails when the attacker's hits would come by chance with a probability below this."""

pytestmark = [
    pytest.mark.xdist_group("codealer_dealer_dump"),  # one worker: the hands are dealt and dumped once a run
    pytest.mark.slow,
    pytest.mark.skipif(
        sys.platform != "linux", reason="the memory dump reads /proc/PID/mem, which only Linux has"
    ),
]


@dataclass
class Dealt:
    """One seat position of a live hand, as the seat's device sees it."""

    hand_id: str
    position: int
    seat: SeatKey
    card: int
    sealed: tuple[bytes, ...]
    """The sealed shares, holder order, as the dealer relayed them."""


@dataclass
class Taken:
    """What the attacker took from the dealer while the hands were live."""

    data_dir: Path
    files: dict[str, bytes]
    log: str
    metrics: str
    memory: list[Region]
    dealt: list[Dealt]
    codealer_dir: Path
    """A copy of the co-dealer's directory (for the control only: the attacker never has it)."""
    codealer_memory: list[Region]
    """The co-dealer's memory, taken the same way (the control of the search: its secrets are there)."""


def _metrics_port(dealer: DealerProcess) -> int:
    found = wait_for(
        "the dealer's metrics line",
        lambda: re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", dealer.stderr()),
        timeout=30,
    )
    return int(found.group(1))


@pytest.fixture(scope="module")
def taken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Taken]:
    tmp = tmp_path_factory.mktemp("dump")
    codealer_dir = tmp / "codealer"
    init_codealer(codealer_dir)
    with (
        CodealerProcess(codealer_dir) as codealer,
        DealerProcess(
            tmp / "data",
            tmp / "dealer.log",
            *codealer.dealer_flags(),
            "--metrics-listen",
            "127.0.0.1:0",
            "--log-level",
            "DEBUG",
        ) as dealer,
        DealerClient(dealer.target, timeout=60) as client,
    ):
        hands = CodealHands(client)
        dealt = []
        for _ in range(HANDS):
            hand = hands.open_hand(DECK)
            seats = [SeatKey.generate() for _ in range(SEATS)]  # made on each seat's device
            per_seat = hands.deal_seats(hand.hand_id, HOLE, [s.public_key for s in seats])
            for seat, cards in zip(seats, per_seat, strict=True):
                pinned = [bytes.fromhex(codealer.identity)]
                for sealed, card in zip(cards, open_cards(hand, cards, seat, pinned), strict=True):
                    shares = tuple(bytes(s) for s in sealed.shares)
                    dealt.append(Dealt(hand.hand_id, sealed.position, seat, card, shares))
            assert len(hands.draw(hand.hand_id, BOARD).cards) == BOARD  # a flop, in public
        metrics_port = _metrics_port(dealer)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as r:
            metrics = r.read().decode()
        # The data dir is copied, file by file, while the dealer is stopped (a consistent copy, as
        # an attacker with root takes it); its memory is read in the same stop.
        copy = tmp / "taken-data"
        data_dir = dealer.data_dir
        assert data_dir is not None
        memory = memory_dump(dealer.pid, lambda: shutil.copytree(data_dir, copy))
        files = {
            p.relative_to(copy).as_posix(): p.read_bytes() for p in sorted(copy.rglob("*")) if p.is_file()
        }
        assert {"codeal.db", "codeal.db-wal", "seed.key"} <= set(files), sorted(files)  # live, WAL and all
        log = dealer.listening.group(0) + "\n" + dealer.stderr()
        codealer_copy = tmp / "taken-codealer"
        codealer_copy.mkdir()
        for name in ("secrets.key", "codealer.key"):
            shutil.copy(codealer_dir / name, codealer_copy / name)
        online_copy(codealer_dir / "codealer.db", codealer_copy / "codealer.db")
        codealer_memory = memory_dump(codealer.proc.pid)
        # No hand was closed: every hole card is still in a seat's hand, none revealed.
        assert all(not hands.get_hand(h).codeal.seeds for h in {d.hand_id for d in dealt})
        yield Taken(copy, files, log, metrics, memory, dealt, codealer_copy, codealer_memory)


# -- what the test knows: the co-dealer's secrets (it owns the co-dealer's dir) and the seats' -----


def _opened_rows(directory: Path) -> dict[str, list[bytes]]:
    """hand id -> the per-hand secrets (x || seed) every sealed row of ``directory`` opens to, with
    every key file found there: what someone holding that directory can open."""
    vaults = []
    for path in sorted(directory.rglob("*.key")):
        try:
            keys = read_key_file(path)
        except VaultError:
            continue  # not a vault key file (the co-dealer's identity, the log key)
        vaults.append(SeedVault(keys[0], tuple(keys[1:])))
    opened: dict[str, list[bytes]] = defaultdict(list)
    for path in sorted(directory.rglob("*.db")):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                columns = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
                if not {"hand_id", "sealed_secrets"} <= columns:
                    continue
                for hand_id, sealed in db.execute(f"SELECT hand_id, sealed_secrets FROM {table}"):
                    for vault in vaults:
                        try:
                            opened[hand_id].append(vault.open(hand_id, bytes(sealed)))
                        except VaultError:
                            continue
    return opened


def codealer_secrets(taken: Taken) -> dict[str, bytes]:
    """Every secret of the co-dealer's and the seats' that would open a dealt card, by name."""
    secrets: dict[str, bytes] = {}
    for name in ("secrets.key", "codealer.key"):
        secrets[f"co-dealer's {name}"] = (taken.codealer_dir / name).read_bytes().strip()
    identity = (taken.codealer_dir / "codealer.key").read_text().strip()
    secrets["co-dealer's identity key"] = bytes.fromhex(identity)
    for i, key in enumerate(read_key_file(taken.codealer_dir / "secrets.key")):
        secrets[f"co-dealer's vault key {i}"] = key
    opened = _opened_rows(taken.codealer_dir)
    for hand_id in {d.hand_id for d in taken.dealt}:
        ((blob,),) = [opened[hand_id]]
        x1, seed1 = blob[:32], blob[32:]
        secrets[f"{hand_id}: co-dealer's key x_1"] = x1
        secrets[f"{hand_id}: co-dealer's seed S_1"] = seed1
        rs = randomness(SPEC, hand_id, 1, seed1)
        for d in (d for d in taken.dealt if d.hand_id == hand_id):
            where = f"{hand_id} position {d.position}"
            share = open_sealed_share(SPEC, hand_id, d.position, 1, d.sealed[1], d.seat.secret)
            secrets[f"{where}: co-dealer's share"] = share
            secrets[f"{where}: co-dealer's D"] = share[:32]
            secrets[f"{where}: co-dealer's re-encryption r_1"] = rs[d.position]
            epk = d.sealed[1][:32]
            shared = X25519PrivateKey.from_private_bytes(d.seat.secret).exchange(
                X25519PublicKey.from_public_bytes(epk)
            )
            secrets[f"{where}: X25519 secret of the co-dealer's seal"] = shared
            info = _info(SPEC, hand_id, d.position, 1, epk, d.seat.public_key)
            secrets[f"{where}: key of the co-dealer's seal"] = _key(shared, info)
            secrets[f"{where}: the seat's X25519 secret key"] = d.seat.secret
    return secrets


def dealer_secrets(taken: Taken) -> dict[str, bytes]:
    """The dealer's own per-hand key and seed of each live hand (its memory holds the key)."""
    opened = _opened_rows(taken.data_dir)
    out = {}
    for hand_id in {d.hand_id for d in taken.dealt}:
        ((blob,),) = [opened[hand_id]]
        out[f"{hand_id}: dealer's key x_0"] = blob[:32]
        out[f"{hand_id}: dealer's seed S_0"] = blob[32:]
    return out


def dealer_keys(taken: Taken) -> dict[str, bytes]:
    """The dealer's long-term secrets: its seed key (file and key) and its log signing key."""
    keys = {f"dealer's {name}": taken.files[name].strip() for name in ("seed.key", "log.key")}
    keys |= {f"dealer's seed key {i}": k for i, k in enumerate(read_key_file(taken.data_dir / "seed.key"))}
    return keys


@dataclass
class Found:
    """Which secret (by name) the search found where: ``memory``, ``log``, ``metrics``, ``files``."""

    codealers: dict[str, bytes]
    dealers: dict[str, bytes]
    where: dict[str, set[str]]
    detail: list[str]


@pytest.fixture(scope="module")
def codealers(taken: Taken) -> dict[str, bytes]:
    """codealer_secrets, made once a run (every seat position's seal opened and re-keyed)."""
    return codealer_secrets(taken)


@pytest.fixture(scope="module")
def found(taken: Taken, codealers: dict[str, bytes]) -> Found:
    """Every secret of the co-dealer's, the seats' and the dealer's, searched for in everything
    taken from the dealer, in one pass over each."""
    dealers = dealer_secrets(taken) | dealer_keys(taken)
    index = SecretIndex(codealers | dealers)
    where: dict[str, set[str]] = defaultdict(set)
    detail = []
    sources = [(f"files {name}", "files", data) for name, data in taken.files.items()]
    sources += [(f"memory at {r.start:#x} ({r.name})", "memory", r.data) for r in taken.memory]
    for source, kind, data in sources:
        for f in index.search(data):
            where[kind].add(f.split(" as ")[0])
            detail.append(f"{source}: {f}")
    for kind, text in (("log", taken.log), ("metrics", taken.metrics)):
        for f in index.search_text(text):
            where[kind].add(f.split(" as ")[0])
            detail.append(f"{kind}: {f}")
    return Found(codealers, dealers, where, sorted(detail))


# -- the attacker -------------------------------------------------------------------------------


@dataclass
class Attack:
    named: dict[tuple[str, int], int]
    """(hand id, position) -> the card the attacker names for it."""
    read: int
    """Positions it decrypted with every holder's key."""
    opened_by_own_key: int
    """Positions whose ciphertext, less the keys it holds, was already a card."""
    unsealed: int
    """Sealed shares it opened with a secret it found."""


def attack(directories: Sequence[Path], dealt: Sequence[Dealt]) -> Attack:
    """Name every seat's card from what ``directories`` hold: open every sealed row with every key
    file found there, find which holders' keys and seeds that gives for each hand (checked against
    the public key records), and then decrypt (all keys known), or undo every known permutation
    and take the position itself through the unknown ones (psi = identity: any guess is as good
    when a permutation is uniform and unknown). It also tries every secret it found as a seat's
    X25519 key on the shares the dealer relayed for that hand."""
    opened: dict[str, list[bytes]] = defaultdict(list)
    for directory in directories:
        for hand_id, blobs in _opened_rows(directory).items():
            opened[hand_id] += blobs
    points = card_points(SPEC)
    with closing(sqlite3.connect(f"file:{directories[0] / 'codeal.db'}?mode=ro", uri=True)) as db:
        public = {h: p for h, p in db.execute("SELECT hand_id, public FROM codeal_hands")}
    result = Attack({}, 0, 0, 0)
    decoded: dict[str, tuple[list[KeyRecord], ShuffleRecord]] = {}
    for d in dealt:
        if d.hand_id not in decoded:  # each hand's records decoded once, not once a position
            record = json.loads(public[d.hand_id])
            shuffles = record["shuffles"]
            decoded[d.hand_id] = (
                [KeyRecord.decode(bytes.fromhex(k), i) for i, k in enumerate(record["keys"])],
                ShuffleRecord.decode(bytes.fromhex(shuffles[-1]), SPEC.size, len(shuffles) - 1),
            )
        keys, last = decoded[d.hand_id]
        e = last.deck[d.position]
        xs: dict[int, Scalar] = {}
        psis: dict[int, tuple[int, ...]] = {}
        for blob in opened[d.hand_id]:
            x, seed = Scalar(blob[:32]), blob[32:]
            for k, key in enumerate(keys):
                if mul_base(x) == key.key:
                    xs[k] = x
                if seed_commitment(SPEC, d.hand_id, k, seed) == key.commitment:
                    psis[k] = permutation(SPEC, d.hand_id, k, seed)
        x_sum = Scalar(bytes(32))
        for x in xs.values():
            x_sum = s_add(x_sum, x)
        plain = sub(e.c2, mul(x_sum, e.c1)) if xs else e.c2
        j = d.position
        for k in reversed(range(len(keys))):
            j = psis[k][j] if k in psis else j
        if plain in points:
            result.read += len(xs) == len(keys)
            result.opened_by_own_key += len(xs) < len(keys)
            result.named[(d.hand_id, d.position)] = points[plain]
        else:
            result.named[(d.hand_id, d.position)] = SPEC.card_ids[j]
        tried = {part for b in opened[d.hand_id] for part in (b[:32], b[32:64], b[-32:])}
        for secret in tried:
            for k, sealed in enumerate(d.sealed):
                try:
                    open_sealed_share(SPEC, d.hand_id, d.position, k, sealed, secret)
                    result.unsealed += 1
                except (CodealError, ValueError):
                    pass
    return result


def chance_of_at_least(hits: int, positions_per_hand: Sequence[int], n: int) -> Fraction:
    """P(hits or more) for the attacker's guesses when the unknown permutation is uniform: a guess
    of position p is right exactly when psi_1 fixes p, so a hand's hits are the fixed points of a
    uniform permutation of n among its m dealt positions, P(X = k) = sum over j >= k of
    (-1)^(j-k) C(j, k) C(m, j) (n-j)!/n! (inclusion-exclusion); hands are independent."""
    total = [Fraction(1)]
    for m in positions_per_hand:
        one = [
            sum(
                (
                    Fraction(
                        (-1) ** (j - k) * math.comb(j, k) * math.comb(m, j) * math.factorial(n - j),
                        math.factorial(n),
                    )
                    for j in range(k, m + 1)
                ),
                Fraction(0),
            )
            for k in range(m + 1)
        ]
        assert sum(one) == 1
        total = [
            sum((total[i] * one[k - i] for i in range(len(total)) if 0 <= k - i < len(one)), Fraction(0))
            for k in range(len(total) + m)
        ]
    return sum(total[hits:], Fraction(0))


# -- the tests ----------------------------------------------------------------------------------


def _log10(p: Fraction) -> float:
    return math.log10(p.numerator) - math.log10(p.denominator) if p else -math.inf


def _names(found: set[str]) -> set[str]:
    return {f.split(" as ")[0] for f in found}


def test_the_search_finds_secrets_planted_in_every_form_and_no_random_value() -> None:
    import base64
    import secrets as random_source

    value = random_source.token_bytes(32)
    edged = bytes(5) + random_source.token_bytes(22) + bytes(5)  # zeros at both ends
    index = SecretIndex({"planted": value, "edged": edged})
    for form in (
        value,
        value.hex().encode(),
        value.hex().upper().encode(),
        base64.b64encode(value),
        base64.urlsafe_b64encode(b"\0" + value),
        repr(value).encode(),
    ):
        for offset in range(17):
            hay = random_source.token_bytes(4096 + offset) + form + random_source.token_bytes(333)
            assert _names(index.search(hay)) == {"planted"}, (form, offset)
            # Beside pages of zeros, which the search skips: still found.
            assert index.search(bytes(3 * 4096 - offset) + form + bytes(8192)), (form, offset)
    for offset in range(-6, 6):  # its zero bytes inside the skipped pages
        assert _names(index.search(bytes(4096 + offset) + edged + bytes(4096))) == {"edged"}, offset
    assert not index.search(random_source.token_bytes(1 << 20) + bytes(1 << 16))


def test_the_memory_dump_is_real_it_holds_the_dealers_own_key_of_every_live_hand(
    taken: Taken, found: Found
) -> None:
    """The positive control of the dump: the dealer's own per-hand key x_0, which it keeps while
    the hand is live, is found in its memory for every hand (so a co-dealer secret would be too)."""
    own_keys = {name for name in found.dealers if name.endswith("x_0")}
    assert len(own_keys) == HANDS and own_keys <= found.where["memory"], found.detail
    assert sum(len(r.data) for r in taken.memory) > 20 << 20  # the whole process, not a page of it


def test_the_same_search_finds_the_codealers_key_of_every_live_hand_in_the_codealers_memory(
    taken: Taken, codealers: dict[str, bytes]
) -> None:
    """The control of the search below: where the co-dealer's secrets are (its own process), the
    same search, over a dump taken the same way, finds each live hand's x_1."""
    x1 = {name: value for name, value in codealers.items() if name.endswith("x_1")}
    index = SecretIndex(x1)
    assert _names(set().union(*(index.search(r.data) for r in taken.codealer_memory))) == set(x1)


def test_none_of_the_codealers_or_seats_secrets_is_anywhere_the_dealer_holds(found: Found) -> None:
    leaks = [d for d in found.detail if d.split(": ", 1)[1].split(" as ")[0] in found.codealers]
    assert len(found.codealers) > HANDS * SEATS * HOLE * 6  # every kind, for every seat position
    assert not leaks, leaks[:20]


def test_the_dealers_log_and_metrics_hold_no_seed_key_or_hole_card(taken: Taken, found: Found) -> None:
    """Secret hygiene: the dealer's own unrevealed per-hand key and seed are in none of its log
    lines, its metrics or its files in the clear (sealed in codeal.db only); its seed key and log
    signing key are in neither log nor metrics; no hole card is named in either."""
    assert " DEBUG " in taken.log and "DrawCards" in taken.metrics  # what was taken is the real thing
    per_hand = {name for name in found.dealers if name.endswith(("x_0", "S_0"))}
    assert not (found.where["log"] | found.where["metrics"]) & set(found.dealers), found.detail
    assert not found.where["files"] & per_hand, found.detail
    codes = {SPEC.card_for_id(d.card).code for d in taken.dealt}
    named = re.compile(r"(?<![0-9A-Za-z])(" + "|".join(sorted(codes)) + r")(?![0-9A-Za-z])")
    assert not [line for line in taken.log.splitlines() if named.search(line)]
    assert not named.search(taken.metrics)


def test_an_attacker_with_everything_the_dealer_holds_names_hole_cards_at_chance(taken: Taken) -> None:
    result = attack([taken.data_dir], taken.dealt)
    assert result.read == 0 and result.opened_by_own_key == 0 and result.unsealed == 0
    truth = {(d.hand_id, d.position): d.card for d in taken.dealt}
    hits = sum(result.named[where] == card for where, card in truth.items())
    per_hand = list(Counter(d.hand_id for d in taken.dealt).values())
    chance = chance_of_at_least(hits, per_hand, SPEC.size)
    # Chance alone gives len(truth) / 52 hits (about 4.6 of 240); doing this well by luck:
    assert chance >= FALSE_ALARM, f"{hits} of {len(truth)} named: P = 10^{_log10(chance):.1f} by chance"


def test_control_given_the_codealers_directory_too_the_same_attacker_names_every_card(
    taken: Taken,
) -> None:
    result = attack([taken.data_dir, taken.codealer_dir], taken.dealt)
    truth = {(d.hand_id, d.position): d.card for d in taken.dealt}
    assert result.named == truth and result.read == len(truth)
    assert result.unsealed == 0  # the co-dealer's per-hand secrets are no seat's key either
    assert chance_of_at_least(len(truth), [SEATS * HOLE] * HANDS, SPEC.size) < FALSE_ALARM
