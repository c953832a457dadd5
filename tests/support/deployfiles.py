"""Reading the deploy files and what they may name: paths, ports, the fairdeck command line
and environment, Dockerfile instructions, pod containers, durations.

Docker and Kubernetes cannot run here, so the files are checked offline: by
the real validators (kubernetes-validate, yamllint, hadolint; see
test_deploy_files.py) and by the checks of each file, beside this module:
dockerfile_checks.py, compose_checks.py, envoy_checks.py and k8s_checks.py (and
``check_health_argv`` below, which two of them share). Each ``check_*`` returns a list
of problems instead of asserting, so the tests can run it on the committed
files (expecting none) and on deliberately broken copies (expecting the
problem named), which proves every check can fail.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from fairdeck.cli import build_parser
from fairdeck_server.run.config import ServerConfig

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose.yaml"
ENVOY = DEPLOY / "envoy.yaml"
K8S = DEPLOY / "k8s"
YAMLLINT_CONFIG = DEPLOY / ".yamllint.yaml"

KUBERNETES_VERSION = "1.33"
"""The Kubernetes release the manifests are validated against (kubernetes-validate ships its schemas)."""

GRPC_PORT = 50051
METRICS_PORT = 9464
DEALER_SERVICE = "fairdeck.v1.DealerService"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def all_yaml_files() -> list[Path]:
    return sorted({*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml"), *DEPLOY.rglob(".yamllint*")})


def k8s_files() -> list[Path]:
    """Every manifest: those ``kubectl apply -f deploy/k8s/`` reads and the Secret template."""
    return sorted(K8S.rglob("*.yaml"))


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def k8s_docs() -> list[dict[str, Any]]:
    return [doc for path in k8s_files() for doc in load_docs(path)]


def load_yaml(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


# -- the fairdeck command line: what the deploy files may name --


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: argparse.ArgumentParser = action.choices[name]
            return sub
    raise LookupError(name)


def options_of(command: str) -> set[str]:
    """The long options ``fairdeck COMMAND`` accepts, from its real argparse parser."""
    return {s for s in _subparser(command)._option_string_actions if s.startswith("--")}


def env_names() -> set[str]:
    """Environment variables the server reads: FAIRDECK_<FIELD> for each ServerConfig field,
    the config file's path, and the seed key itself."""
    fields = {f"FAIRDECK_{f.name.upper()}" for f in dataclasses.fields(ServerConfig)}
    return fields | {"FAIRDECK_CONFIG", "FAIRDECK_SEED_KEY"}


def flags(args: list[str]) -> dict[str, str | None]:
    """``--name=value`` / ``--name value`` / ``--name`` pairs of an argument list."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if eq:
                out[name] = value
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                out[name] = args[i + 1]
                i += 1
            else:
                out[name] = None
        i += 1
    return out


def serve_args_everywhere() -> dict[str, list[str]]:
    """Every ``fairdeck serve`` argument list in the deploy files, by where it is."""
    found = {"Dockerfile CMD": dockerfile_instruction(parse_dockerfile(DOCKERFILE.read_text()), "CMD")}
    for name, service in load_yaml(COMPOSE)["services"].items():
        command = service.get("command")
        if isinstance(command, list) and command[:1] == ["serve"]:
            found[f"compose {name}"] = command
    for doc in k8s_docs():
        for container in pod_containers(doc):
            if container.get("args", [])[:1] == ["serve"]:
                found[f"k8s {doc['metadata']['name']}/{container['name']}"] = container["args"]
    return {where: args[1:] for where, args in found.items()}


def unknown_options(args_by_where: dict[str, list[str]], known: set[str]) -> dict[str, list[str]]:
    """The options each argument list passes that are not in ``known``, where there are any."""
    found = {where: sorted(set(flags(args)) - known) for where, args in args_by_where.items()}
    return {where: names for where, names in found.items() if names}


def env_everywhere() -> dict[str, set[str]]:
    """Every FAIRDECK_* environment variable the deploy files set, by where it is."""
    found: dict[str, set[str]] = {}
    for name, service in load_yaml(COMPOSE)["services"].items():
        env = service.get("environment") or {}
        names = set(env) if isinstance(env, dict) else {e.split("=", 1)[0] for e in env}
        found[f"compose {name}"] = {n for n in names if n.startswith("FAIRDECK_")}
    for doc in k8s_docs():
        for container in pod_containers(doc):
            names = {e["name"] for e in container.get("env", [])}
            found[f"k8s {container['name']}"] = {n for n in names if n.startswith("FAIRDECK_")}
    return found


def compose_default(text: str) -> str:
    """``text`` with compose's ``${VAR:-default}`` replaced by the default (as when VAR is unset)."""
    return re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", text)


def seconds(text: str | int | float) -> float:
    """A duration as Envoy, compose and Kubernetes write it: 35s, 0.1s, 1m30s, 20."""
    if isinstance(text, int | float):
        return float(text)
    total, rest = 0.0, text.strip()
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", rest):
        total += float(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    if not re.fullmatch(r"(\d+(?:\.\d+)?(ms|h|m|s))+", rest):
        raise ValueError(f"not a duration: {text!r}")
    return total


# -- Dockerfile --


@dataclasses.dataclass
class Instruction:
    keyword: str
    args: str
    stage: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped; ``stage`` counts FROMs."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    if current:
        logical.append(current)
    out: list[Instruction] = []
    stage = -1
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        out.append(Instruction(keyword, args.strip(), stage))
    return out


def exec_form(args: str) -> list[str] | None:
    """The JSON array of an exec-form instruction, or None for shell form."""
    try:
        value = json.loads(args)
    except ValueError:
        return None
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def dockerfile_instruction(instructions: list[Instruction], keyword: str) -> list[str]:
    """The exec-form arguments of the final stage's last ``keyword`` (CMD, ENTRYPOINT)."""
    last = max(i.stage for i in instructions)
    found = [i for i in instructions if i.keyword == keyword and i.stage == last]
    if not found:
        return []
    return exec_form(found[-1].args) or shlex.split(found[-1].args)


def check_health_argv(argv: list[str], where: str) -> list[str]:
    problems = []
    given = flags(argv)
    unknown = set(given) - options_of("health")
    if unknown:
        problems.append(f"{where}: not options of fairdeck health: {sorted(unknown)}")
    if given.get("--target", f"127.0.0.1:{GRPC_PORT}") != f"127.0.0.1:{GRPC_PORT}":
        problems.append(f"{where}: health check does not probe the local gRPC port")
    return problems


# -- Kubernetes --


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
        spec: dict[str, Any] = doc["spec"]["template"]["spec"]
        return spec
    return None


def pod_containers(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = pod_spec(doc)
    if spec is not None:
        yield from spec.get("initContainers", [])
        yield from spec.get("containers", [])
