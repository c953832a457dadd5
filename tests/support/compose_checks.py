"""The checks of deploy/compose.yaml, read with the Envoy config it mounts: three dealer
replicas on one PostgreSQL 15, health-gated start order, keys on mounted volumes, a stop
grace longer than the drain, images pinned, secrets and volumes defined, and Envoy as the
only published door, balancing over the dealer services. Returns problems, as every
check_* does (deployfiles.py)."""

from __future__ import annotations

import re
from typing import Any

from fairdeck_server.run.config import ServerConfig
from tests.support.deployfiles import DIGEST, GRPC_PORT, check_health_argv, compose_default, flags, seconds

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
