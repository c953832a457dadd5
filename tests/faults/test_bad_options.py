"""Bad options: a value past what it feeds (gRPC's 32-bit milliseconds, the workers' heartbeat) is
refused before the dealer starts, in one line naming the option, its source and the range, exit 2,
whichever way it came (flag, config file); at the least worker timeout allowed, a dealer under
load kills no healthy worker. Every option at every bound is in tests/run/test_option_ranges.py."""

from __future__ import annotations

import threading

from tests.support.faults import FaultRun, lines


def test_values_past_what_they_feed_are_refused_in_one_line(run: FaultRun) -> None:
    config = run.tmp / "fairdeck.toml"
    config.write_text("default_deadline = 200000.0\n")
    for args, starts in [
        (
            ("--max-connection-age", "1e9"),
            "fairdeck serve: --max-connection-age (flag): must be 0 (no limit) or",
        ),
        (("--config", str(config)), f"fairdeck serve: default_deadline (config file {config}): must be 0"),
        (
            ("--processes", "2", "--worker-timeout", "0.4"),
            "fairdeck serve: --worker-timeout (flag): must be 0 (never) or from 2 to 86400 seconds, not 0.4",
        ),
    ]:
        err = run.start_refused(*args)
        assert len(err.splitlines()) == 1 and err.startswith(starts), err
        assert "Traceback" not in err
    dealer = run.start()  # the same data dir starts once the values are right
    run.ledger.deal(dealer.target, 2)


def test_the_least_worker_timeout_kills_no_healthy_worker_under_load(run: FaultRun) -> None:
    """--worker-timeout 0.4, under the 0.5 s heartbeat, killed 38 healthy workers in 25 s; the
    least now allowed is four heartbeats."""
    dealer = run.start("--processes", "2", "--worker-timeout", "2")
    threads = [threading.Thread(target=run.ledger.deal, args=(dealer.target, 40)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(run.ledger.closed) == 160
    assert not lines(dealer, "stopped answering"), dealer.stderr()
