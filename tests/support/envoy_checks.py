"""The checks of deploy/envoy.yaml: DNS-discovered, round-robin HTTP/2 clusters with a gRPC
health check of the dealer; a route for every gRPC method the dealer serves, streams with an
idle timeout and no total one, unary calls with a finite one, and retries on exactly the
calls that are safe to repeat. Returns problems, as every check_* does (deployfiles.py)."""

from __future__ import annotations

import re
from typing import Any

from fairdeck.v1 import audit_pb2, dealer_pb2
from tests.support.deployfiles import DEALER_SERVICE, seconds

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
