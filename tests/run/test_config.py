"""Configuration: every ServerConfig field is a flag, an environment variable
and a config file key; flags beat the environment, which beats the file,
which beats the defaults; anything wrong is refused with exit code 2 and a
message naming the option and where its value came from."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.cli import build_parser
from fairdeck.cli import main as fairdeck_main
from fairdeck.log.cosignature import Cosigner
from fairdeck_server.run import config, option_needs
from fairdeck_server.run.config import ServerConfig
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env

_WITNESS_KEYS = [
    Cosigner.from_seed(f"witness.test/w{i}", bytes([i]) * 32).verifier.to_string() for i in range(3)
]
_WITNESSES = [f"http://127.0.0.1:{7000 + i}={key}" for i, key in enumerate(_WITNESS_KEYS)]

# Three distinct valid values per option (file, environment, flag), by name or by type.
VALUES: dict[str, tuple[Any, Any, Any]] = {
    "witnesses": ((_WITNESSES[0],), (_WITNESSES[1], _WITNESSES[2]), (_WITNESSES[2],)),
    "witness_threshold": (1, 2, 3),
    "listen": ("127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"),
    "metrics_listen": ("127.0.0.1:2001", "[::1]:2002", "0.0.0.0:2003"),
    "db": ("postgresql://file/db", "postgresql://env/db", "postgres://flag/db"),
    "log_format": ("json", "text", "json"),
    "log_level": ("DEBUG", "WARNING", "ERROR"),
    "require_auth": (True, False, True),
    "insecure": (True, False, True),
    "allow_clock_behind_log": (True, False, True),
    "codeal_default": (True, False, True),
    "codealer": ("127.0.0.1:3001", "127.0.0.1:3002", "127.0.0.1:3003"),
    # Options whose range (option_ranges.py) leaves out the generic values below.
    "max_message_bytes": (70_000, 80_000, 90_000),
    "max_request_bytes": (70_000, 80_000, 90_000),
    "worker_timeout": (2.5, 3.5, 4.5),
}
BY_KIND: dict[type, tuple[Any, Any, Any]] = {
    str: ("from-file", "from-env", "from-flag"),
    Path: ("/from/file", "/from/env", "/from/flag"),
    float: (1.5, 2.5, 3.5),
    int: (11, 12, 13),
}


# Other file keys an option's values need: a threshold of 3 needs 3 witnesses.
FILE_CONTEXT: dict[str, dict[str, Any]] = {
    "witness_threshold": {"witnesses": _WITNESSES},
    **{name: {"codealer": "127.0.0.1:3000"} for name in option_needs.CODEALT},  # co-dealt: --codealer
    "replica_name": {"codealer": "127.0.0.1:3000", "db": "postgresql://file/db"},  # its claim: --db
}


def values(option: config.Option) -> tuple[Any, Any, Any]:
    return VALUES.get(option.name) or BY_KIND[option.kind]


def toml(settings: dict[str, Any]) -> str:
    def literal(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list | tuple):
            return "[" + ", ".join(literal(x) for x in v) + "]"
        return json.dumps(v) if isinstance(v, str) else repr(v)

    return "".join(f"{k} = {literal(v)}\n" for k, v in settings.items())


def resolve(argv: list[str], env: dict[str, str]) -> config.Settings:
    """What ``fairdeck serve ARGV`` would run with, through the real parser."""
    args = build_parser().parse_args(["serve", *argv])
    return config.load(config.flags_given(args), env, args.config)


def flag_argv(option: config.Option, value: Any) -> list[str]:
    if option.kind is bool:
        return [option.flag if value else "--no-" + option.flag[2:]]
    if option.kind is tuple:
        return [f"{option.flag}={v}" for v in value]
    return [f"{option.flag}={value}"]


def env_text(value: Any) -> str:
    if isinstance(value, tuple):
        return " ".join(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def typed(option: config.Option, value: Any) -> Any:
    return Path(value) if option.kind is Path else option.kind(value)


def got(settings: config.Settings, option: config.Option) -> Any:
    return settings.log_level if option.name == "log_level" else getattr(settings.server, option.name)


def test_every_field_is_an_option_with_a_flag_an_env_var_a_file_key_and_help() -> None:
    names = [o.name for o in config.OPTIONS]
    assert names == [f.name for f in dataclasses.fields(ServerConfig)] + ["log_level"]
    for option in config.OPTIONS:
        assert option.flag.startswith("--") and option.env == "FAIRDECK_" + option.name.upper()
        assert option.help, f"{option.name} has no help: give its ServerConfig field a docstring"
        assert option.name in VALUES or option.kind in BY_KIND, f"no test values for {option.name}"
    assert config.OPTIONS_BY_NAME["data_dir"].flag == "--data"  # as before


def test_help_tells_every_flag_env_var_default_and_the_precedence(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        fairdeck_main(["serve", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in config.OPTIONS:
        assert option.flag in text and option.env in text and f"file key {option.name}" in text
    assert "default 127.0.0.1:50051" in text and "default 500.0" in text and "default unset" in text
    assert " ".join(config.PRECEDENCE.split()) in text
    assert "--config" in text and "FAIRDECK_CONFIG" in text and "FAIRDECK_SEED_KEY" in text
    assert "--seed-key " not in text  # a secret is never a flag


@pytest.mark.parametrize("name", [o.name for o in config.OPTIONS])
def test_flag_beats_env_beats_file_beats_default(name: str, tmp_path: Path) -> None:
    option = config.OPTIONS_BY_NAME[name]
    in_file, in_env, in_flag = values(option)
    path = tmp_path / "fairdeck.toml"
    path.write_text(toml({name: in_file, **FILE_CONTEXT.get(name, {})}))

    default = resolve([], {})
    assert got(default, option) == option.default and default.sources[name] == "default"
    from_file = resolve(["--config", str(path)], {})
    assert got(from_file, option) == typed(option, in_file) and from_file.sources[name] == "file"
    env = {option.env: env_text(in_env), config.CONFIG_ENV: str(path)}  # the file named by env this time
    from_env = resolve([], env)
    assert got(from_env, option) == typed(option, in_env) and from_env.sources[name] == "env"
    from_flag = resolve(flag_argv(option, in_flag), env)
    assert got(from_flag, option) == typed(option, in_flag) and from_flag.sources[name] == "flag"
    assert got(resolve([], {**env, option.env: ""}), option) == typed(option, in_file)  # empty env: unset


def test_no_arguments_is_the_server_config_defaults() -> None:
    settings = resolve([], {})
    assert settings.server == ServerConfig()
    assert settings.log_level == "INFO" and settings.file is None
    assert settings.describe() == "all defaults"


@pytest.mark.parametrize(
    ("argv", "env", "file", "expected"),
    [
        ([], {}, "rate_limt = 5\n", "unknown key 'rate_limt'"),
        (["--witness=ftp://x=y"], {}, "", "--witness (flag): each must be URL=KEY"),
        ([f"--witness=http://127.0.0.1:1={_WITNESS_KEYS[0][:-4]}AAA="], {}, "", "--witness (flag): "),
        (
            [f"--witness={_WITNESSES[0]}", "--witness-threshold=2"],
            {},
            "",
            "--witness-threshold (flag): must be at most",
        ),
        (
            [],
            {"FAIRDECK_WITNESS_THRESHOLD": "1"},
            "",
            "FAIRDECK_WITNESS_THRESHOLD (environment): must be at most the 0",
        ),
        ([], {}, 'witnesses = "http://x"\n', "witnesses (config file "),
        ([], {}, 'rate_limit = "fast"\n', "rate_limit (config file "),
        ([], {}, "max_open_hands = true\n", "max_open_hands (config file "),
        ([], {}, "max_open_hands = 1.5\n", "must be an integer"),
        ([], {}, "listen = 50051\n", "listen (config file "),
        ([], {}, "rate_limit = [1]\n", "must be a number"),
        ([], {}, "listen = \n", "not valid TOML"),
        ([], {"FAIRDECK_RATE_LIMIT": "abc"}, "", "FAIRDECK_RATE_LIMIT (environment): must be a number"),
        ([], {"FAIRDECK_RATE_LIMIT": "inf"}, "", "FAIRDECK_RATE_LIMIT (environment): must be a finite"),
        ([], {"FAIRDECK_REQUIRE_AUTH": "maybe"}, "", "FAIRDECK_REQUIRE_AUTH (environment): must be true"),
        (
            [],
            {"FAIRDECK_MAX_OPEN_HANDS": "1e3"},
            "",
            "FAIRDECK_MAX_OPEN_HANDS (environment): must be a whole",
        ),
        (["--max-open-hands=-1"], {}, "", "--max-open-hands (flag): must be 0 (no limit) or from 1 to"),
        (["--checkpoint-interval=0"], {}, "", "--checkpoint-interval (flag): must be from 0.001 to 3600"),
        (["--processes=100000"], {}, "", "--processes (flag): must be from 1 to 256, not 100000"),
        (["--listen=localhost"], {}, "", "--listen (flag): must be HOST:PORT"),
        (["--metrics-listen=:99999"], {}, "", "--metrics-listen (flag): must be HOST:PORT"),
        (["--db=mysql://x/y"], {}, "", "--db (flag): must be a postgresql:// URL"),
        (["--log-format=yaml"], {}, "", "--log-format (flag): must be one of text, json"),
        (["--data="], {}, "", "--data (flag): must not be empty"),
        (["--rate-burst=0"], {}, "", "--rate-burst (flag): must be >= 1 while rate_limit is on"),
    ],
)
def test_bad_values_name_the_option_and_its_source(
    argv: list[str], env: dict[str, str], file: str, expected: str, tmp_path: Path
) -> None:
    if file:
        path = tmp_path / "bad.toml"
        path.write_text(file)
        argv = [*argv, "--config", str(path)]
    with pytest.raises(config.ConfigError) as refused:
        resolve(argv, env)
    assert expected in str(refused.value)
    if file:
        assert str(tmp_path / "bad.toml") in str(refused.value)


def test_values_in_any_case_and_auto() -> None:
    settings = resolve(
        ["--log-level=debug"], {"FAIRDECK_LOG_FORMAT": "JSON", "FAIRDECK_REQUIRE_AUTH": "auto"}
    )
    assert settings.log_level == "DEBUG" and settings.server.log_format == "json"
    assert settings.server.require_auth is None


def test_describe_names_sources_and_hides_the_database_password() -> None:
    settings = resolve(["--rate-limit=5"], {"FAIRDECK_DB": "postgresql://dealer:hunter2@db:5432/fairdeck"})
    text = settings.describe()
    assert "rate_limit=5.0 (flag)" in text and "db=postgresql://dealer:***@db:5432/fairdeck (env)" in text
    assert "hunter2" not in text


def run_cli(
    *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "serve", *argv],
        capture_output=True,
        text=True,
        timeout=30,
        env={**clean_env(), **(env or {})},
        cwd=cwd,
    )


def test_a_refused_configuration_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "fairdeck.toml"
    path.write_text('listen = "127.0.0.1:0"\nrate_limt = 5\n')
    for argv, env, expected in [
        (
            ["--rate-limit", "abc"],
            {},
            "fairdeck serve: --rate-limit (flag): must be a number, 0 (off) or from 0.001 to 1000000 per "
            "second, not 'abc'",
        ),
        ([], {"FAIRDECK_CONFIG": str(path)}, f"fairdeck serve: config file {path}: unknown key 'rate_limt'"),
        (["--config", str(tmp_path / "missing.toml")], {}, "cannot read it"),
    ]:
        result = run_cli(*argv, env=env, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert expected in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert result.stdout == ""


def test_the_three_sources_together_in_a_real_serve(tmp_path: Path) -> None:
    # Port 1 and 2 cannot be bound: the dealer starts only if the flag's listen wins.
    path = tmp_path / "fairdeck.toml"
    path.write_text(
        toml({"listen": "127.0.0.1:2", "data_dir": str(tmp_path / "from-file"), "log_format": "text"})
    )
    env = {"FAIRDECK_CONFIG": str(path), "FAIRDECK_LISTEN": "127.0.0.1:1", "FAIRDECK_LOG_FORMAT": "json"}
    with DealerProcess(None, tmp_path / "stderr", env=env, cwd=tmp_path) as dealer:
        match = dealer.listening
    stderr = dealer.stderr()
    assert int(match.group(2)) not in (1, 2) and match.group(3) == str(tmp_path / "from-file")  # file
    lines = [json.loads(line) for line in stderr.splitlines()]  # json: env beat the file's text
    described = next(line["message"] for line in lines if line["message"].startswith("configuration:"))
    assert "listen=127.0.0.1:0 (flag)" in described and "log_format=json (env)" in described
    assert f"data_dir={tmp_path / 'from-file'} (file)" in described


def test_the_operations_guide_lists_every_option() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    rows = [line for line in guide.splitlines() if line.startswith("| `--")]
    for option in config.OPTIONS:
        row = next((r for r in rows if r.startswith(f"| `{option.flag}`")), None)
        assert row is not None, f"docs/operations.md has no row for {option.flag}"
        assert f"`{option.env}`" in row and f"`{option.name}`" in row


CODEALT_GIVEN = {"codealer_key": "ab" * 32, "codealer_token": "@dealer.token", "codeal_pool": 16}
"""A value of each co-dealt option (the pool's is its default, given explicitly)."""


@pytest.mark.parametrize("source", ["flag", "env", "file"])
@pytest.mark.parametrize("name", option_needs.CODEALT)
def test_a_codealt_option_given_without_codealer_is_refused_from_every_source(
    name: str, source: str, tmp_path: Path
) -> None:
    """--codeal-pool (and the other co-dealt options) without --codealer started a dealer that
    ignored it, silently; a default never trips this, a value given does, even the default's."""
    option = config.OPTIONS_BY_NAME[name]
    value = CODEALT_GIVEN.get(name, False if option.kind is bool else "dealer-1")
    path = tmp_path / "fairdeck.toml"
    path.write_text(toml({name: value} if source == "file" else {}))
    argv, env = ["--config", str(path)], {}
    if source == "flag":
        argv += flag_argv(option, value)
    elif source == "env":
        env[option.env] = env_text(value)
    with pytest.raises(config.ConfigError) as refused:
        resolve(argv, env)
    said = str(refused.value)
    assert said.startswith(
        option.where(source, path) + ": is for co-dealt hands, which are off without --codealer"
    )
    assert "give --codealer HOST:PORT" in said and "\n" not in said
    given = resolve([*argv, "--codealer=127.0.0.1:3000", "--db=postgresql://x/y"], env)
    assert given.sources[name] == source and given.server.codealer == "127.0.0.1:3000"


def test_a_replica_name_without_a_database_is_refused_as_sqlite_has_no_claim() -> None:
    with pytest.raises(config.ConfigError) as refused:
        resolve(["--codealer=127.0.0.1:3000"], {"FAIRDECK_REPLICA_NAME": "dealer-1"})
    assert str(refused.value).startswith("FAIRDECK_REPLICA_NAME (environment): names this replica's claim")
    assert "give --db URL too, or drop it" in str(refused.value)


def test_codeal_pool_without_codealer_exits_2_in_one_line_from_each_source(tmp_path: Path) -> None:
    (tmp_path / "fairdeck.toml").write_text("codeal_pool = 4\n")
    for argv, env, where in [
        (["--codeal-pool", "4"], {}, "--codeal-pool (flag)"),
        ([], {"FAIRDECK_CODEAL_POOL": "0"}, "FAIRDECK_CODEAL_POOL (environment)"),
        (["--config", "fairdeck.toml"], {}, "codeal_pool (config file fairdeck.toml)"),
    ]:
        result = run_cli("--data", str(tmp_path / "data"), *argv, env=env, cwd=tmp_path)
        assert result.returncode == 2 and result.stdout == "", result.stderr
        assert result.stderr.startswith(f"fairdeck serve: {where}: is for co-dealt hands"), result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data").exists()  # refused before anything was made
