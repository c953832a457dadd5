"""Every numeric option of ``fairdeck serve``, at its minimum, its maximum, 0, negative, huge, NaN
and infinite, from a flag, the environment and the config file: it is taken as it is, and gRPC
accepts what it feeds, or it is refused in one line that names the option, where the value came
from, and the allowed range. Never a traceback. Here through the config layer, in process; a real
dealer at the values that reach gRPC is in tests/run/test_option_bounds_serve.py."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import grpc
import pytest

from fairdeck.cli import build_parser
from fairdeck.log.cosignature import Cosigner
from fairdeck_server.edge.deadline import STREAM_RUNS
from fairdeck_server.edge.transport import grpc_options
from fairdeck_server.run import config
from fairdeck_server.run.option_ranges import (
    GRPC_INT_MAX,
    HEARTBEAT_SECONDS,
    RANGES,
    WORKER_TIMEOUT_MIN,
    Range,
)

NUMERIC = [o for o in config.OPTIONS if o.kind in (int, float)]
_KEY = Cosigner.from_seed("witness.test/w", bytes(32)).verifier.to_string()
WITNESSES = [f"http://127.0.0.1:{7000 + i}={_KEY}" for i in range(3)]
CONTEXT: dict[str, dict[str, Any]] = {
    # What an option's values need from the others: a threshold counts witnesses, a burst of 0
    # needs the rate limit off.
    "witness_threshold": {"witnesses": WITNESSES},
    "rate_burst": {"rate_limit": 0},
    "codeal_pool": {"codealer": "127.0.0.1:3000"},  # refused without it, whatever its value
}
NAN, INF = math.nan, math.inf


def probes(option: config.Option) -> list[Any]:
    """The values every option is tried at."""
    bounds = RANGES[option.name]
    step = 1 if option.kind is int else bounds.low / 2 or 0.5
    values: list[Any] = [bounds.low, bounds.high, 0, -1, bounds.low - step, bounds.high * 2 + 1]
    values += [10**30, 2**31, 2**63] if option.kind is int else [1e300, NAN, INF, -INF, 1e-300]
    return [option.kind(v) if math.isfinite(v) else v for v in values]


def allowed(name: str, value: Any) -> bool:
    bounds = RANGES[name]
    if isinstance(value, float) and not math.isfinite(value):
        return False
    ok = (bounds.off and value == 0) or bounds.low <= value <= bounds.high
    if name == "witness_threshold":
        ok = ok and value <= len(WITNESSES)
    return bool(ok)


def text(value: Any) -> str:
    return repr(value) if isinstance(value, float) and math.isfinite(value) else str(value).lower()


def toml_literal(key: str, value: Any) -> str:
    if isinstance(value, list):
        return f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]\n"
    if isinstance(value, str):
        return f'{key} = "{value}"\n'
    return f"{key} = {text(value)}\n"


def resolve(name: str, value: Any, source: str, tmp_path: Path) -> config.Settings:
    option = config.OPTIONS_BY_NAME[name]
    path = tmp_path / "fairdeck.toml"
    body = "".join(toml_literal(k, v) for k, v in CONTEXT.get(name, {}).items())
    argv, env = ["serve", "--config", str(path)], {}
    if source == "file":
        body += toml_literal(name, value)
    elif source == "env":
        env[option.env] = text(value)
    else:
        argv.append(f"{option.flag}={text(value)}")
    path.write_text(body)
    args = build_parser().parse_args(argv)
    return config.load(config.flags_given(args), env, args.config)


def test_every_numeric_option_has_a_range_and_its_help_shows_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert {o.name for o in NUMERIC} == set(RANGES)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for name, bounds in RANGES.items():
        assert bounds.describe() in shown, name


def test_the_ranges_fit_what_they_feed() -> None:
    """gRPC's durations are int milliseconds; the connection age's grace is STREAM_RUNS + 1
    default deadlines; the worker timeout leaves a worker several heartbeats."""
    for name in ("handshake_timeout", "connection_idle_timeout", "max_connection_age"):
        assert int(RANGES[name].low * 1000) >= 1 and int(RANGES[name].high * 1000) <= GRPC_INT_MAX
    assert RANGES["default_deadline"].high * (STREAM_RUNS + 1) * 1000 <= GRPC_INT_MAX
    for name in ("max_message_bytes", "max_request_bytes", "max_connections"):
        assert RANGES[name].high <= GRPC_INT_MAX
    assert WORKER_TIMEOUT_MIN >= 4 * HEARTBEAT_SECONDS == RANGES["worker_timeout"].low


@pytest.mark.parametrize("source", ["flag", "env", "file"])
@pytest.mark.parametrize("name", sorted(RANGES))
def test_every_numeric_option_is_taken_or_refused_in_one_line_at_every_bound(
    name: str, source: str, tmp_path: Path
) -> None:
    option = config.OPTIONS_BY_NAME[name]
    bounds = RANGES[name]
    for value in probes(option):
        try:
            settings = resolve(name, value, source, tmp_path)
        except config.ConfigError as e:
            message = str(e)
            assert not allowed(name, value), f"{name}={value!r} from {source} refused: {message}"
            assert "\n" not in message
            assert message.startswith(option.where(source, tmp_path / "fairdeck.toml") + ": "), message
            if name != "witness_threshold" or value < 0 or value > bounds.high:
                assert bounds.describe() in message, message
            continue
        assert allowed(name, value), f"{name}={value!r} from {source} was taken"
        assert getattr(settings.server, name) == value
        if name in FEEDS_GRPC:
            _grpc_takes(settings.server)


FEEDS_GRPC = {
    "handshake_timeout",
    "connection_idle_timeout",
    "max_connection_age",
    "default_deadline",
    "max_message_bytes",
    "max_request_bytes",
    "max_connections",
}


def _grpc_takes(server_config: config.ServerConfig) -> None:
    """gRPC builds a server from the options the dealer gives it (the OverflowError was here)."""

    async def build() -> None:
        options = grpc_options(server_config, reuseport=False, max_connections=server_config.max_connections)
        server = grpc.aio.server(options=options)
        await server.stop(None)

    asyncio.run(build())


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--default-deadline", "200000", "must be 0 (no limit) or from 0.001 to 86400 seconds, not 200000"),
        ("--handshake-timeout", "1e7", "must be from 0.1 to 2147483.647 seconds, not 10000000"),
        ("--connection-idle-timeout", "1e9", "or from 0.1 to 2147483.647 seconds, not 1000000000"),
        ("--max-connection-age", "1e9", "or from 0.1 to 2147483.647 seconds, not 1000000000"),
        ("--max-message-bytes", str(2**40), "or from 65536 to 2147483647 bytes, not 1099511627776"),
        ("--worker-timeout", "0.4", "must be 0 (never) or from 2 to 86400 seconds, not 0.4 (a worker beats"),
    ],
)
def test_overflowing_and_heartbeat_short_values_are_refused_naming_the_range(
    flag: str, value: str, expected: str, tmp_path: Path
) -> None:
    """These ended in an OverflowError traceback from gRPC, or (the worker timeout below the
    0.5 s heartbeat) were taken and killed healthy workers under load."""
    args = build_parser().parse_args(["serve", flag, value])
    with pytest.raises(config.ConfigError) as refused:
        config.load(config.flags_given(args), {}, None)
    assert str(refused.value) == f"{flag} (flag): {expected}" or expected in str(refused.value)
    assert str(refused.value).startswith(f"{flag} (flag): ")


def test_a_range_describes_its_off_value_and_refuses_nan() -> None:
    bounds = Range(1, 10, "seconds", off="never")
    assert bounds.describe() == "0 (never) or from 1 to 10 seconds"
    bounds.check(0)
    bounds.check(10)
    for bad in (NAN, INF, -INF, 0.5, 11, -1):
        with pytest.raises(ValueError, match="must be 0 \\(never\\) or from 1 to 10 seconds"):
            bounds.check(bad)


def test_operations_md_lists_every_range() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    table = text.split("### Ranges", 1)[1].split("\n## ", 1)[0]
    for name, bounds in RANGES.items():
        assert f"| `{config.OPTIONS_BY_NAME[name].flag}` | {bounds.describe()} |" in table, name
