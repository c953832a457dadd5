"""The no-leak test: a full session against a dealer that requires tokens,
with DEBUG logging captured from every logger (gRPC's included), the client's
error messages, the /metrics text and the database files, searched for every
secret: each unrevealed server seed, each API token and its secret, the seed
key and the log signing key, raw and in hex (both cases), base64 and
base64url at every alignment, and as a Python bytes repr.

The search is tested too: secrets planted through the same capture are found
in every encoding, and a random value is not.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import secrets
import sqlite3
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from fairdeck.cli import main
from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck_server.dealing.vault import load_or_create_key, read_key_file
from fairdeck_server.policy.auth import split_token, token_digest
from fairdeck_server.publishing.log_signing import load_log_keys
from tests.support.dealers import RunningDealer
from tests.support.secret_forms import forms

# -- encodings and the search -------------------------------------------------------------------


@dataclass
class Secret:
    what: str
    value: bytes | str
    needles: list[str | bytes] = field(init=False)

    def __post_init__(self) -> None:
        self.needles = forms(self.value)


def find(secrets_: list[Secret], text: str) -> list[str]:
    """What of ``secrets_`` appears in ``text`` (searched as text, and as UTF-8 and
    Latin-1 bytes, so raw bytes decoded either way are found)."""
    blobs = [text.encode("utf-8", "surrogateescape"), text.encode("latin-1", "replace")]
    found = []
    for s in secrets_:
        for needle in s.needles:
            if any(needle in b for b in blobs) if isinstance(needle, bytes) else (needle in text):
                found.append(f"{s.what} as {needle!r}")
                break
    return found


class Capture(logging.Handler):
    """Every record, formatted as text and as JSON (when the dealer's JSON
    formatter exists), plus its exception text and every extra attribute."""

    STANDARD = set(vars(logging.LogRecord("n", 0, "p", 0, "m", None, None))) | {"message", "asctime"}

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.plain = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.json: logging.Formatter | None = None
        with contextlib.suppress(ImportError):
            from fairdeck_server.observe.logging_setup import CallFilter, JsonFormatter

            self.addFilter(CallFilter())
            self.json = JsonFormatter()

    def emit(self, record: logging.LogRecord) -> None:
        parts = [self.plain.format(record)]
        if self.json is not None:
            parts.append(self.json.format(record))
        parts += [f"{k}={v!r}" for k, v in vars(record).items() if k not in self.STANDARD]
        self.lines.append("\n".join(parts))


@contextlib.contextmanager
def capture_everything() -> Iterator[Capture]:
    handler = Capture()
    root = logging.getLogger()
    touched = [root, *(logging.getLogger(n) for n in ("grpc", "grpc._cython", "grpc.aio", "asyncio"))]
    touched += [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)]
    levels = [(lg, lg.level, lg.disabled) for lg in touched]
    for lg in touched:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        for lg, level, disabled in levels:
            lg.setLevel(level)
            lg.disabled = disabled


# -- the session ------------------------------------------------------------------------------------


@dataclass
class Session:
    lines: list[str]
    before_close: int
    """Lines logged before the hands of ``closed_late`` were closed."""
    errors: list[str]
    cli_output: str
    metrics: str | None
    db_files: list[bytes]
    unrevealed: list[Secret]
    closed_late: list[Secret]
    keys: list[Secret]


def _token(data: Path, tenant: str, role: str, err: io.StringIO) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["token", "create", "--data", str(data), "--tenant", tenant, "--role", role]) == 0
    return out.getvalue().strip()


def _seeds(data: Path, hand_ids: list[str]) -> dict[str, bytes]:
    vault = load_or_create_key(data / "seed.key", environ={})
    with sqlite3.connect(data / "fairdeck.db") as db:
        rows = db.execute("SELECT hand_id, sealed_seed FROM hands").fetchall()
    return {h: vault.open(h, bytes(s)) for h, s in rows if h in hand_ids}


def run_session(data: Path) -> Session:
    cli_err = io.StringIO()
    errors: list[str] = []

    def refused(call: Callable[[], Any]) -> None:
        with pytest.raises(FairdeckError) as e:
            call()
        errors.append(f"{e.value.code} {e.value.reason} {e.value.field} {e.value}")

    with capture_everything() as captured:
        assert main(["init", "--data", str(data)]) == 0  # tokens need the database init makes
        dealer_a, dealer_b = _token(data, "alpha", "dealer", cli_err), _token(data, "beta", "dealer", cli_err)
        auditor = _token(data, "alpha", "auditor", cli_err)
        running = RunningDealer(data, require_auth=True, metrics_listen="127.0.0.1:0")
        running.start()
        try:
            t = running.target
            with (
                DealerClient(t, api_token=dealer_a, timeout=10) as a,
                DealerClient(t, api_token=dealer_b, timeout=10) as b,
                DealerClient(t, api_token=auditor, timeout=10) as aud,
            ):
                open_only = a.open_hand()
                a.add_client_seeds(open_only.hand_id, ["seat 1", b"\x00\x01"])
                shuffled = a.open_hand("shoe-2")
                a.shuffle(shuffled.hand_id, ["alice", "bob"])
                a.draw(shuffled.hand_id, 5)
                whole = a.deal_new_hand("jokers", client_seeds=["c"])
                dealt = a.open_hand()
                a.deal(dealt.hand_id)
                batch = list(a.deal_hands("standard", 40, client_seeds=["batch"]))
                revealed_batch = list(a.deal_hands("short", 5, close=True))
                closed_now = a.close_hand(a.deal_new_hand().hand.hand_id)
                late = [shuffled.hand_id, dealt.hand_id]

                # Errors on purpose, of every kind.
                token_id, secret = split_token(dealer_a)  # type: ignore[misc]
                refused(lambda: a.open_hand("no-such-deck"))
                refused(lambda: a.draw("bad id!", 1))
                refused(lambda: a.draw(shuffled.hand_id, 0))
                refused(lambda: a.draw(shuffled.hand_id, 500))
                refused(lambda: a.draw(closed_now.hand_id, 1))
                refused(lambda: a.add_client_seeds(shuffled.hand_id, ["late"]))
                refused(lambda: a.open_hand(request_id="rid-1") and a.open_hand("short", request_id="rid-1"))
                refused(lambda: a.deal_new_hand(request_id="rid-1"))
                refused(lambda: b.get(open_only.hand_id))
                refused(lambda: b.close_hand(shuffled.hand_id))
                refused(lambda: aud.open_hand())
                refused(lambda: aud.get(open_only.hand_id))
                refused(lambda: list(aud.deal_hands("standard", 2)))
                for bad in [f"fdk_{token_id}_{secret[::-1]}", dealer_a + "x", secret, "Bearer x"]:
                    with DealerClient(t, api_token=bad, timeout=10) as wrong:
                        refused(lambda w=wrong: w.get(open_only.hand_id))  # type: ignore[misc]
                with DealerClient(t, timeout=10) as anonymous:
                    refused(lambda: anonymous.open_hand())
                with grpc.insecure_channel(t) as channel:
                    garbage = channel.unary_unary("/fairdeck.v1.DealerService/DrawCards")
                    with pytest.raises(grpc.RpcError) as malformed:
                        garbage(
                            b"\xff\xff\xff", metadata=(("authorization", f"Bearer {dealer_a}"),), timeout=10
                        )
                    errors.append(f"{malformed.value.code()} {malformed.value.details()}")

                vkey = running.server.publisher.signer.verifier  # type: ignore[union-attr]
                with AuditClient(t, verifier=vkey, api_token=auditor) as log:
                    log.verify_hand(closed_now, commitment=closed_now.commitment)
                    log.inclusion_proof(hand_id=open_only.hand_id)
                    sum(1 for _ in log.entries())
                    with contextlib.suppress(FairdeckError):
                        log.inclusion_proof(10**9)

                before_close = len(captured.lines)
                for hand_id in late:
                    a.close_hand(hand_id)
            port = getattr(running.server, "metrics_port", 0)
            metrics = None
            if port:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
                    metrics = reply.read().decode()
        finally:
            running.close()
        lines = list(captured.lines)

    unrevealed_ids = [open_only.hand_id, whole.hand.hand_id, *(h.hand_id for h in batch)]
    seeds = _seeds(data, unrevealed_ids + late)
    assert len(seeds) == len(unrevealed_ids) + len(late) == 44
    assert all(h.server_seed is None for h in batch) and all(h.server_seed for h in revealed_batch)
    log_keys = load_log_keys(data / "log.key")
    tokens = [dealer_a, dealer_b, auditor]
    keys = [Secret("seed key", k) for k in read_key_file(data / "seed.key")]
    keys += [
        Secret("log signing key", log_keys.signer.seed),
        Secret("log key file", log_keys.signer.to_string()),
    ]
    for token in tokens:
        token_id, secret = split_token(token)  # type: ignore[misc]
        keys += [Secret(f"token {token_id}", token), Secret(f"secret of {token_id}", secret)]
        keys.append(Secret(f"secret bytes of {token_id}", base64.urlsafe_b64decode(secret + "=")))
    db_files = [p.read_bytes() for p in sorted(data.glob("fairdeck.db*"))]
    return Session(
        lines=lines,
        before_close=before_close,
        errors=errors,
        cli_output=cli_err.getvalue(),
        metrics=metrics,
        db_files=db_files,
        unrevealed=[Secret(f"unrevealed seed of {h}", seeds[h]) for h in unrevealed_ids],
        closed_late=[Secret(f"seed of {h} before its close", seeds[h]) for h in late],
        keys=keys,
    )


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return run_session(tmp_path_factory.mktemp("noleak") / "data")


def digests(session: Session) -> list[Secret]:
    out = []
    for s in session.keys:
        if s.what.startswith("token ") and isinstance(s.value, str):
            out.append(Secret(f"digest of {s.what}", token_digest(*split_token(s.value))))  # type: ignore[misc]
    return out


# -- the checks -------------------------------------------------------------------------------------


def test_the_session_logged_at_debug_from_grpc_too(session: Session) -> None:
    loggers = {line.split(": ", 1)[0].split()[-1] for line in session.lines}
    assert any(name.startswith("fairdeck_server") for name in loggers), loggers
    assert len(session.lines) > 20
    assert len(session.errors) >= 18


def test_no_secret_in_any_log_line(session: Session) -> None:
    every = session.unrevealed + session.keys + digests(session)
    text = "\n".join(session.lines)
    assert find(every, text) == []
    assert find(session.closed_late, "\n".join(session.lines[: session.before_close])) == []


def test_no_secret_in_error_messages_or_command_output(session: Session) -> None:
    every = session.unrevealed + session.closed_late + session.keys + digests(session)
    assert find(every, "\n".join(session.errors)) == []
    assert find(every, session.cli_output) == []


def test_no_secret_in_the_database_files(session: Session) -> None:
    # The tokens table holds digests by design; nothing else may be there.
    every = session.unrevealed + session.keys
    for content in session.db_files:
        assert find(every, content.decode("latin-1")) == []
        found = [s.what for s in every if any(n in content for n in s.needles if isinstance(n, bytes))]
        assert found == []


def test_no_secret_in_metrics(session: Session) -> None:
    if session.metrics is None:
        pytest.skip(
            "ServerConfig.metrics_listen is not serving /metrics yet (DealerServer.metrics_port unset)"
        )
    assert "fairdeck_" in session.metrics
    every = session.unrevealed + session.closed_late + session.keys + digests(session)
    assert find(every, session.metrics) == []


# -- the search itself can fail -----------------------------------------------------------------------


def test_the_search_finds_planted_secrets() -> None:
    seed = secrets.token_bytes(32)
    token = "fdk_0123456789abcdef_" + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    planted = [Secret("seed", seed), Secret("token", token)]
    b64 = base64.b64encode
    encodings: list[Callable[[bytes], str]] = [
        lambda s: s.hex(),
        lambda s: s.hex().upper(),
        lambda s: b64(s).decode(),
        lambda s: base64.urlsafe_b64encode(s).decode(),
        lambda s: b64(b"x" + s + b"yz").decode(),  # inside a bigger blob, misaligned
        lambda s: b64(b"xy" + s).decode(),
        lambda s: base64.urlsafe_b64encode(b"\xfb\xff" + s + b"\xff").decode(),
        lambda s: repr(s),
        lambda s: s.decode("latin-1"),
    ]
    for i, encode in enumerate(encodings):
        with capture_everything() as captured:
            logging.getLogger("grpc._cython.cygrpc").debug("planted %d: value=%s;", i, encode(seed))
        assert find(planted, "\n".join(captured.lines)) != [], f"encoding {i} not found"
    with capture_everything() as captured:
        logging.getLogger("fairdeck_server.policy.auth").info(
            "header %s", {"authorization": f"Bearer {token}"}
        )
        logging.getLogger("tests").warning("extra", extra={"who": token.split("_", 2)[2]})
    found = find(planted, "\n".join(captured.lines))
    assert len(found) == 1 and found[0].startswith("token")
    # A value never logged is not reported (the search does not match everything).
    with capture_everything() as captured:
        logging.getLogger("tests").debug("unrelated %s", secrets.token_bytes(32).hex())
    assert find(planted, "\n".join(captured.lines)) == []
