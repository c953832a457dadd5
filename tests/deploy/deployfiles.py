"""Reading the deploy files and checking what matters in them.

Docker and Kubernetes cannot run here, so the files are checked offline: by
the real validators (kubernetes-validate, yamllint, hadolint; see
test_deploy_files.py) and by the checks below. Each ``check_*`` returns a list
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
from fairdeck.v1 import audit_pb2, dealer_pb2
from fairdeck_server.config import ServerConfig

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

# Calls that are safe to repeat, so a proxy may retry them (docs/api.md):
# reads, and CloseHand (closing a closed hand returns it unchanged).
# OpenHand and DealNewHand are safe only with a request_id, which a proxy
# cannot see inside the message.
SAFE_METHODS = frozenset(
    {
        "/fairdeck.v1.DealerService/GetHand",
        "/fairdeck.v1.DealerService/CloseHand",
        "/grpc.health.v1.Health/Check",
        *(
            f"/fairdeck.v1.AuditService/{m.name}"
            for m in audit_pb2.DESCRIPTOR.services_by_name["AuditService"].methods
        ),
    }
)


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


def check_dockerfile(text: str) -> list[str]:
    problems: list[str] = []
    ins = parse_dockerfile(text)
    froms = [i for i in ins if i.keyword == "FROM"]
    if len(froms) < 2:
        problems.append("not multi-stage: fewer than two FROM")
    images = set()
    for f in froms:
        image = f.args.split()[0]
        images.add(image)
        name = image.split("@")[0]
        if not DIGEST.search(image) or ":" not in name.rsplit("/", 1)[-1]:
            problems.append(f"FROM {image}: not pinned by tag and sha256 digest")
        if ":latest" in name:
            problems.append(f"FROM {image}: the latest tag")
    if len(images) > 1:
        problems.append("builder and runtime stages use different base images (the venv links to Python)")
    last = max((i.stage for i in ins), default=0)
    final = [i for i in ins if i.stage == last]
    copies = [i for i in final if i.keyword in ("COPY", "ADD")]
    if not any(i.args.startswith("--from=") and "/opt/venv" in i.args for i in copies):
        problems.append("runtime stage does not copy the virtualenv from the builder")
    for i in copies:
        if not i.args.startswith("--from="):
            problems.append(f"runtime stage copies from the build context: {i.keyword} {i.args}")
    users = [i.args for i in final if i.keyword == "USER"]
    if not users:
        problems.append("runtime stage has no USER")
    elif not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]):
        problems.append(f"USER {users[-1]}: not a numeric non-root uid(:gid)")
    entry = [i for i in final if i.keyword == "ENTRYPOINT"]
    if not entry or exec_form(entry[-1].args) != ["fairdeck"]:
        problems.append('ENTRYPOINT is not exec-form ["fairdeck"]')
    cmd = [i for i in final if i.keyword == "CMD"]
    cmd_args = exec_form(cmd[-1].args) if cmd else None
    if not cmd_args or cmd_args[0] != "serve":
        problems.append("CMD is not exec-form starting with serve")
    else:
        given = flags(cmd_args[1:])
        if given.get("--listen") != f"0.0.0.0:{GRPC_PORT}":
            problems.append(f"CMD does not listen on 0.0.0.0:{GRPC_PORT}")
        if given.get("--metrics-listen") != f"0.0.0.0:{METRICS_PORT}":
            problems.append(f"CMD does not serve metrics on 0.0.0.0:{METRICS_PORT}")
    health = [i for i in final if i.keyword == "HEALTHCHECK"]
    if not health:
        problems.append("no HEALTHCHECK")
    else:
        _, _, probe = health[-1].args.partition("CMD ")
        argv = exec_form(probe)
        if not argv or argv[:2] != ["fairdeck", "health"]:
            problems.append("HEALTHCHECK is not exec-form `fairdeck health`")
        else:
            problems += check_health_argv(argv[2:], "HEALTHCHECK")
    exposed = {p for i in final if i.keyword == "EXPOSE" for p in i.args.split()}
    for port in (GRPC_PORT, METRICS_PORT):
        if str(port) not in exposed and f"{port}/tcp" not in exposed:
            problems.append(f"port {port} not exposed")
    if not any(i.keyword == "VOLUME" for i in final):
        problems.append("no VOLUME for the data dir")
    return problems


def check_health_argv(argv: list[str], where: str) -> list[str]:
    problems = []
    given = flags(argv)
    unknown = set(given) - options_of("health")
    if unknown:
        problems.append(f"{where}: not options of fairdeck health: {sorted(unknown)}")
    if given.get("--target", f"127.0.0.1:{GRPC_PORT}") != f"127.0.0.1:{GRPC_PORT}":
        problems.append(f"{where}: health check does not probe the local gRPC port")
    return problems


# -- compose and Envoy --


def check_compose(compose: dict[str, Any], envoy: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    services: dict[str, Any] = compose["services"]
    dealers = {n: s for n, s in services.items() if (s.get("command") or [None])[0] == "serve"}
    replicas = sum(int(s.get("deploy", {}).get("replicas", 1)) for s in dealers.values())
    if replicas != 3:
        problems.append(f"{replicas} dealer replicas, not 3")
    dbs = {n: (s.get("environment") or {}).get("FAIRDECK_DB") for n, s in dealers.items()}
    if len(set(dbs.values())) != 1 or None in dbs.values():
        problems.append(f"dealers do not share one FAIRDECK_DB: {dbs}")
    postgres = [n for n, s in services.items() if str(s.get("image", "")).startswith("postgres:")]
    if len(postgres) != 1:
        problems.append("not exactly one postgres service")
        return problems
    pg_name = postgres[0]
    pg = services[pg_name]
    if not re.match(r"postgres:15(\.\d+)?(-[a-z0-9]+)?@sha256:", pg["image"]):
        problems.append(f"postgres image {pg['image']}: not PostgreSQL 15 pinned by digest")
    if "pg_isready" not in " ".join(pg.get("healthcheck", {}).get("test", [])):
        problems.append("postgres has no pg_isready healthcheck")
    if not any(str(v).endswith(":/var/lib/postgresql/data") for v in pg.get("volumes", [])):
        problems.append("postgres data is not on a volume")
    for name, dealer in dealers.items():
        url = (dealer.get("environment") or {}).get("FAIRDECK_DB") or ""
        if not re.match(rf"postgresql://[^@]+@{re.escape(pg_name)}:5432/", url):
            problems.append(f"{name}: FAIRDECK_DB does not point at the {pg_name} service")
        if dealer.get("depends_on", {}).get(pg_name, {}).get("condition") != "service_healthy":
            problems.append(f"{name}: does not wait for {pg_name} to be healthy")
        test = dealer.get("healthcheck", {}).get("test", [])
        if test[:3] != ["CMD", "fairdeck", "health"]:
            problems.append(f"{name}: healthcheck is not `fairdeck health`")
        else:
            problems += check_health_argv(test[3:], f"compose {name} healthcheck")
        if dealer.get("ports"):
            problems.append(f"{name}: dealer ports published; only Envoy should be")
        given = flags(dealer["command"][1:])
        grace = float(given.get("--grace-seconds") or ServerConfig().grace_seconds)
        if seconds(dealer.get("stop_grace_period", "10s")) <= grace:
            problems.append(f"{name}: stop_grace_period is not longer than the drain grace")
        mounts = [str(v).split(":")[1] for v in dealer.get("volumes", [])]
        for key_flag in ("--seed-key-file", "--log-key-file"):
            path = given.get(key_flag)
            if path is None or not any(path.startswith(m + "/") for m in mounts):
                problems.append(f"{name}: {key_flag} is not on a mounted volume")
        if dealer.get("read_only") is not True:
            problems.append(f"{name}: root filesystem not read-only")
    for name, service in services.items():
        image = compose_default(str(service.get("image", "")))
        if image.split("/")[-1].split(":")[0] == "fairdeck":  # ours: built here, pinned by tag
            if image.partition(":")[2] in ("latest", ""):
                problems.append(f"{name}: fairdeck image {image} has no pinned tag")
        elif not DIGEST.search(image):
            problems.append(f"{name}: image {image} not pinned by digest")
        for secret in service.get("secrets", []):
            secret_name = secret if isinstance(secret, str) else secret["source"]
            if secret_name not in (compose.get("secrets") or {}):
                problems.append(f"{name}: secret {secret_name} is not defined")
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if not source.startswith((".", "/")) and source not in (compose.get("volumes") or {}):
                problems.append(f"{name}: volume {source} is not defined")
        for dep, cond in (service.get("depends_on") or {}).items():
            if dep not in services:
                problems.append(f"{name}: depends on unknown service {dep}")
            elif cond.get("condition") == "service_started":
                problems.append(f"{name}: depends on {dep} without a health condition")
    envoys = [n for n, s in services.items() if str(s.get("image", "")).startswith("envoyproxy/envoy:")]
    if len(envoys) != 1:
        problems.append("not exactly one Envoy service")
        return problems
    proxy = services[envoys[0]]
    for name in dealers:
        if proxy.get("depends_on", {}).get(name, {}).get("condition") != "service_healthy":
            problems.append(f"Envoy does not wait for {name} to be healthy")
    if not any(str(v).startswith("./envoy.yaml:") for v in proxy.get("volumes", [])):
        problems.append("Envoy does not mount deploy/envoy.yaml")
    published = {str(p).rsplit(":", 1)[-1] for p in proxy.get("ports", [])}
    listen_ports = {
        str(listener["address"]["socket_address"]["port_value"])
        for listener in envoy["static_resources"]["listeners"]
    }
    if not listen_ports or not listen_ports <= published:
        problems.append(f"Envoy listener ports {sorted(listen_ports)} not published (published {published})")
    clusters = envoy["static_resources"]["clusters"]
    for cluster in clusters:
        for group in cluster["load_assignment"]["endpoints"]:
            for endpoint in group["lb_endpoints"]:
                address = endpoint["endpoint"]["address"]["socket_address"]
                if address["address"] not in dealers:
                    problems.append(f"Envoy endpoint {address['address']} is not a dealer service")
                if address["port_value"] != GRPC_PORT:
                    problems.append(f"Envoy endpoint port {address['port_value']} is not the dealer's")
    return problems


def grpc_methods() -> dict[str, bool]:
    """Every gRPC method path the dealer serves, with whether it streams."""
    from grpc_health.v1 import health_pb2
    from grpc_reflection.v1alpha import reflection_pb2

    out: dict[str, bool] = {}
    for module in (dealer_pb2, audit_pb2, health_pb2, reflection_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                out[f"/{service.full_name}/{method.name}"] = (
                    method.server_streaming or method.client_streaming
                )
    return out


def envoy_route_for(routes: list[dict[str, Any]], path: str) -> dict[str, Any] | None:
    """The first route whose match takes ``path`` (Envoy tries routes in order)."""
    for route in routes:
        match = route["match"]
        if "path" in match and match["path"] == path:
            return route
        if "prefix" in match and path.startswith(match["prefix"]):
            return route
        if "safe_regex" in match and re.fullmatch(match["safe_regex"]["regex"], path):
            return route
    return None


def check_envoy(envoy: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    resources = envoy["static_resources"]
    clusters = {c["name"]: c for c in resources["clusters"]}
    for name, cluster in clusters.items():
        if cluster.get("type") not in ("STRICT_DNS", "LOGICAL_DNS"):
            problems.append(f"cluster {name}: not DNS-discovered")
        if cluster.get("lb_policy", "ROUND_ROBIN") != "ROUND_ROBIN":
            problems.append(f"cluster {name}: not round robin")
        options = cluster.get("typed_extension_protocol_options", {})
        http = options.get("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", {})
        if "http2_protocol_options" not in http.get("explicit_http_config", {}):
            problems.append(f"cluster {name}: upstream is not HTTP/2")
        checks = [h.get("grpc_health_check") for h in cluster.get("health_checks", [])]
        if not any(c is not None and c.get("service_name") == DEALER_SERVICE for c in checks):
            problems.append(f"cluster {name}: no gRPC health check of {DEALER_SERVICE}")
        if "connect_timeout" not in cluster:
            problems.append(f"cluster {name}: no connect_timeout")
    routes: list[dict[str, Any]] = []
    for listener in resources["listeners"]:
        for chain in listener["filter_chains"]:
            for flt in chain["filters"]:
                config = flt["typed_config"]
                for host in config.get("route_config", {}).get("virtual_hosts", []):
                    routes += host["routes"]
    for path, streaming in grpc_methods().items():
        route = envoy_route_for(routes, path)
        if route is None:
            problems.append(f"{path}: no route")
            continue
        action = route["route"]
        if action.get("cluster") not in clusters:
            problems.append(f"{path}: routed to unknown cluster {action.get('cluster')}")
        timeout = seconds(action.get("timeout", "15s"))
        if streaming and (timeout != 0 or "idle_timeout" not in action):
            problems.append(f"{path}: a stream with a total timeout or no idle timeout")
        if not streaming and not 0 < timeout <= 60:
            problems.append(f"{path}: unary call without a finite timeout")
        retried = "retry_policy" in action
        if retried and path not in SAFE_METHODS:
            problems.append(f"{path}: retried but not safe to repeat")
        if not retried and path in SAFE_METHODS:
            problems.append(f"{path}: safe to repeat but not retried")
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


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_k8s(docs: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    deployments = by_kind.get("Deployment", [])
    if len(deployments) != 1:
        return [f"{len(deployments)} Deployments, not 1"]
    deployment = deployments[0]
    name = deployment["metadata"]["name"]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    if not _selects(spec["selector"]["matchLabels"], labels):
        problems.append("Deployment selector does not select its own pods")
    if spec.get("replicas") != 3:
        problems.append(f"Deployment replicas {spec.get('replicas')}, not 3")
    pod_sc = pod.get("securityContext", {})
    if pod_sc.get("runAsNonRoot") is not True or not pod_sc.get("runAsUser"):
        problems.append("pod securityContext: not runAsNonRoot with a runAsUser")
    if pod_sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append("pod securityContext: no RuntimeDefault seccomp profile")
    if not pod.get("topologySpreadConstraints") and "podAntiAffinity" not in pod.get("affinity", {}):
        problems.append("no topology spread or anti-affinity")
    container_names = [c["name"] for c in pod["containers"]]
    dealer = next((c for c in pod["containers"] if c.get("args", [])[:1] == ["serve"]), None)
    if dealer is None:
        return [*problems, f"no container runs serve (containers {container_names})"]
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        sc = c.get("securityContext", {})
        where = f"container {c['name']}"
        if sc.get("runAsNonRoot") is not True:
            problems.append(f"{where}: runAsNonRoot is not true")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{where}: readOnlyRootFilesystem is not true")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        if sc.get("capabilities", {}).get("drop") != ["ALL"]:
            problems.append(f"{where}: capabilities not dropped")
        if sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{where}: no RuntimeDefault seccomp profile")
        image = c.get("image", "")
        tag = image.rsplit("/", 1)[-1].partition(":")[2].split("@")[0]
        if not tag or tag == "latest":
            problems.append(f"{where}: image {image} has no pinned tag")
        resources = c.get("resources", {})
        if not resources.get("requests") or "memory" not in resources.get("limits", {}):
            problems.append(f"{where}: no resource requests and memory limit")
    ports = {p["name"]: p["containerPort"] for p in dealer.get("ports", [])}
    if ports.get("grpc") != GRPC_PORT or ports.get("metrics") != METRICS_PORT:
        problems.append(f"dealer ports {ports}: not grpc {GRPC_PORT} and metrics {METRICS_PORT}")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc = dealer.get(probe, {}).get("grpc")
        if grpc is None:
            problems.append(f"{probe}: not a gRPC probe")
        elif grpc.get("port") != GRPC_PORT:
            problems.append(f"{probe}: probes port {grpc.get('port')}, not {GRPC_PORT}")
    given = flags(dealer["args"][1:])
    if given.get("--listen") != f"0.0.0.0:{GRPC_PORT}":
        problems.append("dealer does not listen on the gRPC port on every interface")
    grace = float(given.get("--grace-seconds") or ServerConfig().grace_seconds)
    pre_stop = dealer.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    if pod.get("terminationGracePeriodSeconds", 30) <= grace + pre_stop:
        problems.append("terminationGracePeriodSeconds is not longer than preStop plus the drain grace")
    mounts = {m["mountPath"]: m["name"] for m in dealer.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    if "emptyDir" not in volumes.get(mounts.get("/tmp", ""), {}):
        problems.append("no writable emptyDir at /tmp")
    data_volume = volumes.get(mounts.get(given.get("--data") or "", ""), {})
    if not {"emptyDir", "persistentVolumeClaim"} & set(data_volume):
        problems.append("the data dir is not a mounted volume (the root filesystem is read-only)")
    for key_flag in ("--seed-key-file", "--log-key-file"):
        path = given.get(key_flag, "")
        if path and not any(path.startswith(m.rstrip("/") + "/") for m in mounts):
            problems.append(f"{key_flag} {path} is not on a mounted volume")
    # Secrets referenced by the pod exist, with the keys used.
    secrets = {s["metadata"]["name"]: s for s in by_kind.get("Secret", [])}

    def secret_has(secret_name: str, key: str | None, where: str) -> None:
        secret = secrets.get(secret_name)
        if secret is None:
            problems.append(f"{where}: Secret {secret_name} is not defined")
        elif key is not None and key not in {**secret.get("data", {}), **secret.get("stringData", {})}:
            problems.append(f"{where}: Secret {secret_name} has no key {key}")

    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        for env in c.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                secret_has(ref["name"], ref["key"], f"env {env['name']}")
    for volume in volumes.values():
        if "secret" in volume:
            items = volume["secret"].get("items") or [{"key": None}]
            for item in items:
                secret_has(volume["secret"]["secretName"], item["key"], f"volume {volume['name']}")
    # Service, PDB, HPA, NetworkPolicy all aim at the Deployment's pods.
    services = by_kind.get("Service", [])
    if not services:
        problems.append("no Service")
    for service in services:
        sname = service["metadata"]["name"]
        if not _selects(service["spec"].get("selector", {}), labels):
            problems.append(f"Service {sname} does not select the dealer pods")
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            number = ports.get(target) if isinstance(target, str) else target
            if number not in ports.values():
                problems.append(f"Service {sname} port {port['name']}: target {target} is no container port")
            if number == GRPC_PORT and port.get("appProtocol") != "grpc":
                problems.append(f"Service {sname} gRPC port without appProtocol grpc")
    if not any({p.get("targetPort") for p in s["spec"]["ports"]} >= {"grpc", "metrics"} for s in services):
        problems.append("no Service exposes both the gRPC and the metrics port")
    if not by_kind.get("PodDisruptionBudget"):
        problems.append("no PodDisruptionBudget")
    for pdb in by_kind.get("PodDisruptionBudget", []):
        if not _selects(pdb["spec"]["selector"].get("matchLabels", {}), labels):
            problems.append("PodDisruptionBudget does not select the dealer pods")
    if not by_kind.get("HorizontalPodAutoscaler"):
        problems.append("no HorizontalPodAutoscaler")
    for hpa in by_kind.get("HorizontalPodAutoscaler", []):
        target = hpa["spec"]["scaleTargetRef"]
        if (target["kind"], target["name"]) != ("Deployment", name):
            problems.append(f"HorizontalPodAutoscaler targets {target['kind']}/{target['name']}, not {name}")
        if hpa["spec"].get("minReplicas", 1) < 2:
            problems.append("HorizontalPodAutoscaler may scale below 2 replicas")
    policies = by_kind.get("NetworkPolicy", [])
    if not policies:
        problems.append("no NetworkPolicy")
    for policy in policies:
        pspec = policy["spec"]
        if not _selects(pspec["podSelector"].get("matchLabels", {}), labels):
            problems.append("NetworkPolicy does not select the dealer pods")
        if set(pspec.get("policyTypes", [])) != {"Ingress", "Egress"}:
            problems.append("NetworkPolicy does not restrict both ingress and egress")
        in_ports = {p["port"] for rule in pspec.get("ingress", []) for p in rule.get("ports", [])}
        if in_ports != {GRPC_PORT, METRICS_PORT}:
            problems.append(f"NetworkPolicy ingress ports {in_ports}, not gRPC and metrics only")
        for rule in pspec.get("ingress", []):
            if not rule.get("from"):
                problems.append("NetworkPolicy ingress rule open to every source")
        out_ports = {
            (p.get("protocol", "TCP"), p["port"]) for r in pspec.get("egress", []) for p in r["ports"]
        }
        if out_ports != {("UDP", 53), ("TCP", 53), ("TCP", 5432)}:
            problems.append(f"NetworkPolicy egress {sorted(out_ports)}: not DNS and PostgreSQL only")
    namespaces = {n["metadata"]["name"] for n in by_kind.get("Namespace", [])}
    for doc in docs:
        ns = doc["metadata"].get("namespace")
        if doc["kind"] != "Namespace" and ns not in namespaces:
            problems.append(f"{doc['kind']} {doc['metadata']['name']}: namespace {ns} is not defined")
    return problems
