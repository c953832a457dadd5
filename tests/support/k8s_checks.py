"""The checks of the Kubernetes manifests in deploy/k8s/: one Deployment of three hardened,
non-root pods with gRPC probes, resources, writable volumes where the read-only root needs
them and a termination grace longer than preStop plus the drain; the Secrets it references;
and a Service, PodDisruptionBudget, HorizontalPodAutoscaler and NetworkPolicy aimed at its
pods, all in defined namespaces. Returns problems, as every check_* does (deployfiles.py)."""

from __future__ import annotations

from typing import Any

from fairdeck_server.run.config import ServerConfig
from tests.support.deployfiles import GRPC_PORT, METRICS_PORT, flags


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
