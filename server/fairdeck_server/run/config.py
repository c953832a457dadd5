"""The dealer's configuration: command-line flags > environment > config file > defaults.

Every ``ServerConfig`` field is an option (a flag, a ``FAIRDECK_*`` variable, a TOML key), plus
``log_level``; a bad value is a ``ConfigError`` naming the option and where it came from. Secrets
are never options. The rules and every option: docs/operations.md ("Configuration").

>>> ServerConfig().listen
'127.0.0.1:50051'
>>> settings = load({"rate_limit": "50"}, {"FAIRDECK_RATE_LIMIT": "10", "FAIRDECK_LISTEN": "127.0.0.1:0"})
>>> settings.server.rate_limit, settings.sources["rate_limit"], settings.server.listen
(50.0, 'flag', '127.0.0.1:0')
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import inspect
import itertools
import math
import os
import stat
import textwrap
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairdeck.log.cosignature import CosignatureError, CosignatureVerifier
from fairdeck_server.addresses import redact_url, split_host_port
from fairdeck_server.dealing.codeal_claim import check_replica_name
from fairdeck_server.observe import logging_setup
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.run import option_needs
from fairdeck_server.run.option_ranges import RANGES

ENV_PREFIX = "FAIRDECK_"
CONFIG_ENV = "FAIRDECK_CONFIG"
SEED_KEY_ENV = "FAIRDECK_SEED_KEY"
FLAG_NAMES = {"data_dir": "data", "witnesses": "witness"}
"""Flags that are not ``--field-name`` (kept as they were before the others existed)."""
FLAG_ALIASES = {"data_dir": ("--data-dir",)}
PRECEDENCE = (
    "command-line flags > environment (FAIRDECK_*) > config file (--config, $FAIRDECK_CONFIG) > defaults"
)
TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})

Source = str
"""Where a value came from: "flag", "env", "file" or "default"."""


class ConfigError(StartupRefused):
    """A configuration the dealer refuses; the message names the option and its source."""


@dataclass(frozen=True)
class ServerConfig:
    """How to run the dealer."""

    listen: str = "127.0.0.1:50051"
    """host:port to listen on; port 0 picks a free one."""
    data_dir: Path = field(default_factory=lambda: Path("fairdeck-data"))
    """Where the SQLite database (and, by default, the keys) live."""
    seed_key_file: Path | None = None
    """AES key for seeds at rest; default DATA_DIR/seed.key (created 0600 only in a fresh data dir)."""
    grace_seconds: float = 10.0
    """On SIGTERM, how long calls in flight may take to finish."""
    log_key_file: Path | None = None
    """Ed25519 signed-note key of the transparency log; default DATA_DIR/log.key (created 0600 only in a
    fresh data dir; `fairdeck init` makes keys explicitly)."""
    log_origin: str | None = None
    """The log's origin line (the key's name) when a new key is created."""
    checkpoint_interval: float = 0.2
    """Seconds between signed checkpoints while entries arrive."""
    max_hand_lifetime: float = 3600.0
    """Seconds a hand may stay open; older ones are voided (revealed and logged), in the last
    min(2 s, a quarter) of it, so the void is in the log before the lifetime has passed."""
    allow_clock_behind_log: bool = False
    """Start even if this machine's clock is behind the log's latest entry: the log's time then
    continues from that entry. Without it such a start is refused (docs/operations.md)."""
    db: str | None = None
    """A postgresql:// URL to share one database among replicas; None: SQLite in DATA_DIR."""
    db_pool_size: int = 8
    """Most PostgreSQL connections this replica opens (at least 2: one the writer keeps, the
    rest for reads); replicas times this must stay below max_connections. Not for SQLite."""
    # -- TLS and authentication (docs/security.md) --
    tls_cert: Path | None = None
    """PEM certificate chain the server presents; with tls_key, turns TLS on."""
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    """PEM CA bundle; when set, clients must present a certificate it signed (mTLS)."""
    insecure: bool = False
    """Allow plaintext on a non-loopback address (refused otherwise)."""
    require_auth: bool | None = None
    """Require a token or client certificate; None: required unless listening on loopback."""
    # -- abuse limits --
    rate_limit: float = 500.0
    """Requests per second per tenant (token bucket); 0 turns it off."""
    rate_burst: int = 1000
    max_open_hands: int = 10_000
    """Hands a tenant may have open (not closed) at once; 0 turns it off."""
    max_calls_in_flight: int = 1000
    """Calls (other than streams) a tenant may have running or waiting for their turn at once; 0: no limit."""
    max_streams: int = 4
    """DealHands streams a tenant may have open at once; 0: no limit."""
    max_message_bytes: int = 4 * 1024 * 1024
    max_request_bytes: int = 512 * 1024
    """Largest request the dealer reads; gRPC refuses a larger one before it is parsed, on the
    transport, so a caller cannot make the one event loop parse megabytes before its tenant
    is even known. The largest valid request is about 260 KiB (64 text client seeds of
    1,024 code points). A request is held to the lower of this and max_message_bytes; 0: no
    limit of its own."""
    default_deadline: float = 30.0
    """Seconds a unary call may run, and a stream may go without writing a response, when the
    client set no (shorter) deadline (edge/deadline.py)."""
    auth_failure_rate: float = 1.0
    """Failed authentications per second per client address (token bucket); past them, tokens
    that need a lookup are refused before it. 0 turns it off."""
    auth_failure_burst: int = 30
    """Failed authentications a client address may make at once before auth_failure_rate applies."""
    # -- connections (docs/security.md, "Connections") --
    handshake_timeout: float = 10.0
    """Seconds a new connection has to finish its TLS handshake and the HTTP/2 preface and
    settings; then it is closed."""
    connection_idle_timeout: float = 60.0
    """Seconds a connection with no call in flight stays open (then GOAWAY); 0: no limit."""
    max_connection_age: float = 3600.0
    """Seconds after which any connection is sent GOAWAY; its calls get 11 default_deadlines (30 s
    if that is 0) more to finish, longer than a stream may run (edge/deadline.py, STREAM_RUNS),
    then it is closed. 0: no limit."""
    max_connections: int = 4096
    """Connections one serving process accepts at once; the file descriptor limit is raised to
    fit when it can be, else this is lowered to fit it (with a warning). 0: no limit."""
    max_connections_per_peer: int = 64
    """Connections one client address (an IPv6 /64) may hold per serving process; its newest
    ones past it are closed within a second, and once it went over, its new ones go unanswered
    for 10 s or more and while it holds this many (Linux). 0: no limit."""
    max_streams_per_connection: int = 50
    """Calls one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a gRPC
    client queues those past it. 0: no limit."""
    max_open_streams_per_peer: int = 100
    """Health Watch and reflection streams one client address may hold at once per serving process;
    past it a new one, unless its connection's first, is refused TOO_MANY_STREAMS. 0: no limit."""
    # -- witnesses (docs/witness.md) --
    witnesses: tuple[str, ...] = ()
    """Witnesses asked to cosign each checkpoint, each URL=KEY (the witness's add-checkpoint URL
    prefix and its cosignature/v1 vkey); repeat --witness. Dealing never waits for them."""
    witness_threshold: int = 0
    """Cosignatures a checkpoint needs to count as final; 0: every witness named."""
    witness_interval: float = 1.0
    """Seconds between two add-checkpoint requests to one witness (the public witness network
    allows a log one a second); a witness that answers 429 or 503 is left alone longer."""
    tiles: Path | None = None
    """Publish the log as C2SP tlog-tiles in this directory, live: each checkpoint's tiles are
    written before the checkpoint is handed out. Serve it with a web server (deploy/nginx)."""
    # -- scaling (docs/scaling.md) --
    processes: int = 1
    """Serving processes on the one port (SO_REUSEPORT) and the one database: each uses a core.
    Rate and open-hand limits, health and metrics are per process."""
    worker_timeout: float = 5.0
    """With processes > 1: seconds a worker may go without a heartbeat (stopped, hung, or
    holding the writers' lock without progress) before it is killed and replaced. 0: never."""
    # -- observability --
    metrics_listen: str | None = None
    """host:port for the Prometheus /metrics endpoint; None: no endpoint."""
    log_format: str = "text"
    """"text" or "json" (one object per line, with the call's request id)."""
    codealer: str | None = None
    """host:port of the co-dealer (`fairdeck codealer serve`; docs/operations.md, "Co-dealer")."""
    codealer_key: str | None = None
    """The co-dealer's identity key, 64 hex digits or @FILE (`fairdeck codealer key`)."""
    codealer_token: str | None = None
    """@FILE holding the dealer's token at the co-dealer (its DIR/dealer.token, mode 0600)."""
    codeal_default: bool = False
    """OpenHand with no mode opens a co-dealt hand (needs --codealer)."""
    codeal_pool: int = 16
    """Co-dealt decks kept shuffled ahead per tenant and deck spec (needs --codealer); 0: each open
    shuffles its own."""
    replica_name: str | None = None
    """This replica's stable name on PostgreSQL (its co-dealt record's holder); None: the host name."""


@dataclass(frozen=True)
class Option:
    name: str
    kind: type
    """str, Path, int, float, bool, or tuple (of strings: a repeatable flag, a TOML list, or a
    whitespace-separated environment variable)."""
    optional: bool
    """None is a value (the default of optional fields)."""
    default: Any
    help: str
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return "--" + FLAG_NAMES.get(self.name, self.name).replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def where(self, source: Source, file: Path | None = None) -> str:
        if source == "flag":
            return f"{self.flag} (flag)"
        if source == "env":
            return f"{self.env} (environment)"
        if source == "file":
            return f"{self.name} (config file {file})"
        return f"{self.name} (default)"


@dataclass(frozen=True)
class Settings:
    """The resolved configuration, and where each value came from."""

    server: ServerConfig
    log_level: str
    sources: dict[str, Source]
    file: Path | None = None

    @property
    def log_format(self) -> str:
        return self.server.log_format

    def describe(self) -> str:
        """The options not at their default, with their source; no secret in it."""
        parts = []
        for name, source in sorted(self.sources.items()):
            if source == "default":
                continue
            value = self.log_level if name == "log_level" else getattr(self.server, name)
            if name == "db" and value is not None:
                value = redact_url(value)
            parts.append(f"{name}={value} ({source})")
        return ", ".join(parts) or "all defaults"


# -- the options ------------------------------------------------------------------------

HELP = {
    "tls_key": "PEM private key of tls_cert.",
    "rate_burst": "Calls a tenant may make at once before rate_limit applies.",
    "max_message_bytes": "Largest request or response; 0: no limit (requests: see max_request_bytes).",
    "log_level": "Least severe log level written.",
}
"""Help for options whose ServerConfig field has no docstring (and for log_level)."""


def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the string right after a field)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    docs: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _kind(hint: Any) -> tuple[type, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args == (str, ...):
        return tuple, False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"cannot configure a field of type {hint}")
        return inner[0], True
    return hint, False


CHOICES = {"log_format": logging_setup.FORMATS, "log_level": logging_setup.LEVELS}


def server_options() -> tuple[Option, ...]:
    """One Option per ServerConfig field, then log_level."""
    hints = typing.get_type_hints(ServerConfig)
    defaults = ServerConfig()
    docs = field_docs(ServerConfig)
    out = []
    for f in dataclasses.fields(ServerConfig):
        kind, optional = _kind(hints[f.name])
        doc = HELP.get(f.name) or docs.get(f.name, "")
        out.append(Option(f.name, kind, optional, getattr(defaults, f.name), doc, CHOICES.get(f.name, ())))
    out.append(Option("log_level", str, False, "INFO", HELP["log_level"], CHOICES["log_level"]))
    return tuple(out)


OPTIONS = server_options()


# -- checks beyond the type -------------------------------------------------------------


def _host_port(value: str) -> None:
    try:
        split_host_port(value)
    except ValueError:
        raise ValueError("must be HOST:PORT (a port of 0 picks a free one)") from None


def _postgres_url(value: str) -> None:
    if not value.startswith(("postgresql://", "postgres://")):
        raise ValueError("must be a postgresql:// URL (SQLite in the data dir is the default)")


def _witness(value: str) -> None:
    url, sep, vkey = value.rpartition("=")
    if not sep or not url.startswith(("http://", "https://")):
        raise ValueError(
            f"each must be URL=KEY (an http:// or https:// URL, then the witness's vkey), not {value!r}"
        )
    try:
        CosignatureVerifier.parse(vkey)
    except CosignatureError as e:
        raise ValueError(f"{value!r}: {e}") from None


def _each(check: Callable[[str], None]) -> Callable[[Any], None]:
    def each(values: Any) -> None:
        for value in values:
            check(value)

    return each


CHECKS: dict[str, Callable[[Any], None]] = {
    "listen": _host_port,
    "metrics_listen": _host_port,
    "db": _postgres_url,
    "witnesses": _each(_witness),
    "codealer": _host_port,
    "replica_name": check_replica_name,
    **{name: r.check for name, r in RANGES.items()},
}


# -- reading values -------------------------------------------------------------------------


def _from_text(option: Option, text: str) -> Any:
    """A flag's or an environment variable's text as the option's type."""
    kind = option.kind
    if kind is tuple:
        return tuple(text.split())
    if kind is bool:
        word = text.strip().lower()
        if word in TRUE:
            return True
        if word in FALSE:
            return False
        if option.optional and word == "auto":
            return None
        allowed = "true or false" + (" or auto" if option.optional else "")
        raise ValueError(f"must be {allowed}, not {text!r}")
    if kind is int:
        try:
            return int(text.strip())
        except ValueError:
            raise ValueError(f"{_must(option, 'a whole number')}, not {text!r}") from None
    if kind is float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError(f"{_must(option, 'a number')}, not {text!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"{_must(option, 'a finite number')}, not {text!r}")
        return value
    if not text:
        raise ValueError("must not be empty")
    return Path(text) if kind is Path else text


def _must(option: Option, kind: str) -> str:
    """What a value of ``option`` must be: its range, where it has one."""
    bounds = RANGES.get(option.name)
    return f"must be {kind}, {bounds.describe()}" if bounds else f"must be {kind}"


def _from_toml(option: Option, value: Any) -> Any:
    """A config file value, which must already have the option's type."""
    kind = option.kind
    if kind is tuple:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise ValueError(f"must be a list of strings, not {value!r}")
    if kind is bool:
        if isinstance(value, bool):
            return value
        if option.optional and value == "auto":
            return None
        raise ValueError(f"must be true or false, not {value!r}")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"{_must(option, 'an integer')}, not {value!r}")
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            with contextlib.suppress(OverflowError):  # an integer too large for a float
                return float(value)
        raise ValueError(f"{_must(option, 'a number')}, not {value!r}")
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {value!r}")
    return _from_text(option, value)


def _choice(option: Option, value: Any) -> str:
    """The choice ``value`` names, in any case (``info`` is ``INFO``)."""
    for choice in option.choices:
        if isinstance(value, str) and value.lower() == choice.lower():
            return choice
    raise ValueError(f"must be one of {', '.join(option.choices)}, not {value!r}")


MAX_CONFIG_BYTES = 1 << 20
"""A config file is a page of options: a larger one is not one (and is not read whole)."""


def read_file(path: Path) -> dict[str, Any]:
    """The TOML file's keys. A device is refused, not read (it would never end), as is a file past
    MAX_CONFIG_BYTES or nested too deep for the parser; a pipe (``--config <(...)``) is opened
    without waiting for a writer, so one with none reads as empty."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode):
                os.set_blocking(fd, True)
            elif not stat.S_ISREG(mode):
                raise ConfigError(f"config file {path}: not a regular file")
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"config file {path}: cannot read it: {e.strerror or e}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {path}: larger than {MAX_CONFIG_BYTES:,} bytes: not a config file")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path}: not valid TOML: it is not UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path}: not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"config file {path}: not valid TOML: nested too deep") from None
    known = {o.name for o in OPTIONS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown key {unknown[0]!r} (keys are ServerConfig field names, "
            "e.g. listen, data_dir, rate_limit; see fairdeck serve --help)"
        )
    return data


def load(flags: Mapping[str, Any], environ: Mapping[str, str], config_file: str | None = None) -> Settings:
    """Resolve every option. ``flags`` maps option names to the flag's text (or
    bool) for the flags given; ``config_file`` is --config if given."""
    path_text = config_file if config_file is not None else environ.get(CONFIG_ENV) or None
    path = Path(path_text) if path_text else None
    file_values = read_file(path) if path is not None else {}
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for option in OPTIONS:
        env_text = environ.get(option.env, "")
        if option.name in flags:
            source, raw = "flag", flags[option.name]
        elif env_text.strip():
            source, raw = "env", env_text
        elif option.name in file_values:
            source, raw = "file", file_values[option.name]
        else:
            values[option.name], sources[option.name] = option.default, "default"
            continue
        try:
            if source == "file":
                value = _from_toml(option, raw)
            elif isinstance(raw, list):  # a repeatable flag
                value = tuple(str(v) for v in raw)
            else:
                value = raw if isinstance(raw, bool) else _from_text(option, str(raw))
            if option.choices:
                value = _choice(option, value)
            if value is not None and option.name in CHECKS:
                CHECKS[option.name](value)
        except ValueError as e:
            raise ConfigError(f"{option.where(source, path)}: {e}") from None
        values[option.name], sources[option.name] = value, source
    if wrong := option_needs.problem(values, sources, lambda n: OPTIONS_BY_NAME[n].where(sources[n], path)):
        raise ConfigError(wrong)  # options that make no sense together (option_needs.py)
    log_level = values.pop("log_level")
    return Settings(ServerConfig(**values), log_level, sources, path)


OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}


# -- the command line -------------------------------------------------------------------------


def _shown(option: Option) -> str:
    default = option.default
    if option.name == "require_auth" and default is None:
        return "auto: required unless listening on loopback"
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default)


METAVARS = {
    "listen": "HOST:PORT",
    "metrics_listen": "HOST:PORT",
    "data_dir": "DIR",
    "db": "URL",
    "log_origin": "ORIGIN",
    "tiles": "DIR",
    "Path": "PATH",
    "float": "N",
    "int": "N",
    "str": "TEXT",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every option's flag (and --config) to ``parser``; values stay text
    (``load`` converts them, so errors read the same from every source)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"TOML file of options (keys are the option names below) [env {CONFIG_ENV}]",
    )
    for option in OPTIONS:
        names = (option.flag, *FLAG_ALIASES.get(option.name, ()))
        text = option.help.replace("%", "%%")
        bounds = f"{RANGES[option.name].describe()}; " if option.name in RANGES else ""
        default = _shown(option).replace("%", "%%")
        text += f" [{bounds}env {option.env}; file key {option.name}; default {default}]"
        if option.kind is tuple:
            parser.add_argument(
                *names,
                dest=option.name,
                action="append",
                default=argparse.SUPPRESS,
                metavar="URL=KEY",
                help=text,
            )
        elif option.kind is bool:
            parser.add_argument(
                *names,
                dest=option.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=text,
            )
        else:
            metavar = "|".join(option.choices) or METAVARS.get(option.name) or METAVARS[option.kind.__name__]
            parser.add_argument(
                *names, dest=option.name, default=argparse.SUPPRESS, metavar=metavar, help=text
            )


def flags_given(args: argparse.Namespace) -> dict[str, Any]:
    """The options given as flags, by name."""
    return {o.name: getattr(args, o.name) for o in OPTIONS if hasattr(args, o.name)}


EPILOG = f"""\
Every option can be set three ways; the first found wins:
  {PRECEDENCE}.
Environment variables are FAIRDECK_ and the option's name in capitals
(FAIRDECK_LISTEN, FAIRDECK_DB, FAIRDECK_TLS_CERT, FAIRDECK_METRICS_LISTEN,
FAIRDECK_RATE_LIMIT, ...); an empty one counts as unset. Config file keys
are the option names (listen = "0.0.0.0:50051", rate_limit = 100.0, ...);
an unknown key, a wrong type or a bad value stops the dealer with exit code 2.

Secrets are never flags (ps would show them): the seed key comes from
{SEED_KEY_ENV} (base64) or --seed-key-file, and a database password belongs
in FAIRDECK_DB or the config file. docs/operations.md has the full table.
"""
