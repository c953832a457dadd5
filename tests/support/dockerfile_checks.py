"""The checks of deploy/Dockerfile: multi-stage on one base image pinned by tag and digest,
a runtime stage that copies only the virtualenv and runs as a numeric non-root user, an
exec-form ``fairdeck`` entrypoint serving gRPC and metrics on the published ports, a
``fairdeck health`` HEALTHCHECK and a VOLUME. Returns problems, as every check_* does
(deployfiles.py)."""

from __future__ import annotations

import re

from tests.support.deployfiles import (
    DIGEST,
    GRPC_PORT,
    METRICS_PORT,
    check_health_argv,
    exec_form,
    flags,
    parse_dockerfile,
)


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
