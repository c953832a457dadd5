"""A replica's co-dealt claim on PostgreSQL (dealing/codeal_claim.py) as its renewals and stops meet
it: a renewal that hangs (the claim's own backend stopped with SIGSTOP, as a blackholed link or a
frozen database leaves it: the kernel still acks, nothing answers) must stop co-dealt calls while
the claim is not known to be held, without a half-opened hand, and let them on once a renewal
succeeds; a clean stop releases the claim so that the replica's next start takes it at once, a
kill -9 does not. Real ``fairdeck serve`` and ``fairdeck codealer serve`` processes, real SQLite
files, a real PostgreSQL database, through the SDK; an open whose claim lapses midway, in process
over a real co-dealer (tests/support/codeal_pool.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands
from fairdeck.client.exceptions import FairdeckError
from fairdeck.codeal.entries import SETUP
from fairdeck.wire import Reason
from fairdeck_server.dealing.codeal_health import CODEAL_HEALTH
from fairdeck_server.dealing.vault import load_or_create_key
from fairdeck_server.publishing.log_signing import load_or_create_signer
from fairdeck_server.refusals import DealerError
from tests.support.codeal_pool import close, fill, logged_setups, make_dealer, pooled
from tests.support.codealers import SERVING, CodealerProcess, init_codealer, status
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker
from tests.support.waits import wait_for


@pytest.fixture
def codealer(tmp_path: Path, serve_forker: ServeForker) -> Iterator[CodealerProcess]:
    init_codealer(tmp_path / "cd")
    with CodealerProcess(tmp_path / "cd", forker=serve_forker) as process:
        yield process


def replica_flags(tmp_path: Path, url: str, codealer: CodealerProcess) -> tuple[str, ...]:
    seed_key, log_key = tmp_path / "seed.key", tmp_path / "log.key"
    load_or_create_key(seed_key, environ={})
    load_or_create_signer(log_key, "fairdeck.test/codeal-renewals")
    keys = ("--seed-key-file", str(seed_key), "--log-key-file", str(log_key))
    return ("--db", url, *keys, "--log-level", "INFO", *codealer.dealer_flags())


def renewal_backend(url: str) -> int | None:
    """The pid of the PostgreSQL backend of the claim's renewals (one idle connection), or None."""
    with psycopg.connect(url, autocommit=True) as db:
        rows = db.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'fairdeck-codeal' "
            "AND datname = current_database() AND state = 'idle'"
        ).fetchall()
    return int(rows[0][0]) if len(rows) == 1 else None


def hand_rows(data: Path) -> int:
    """Hands (not pooled decks) in the replica's codeal.db, read beside the running dealer."""
    with sqlite3.connect(f"file:{data / 'codeal.db'}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM codeal_hands WHERE tenant != ''").fetchone()[0])


def logged_setups_pg(url: str) -> int:
    """Co-dealt setup entries in the shared log."""
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute(
            "SELECT count(*) FROM log_entries WHERE substring(entry FROM 1 FOR 5) = %s",
            (b"FDL1" + bytes([SETUP]),),
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.light
def test_codealt_calls_were_accepted_while_the_claims_renewal_hung(
    tmp_path: Path, pg_url: str, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """Health said NOT_SERVING while the renewal hung, yet opens and draws went on until it came
    back (never, on a blackholed link): now they are refused UNAVAILABLE STORAGE_UNAVAILABLE once
    no renewal was confirmed for a round and a margin, leave no hand behind, and are taken again
    once a renewal succeeds."""
    data = tmp_path / "a"
    data.mkdir()
    flags = replica_flags(tmp_path, pg_url, codealer)
    dealer = DealerProcess(data, tmp_path / "a.log", *flags, forker=serve_forker)
    with dealer, DealerClient(dealer.target, timeout=60, retries=0) as client:
        hands = CodealHands(client)
        opened = hands.open_hand("standard").hand_id
        wait_for("co-dealt health SERVING", lambda: status(dealer.target, CODEAL_HEALTH) == SERVING)
        backend = wait_for("the claim's renewal connection", lambda: renewal_backend(pg_url))
        accepted: list[str] = []

        def refused() -> FairdeckError | None:
            try:
                accepted.append(hands.open_hand("standard").hand_id)
            except FairdeckError as e:
                return e
            return None

        os.kill(backend, signal.SIGSTOP)
        try:
            error = wait_for("a co-dealt open refused while the renewal hangs", refused, timeout=40)
            assert error.code == grpc.StatusCode.UNAVAILABLE, error
            assert error.reason == "STORAGE_UNAVAILABLE", error
            assert "cannot confirm that this replica holds co-dealt record" in str(error), error
            assert "\n" not in str(error)
            assert hand_rows(data) == 1 + len(accepted) == logged_setups_pg(pg_url)  # no half hand
            with pytest.raises(FairdeckError) as draw:
                hands.draw(opened, 2)
            assert draw.value.reason == "STORAGE_UNAVAILABLE", draw.value
            assert hand_rows(data) == 1 + len(accepted) == logged_setups_pg(pg_url)
        finally:
            os.kill(backend, signal.SIGCONT)
        again = wait_for(
            "a co-dealt open taken again once a renewal succeeds",
            lambda: None if refused() is not None else accepted[-1],
            timeout=40,
        )
        hands.draw(again, 2)
        hands.close_hand(again)
        hands.close_hand(opened)
    said = (tmp_path / "a.log").read_text()
    assert "Traceback" not in said


def test_codealt_health_said_serving_for_seconds_after_codealt_calls_were_refused_as_the_claim_lapsed(
    tmp_path: Path, pg_url: str, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """Calls were refused from 4 s after the last confirmed renewal, but co-dealt health said
    NOT_SERVING only at the next health round, up to 3 s later: a balancer kept routing co-dealt
    tables to a dealer that refused them. Health and calls now share the claim's one deadline
    (Check asks the calls' own check): polled against each other while the renewal hangs, no
    health check after the first refused call says SERVING. The call is a draw with a bad seat
    key: the claim is checked first, and it changes nothing, so each poll takes milliseconds."""
    data = tmp_path / "a"
    data.mkdir()
    dealer = DealerProcess(
        data, tmp_path / "a.log", *replica_flags(tmp_path, pg_url, codealer), forker=serve_forker
    )
    with dealer, DealerClient(dealer.target, timeout=60, retries=0) as client:
        hands = CodealHands(client)
        opened = hands.open_hand("standard").hand_id
        wait_for("co-dealt health SERVING", lambda: status(dealer.target, CODEAL_HEALTH) == SERVING)
        backend = wait_for("the claim's renewal connection", lambda: renewal_backend(pg_url))
        seen: list[tuple[int, str | None]] = []  # (health, the call's refusal) in the order asked

        def polled() -> bool:
            health = status(dealer.target, CODEAL_HEALTH)
            with pytest.raises(FairdeckError) as call:
                hands.draw(opened, 1, seat_public_key=b"k" * 31)
            if call.value.reason == "INVALID_SEAT_KEY":  # taken: the claim held
                seen.append((health, None))
            else:
                assert call.value.reason == "STORAGE_UNAVAILABLE" and "cannot confirm" in str(call.value)
                seen.append((health, str(call.value)))
            refused = [i for i, (_, why) in enumerate(seen) if why is not None]
            return bool(refused) and len(seen) - refused[0] > 20  # and 20 rounds more

        os.kill(backend, signal.SIGSTOP)
        try:
            wait_for("co-dealt calls refused while the renewal hangs", polled, timeout=60, every=0)
        finally:
            os.kill(backend, signal.SIGCONT)
        first = next(i for i, (_, why) in enumerate(seen) if why is not None)
        late = [i - first for i, (health, _) in enumerate(seen) if i > first and health == SERVING]
        assert late == [], f"health said SERVING at these polls after the first refused call: {late}"
        assert all(why is not None for _, why in seen[first:]), seen[first:]
        wait_for("co-dealt health SERVING again", lambda: status(dealer.target, CODEAL_HEALTH) == SERVING)
        hands.draw(opened, 2)
        hands.close_hand(opened)
    assert "Traceback" not in (tmp_path / "a.log").read_text()


@pytest.mark.light
def test_a_clean_restart_waited_out_its_own_claim_a_crashed_one_still_does(
    tmp_path: Path, pg_url: str, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """A replica stopped cleanly and started again waited up to 6 s at its claim, as after a
    crash (its process before renewed it under 6 s ago). A clean stop now marks the claim released
    (said at INFO), and the restart takes it without waiting; a kill -9 leaves it unmarked, so the
    start after a crash still tells itself from a live twin (the wait: tests/dealing)."""
    data = tmp_path / "a"
    data.mkdir()
    flags = replica_flags(tmp_path, pg_url, codealer)
    with DealerProcess(data, tmp_path / "first.log", *flags, forker=serve_forker) as dealer:
        wait_for("co-dealt health SERVING", lambda: status(dealer.target, CODEAL_HEALTH) == SERVING)
    first = (tmp_path / "first.log").read_text()
    assert "its claim of record" in first and "released" in first, first
    assert claim_instances(pg_url) == [""]
    with DealerProcess(data, tmp_path / "second.log", *flags, forker=serve_forker) as dealer:
        with DealerClient(dealer.target, timeout=60) as client:
            CodealHands(client).open_hand("standard")
        wait_for("co-dealt health SERVING", lambda: status(dealer.target, CODEAL_HEALTH) == SERVING)
        dealer.kill9()
    assert "to tell them apart" not in (tmp_path / "second.log").read_text()
    (crashed,) = claim_instances(pg_url)
    assert crashed != "", "a killed process released its claim"
    third = DealerProcess(data, tmp_path / "third.log", *flags, forker=serve_forker)
    with third, DealerClient(third.target, timeout=60) as client:
        CodealHands(client).open_hand("standard")
    assert "Traceback" not in (tmp_path / "third.log").read_text()
    assert claim_instances(pg_url) == [""]


def claim_instances(url: str) -> list[str]:
    """The instance of each claim row ('': released at a clean stop)."""
    with psycopg.connect(url, autocommit=True) as db:
        return [str(i) for (i,) in db.execute("SELECT instance FROM codeal_claims").fetchall()]


def test_an_open_whose_claim_lapsed_midway_took_its_deck_or_logged_its_hand(tmp_path: Path) -> None:
    """The claim checked only as an open began: one that lapsed while the co-dealer answered still
    took the pooled deck, or logged the hand made for it. It is checked again just before the
    open's first write, so a refused open leaves the deck pooled and nothing logged or stored."""
    lapsed: list[str] = []
    ready: list[str] = []

    async def scene() -> None:
        dealer = make_dealer(tmp_path)
        await fill(dealer, [("t", "short")], 2)
        ready.extend(pooled(tmp_path))
        dealer.unconfirmed = lambda: lapsed[0] if lapsed else None
        announce = dealer.link.announce

        async def lapsing(hand_id: str, deck: str, holder: int, holders: int) -> tuple[bytes, bytes, bytes]:
            answer = await announce(hand_id, deck, holder, holders)
            lapsed.append("cannot confirm that this replica holds co-dealt record R: no renewal confirmed")
            return answer

        dealer.link.announce = lapsing  # type: ignore[method-assign]
        with pytest.raises(DealerError) as taking:
            await dealer.open_hand("t", "short")
        assert taking.value.reason == Reason.STORAGE_UNAVAILABLE
        lapsed.clear()
        dealer.pool = None  # the open makes its hand now
        with pytest.raises(DealerError) as making:
            await dealer.open_hand("t", "short")
        assert making.value.reason == Reason.STORAGE_UNAVAILABLE
        await close(dealer)

    asyncio.run(scene())
    assert sorted(pooled(tmp_path)) == sorted(ready) and len(ready) == 2
    assert logged_setups(tmp_path) == []
    with sqlite3.connect(tmp_path / "codeal.db") as db:
        assert db.execute("SELECT count(*) FROM codeal_hands WHERE tenant != ''").fetchone() == (0,)
