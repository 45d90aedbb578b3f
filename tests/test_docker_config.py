"""The Docker files, read without Docker: the compose file, the Dockerfile, .dockerignore, docker/.env and
docker/test-compose.sh say what README.md's "Docker" section promises; `config` accepts the compose file
when a compose client is installed. docker/test-compose.sh checks the same deployment for real (not in CI:
CI machines have no Docker engine)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.docker  # the kinds of tests: tests/conftest.py, TEST_KINDS

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_FILE = ROOT / "docker" / ".env"
TEST_SCRIPT = ROOT / "docker" / "test-compose.sh"

KERNEL_CACHE = "/var/cache/hinge/kernels"
KERNEL_SEED = "/opt/hinge/kernels"


def spec() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose's ${VAR:-default} and ${VAR} with the given environment (default: empty, so defaults apply)."""
    env = env or {}

    def one(match: re.Match) -> str:
        name, default = match.group(1), match.group(3)
        return env.get(name) or (default if default is not None else "")

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", one, str(value))


def stages(text: str) -> list[list[str]]:
    """The Dockerfile's instructions (continuation lines joined), split by FROM into stages."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]
    result: list[list[str]] = []
    for line in lines:
        if line.upper().startswith("FROM "):
            result.append([])
        if result:
            result[-1].append(line)
    return result


def test_compose_structure():
    services = spec()["services"]
    assert set(services) == {"redis", "s3", "api", "worker", "dask-scheduler", "node"}
    # the nodes of trainings split over nodes start only with their profile
    assert services["dask-scheduler"]["profiles"] == ["split"] == services["node"]["profiles"]
    assert services["node"]["command"][:3] == ["dask", "worker", "tcp://dask-scheduler:8786"]
    assert "HINGE_S3_ENDPOINT_URL" in services["node"]["environment"]
    redis = services["redis"]
    assert "--appendonly" in redis["command"] and "yes" in redis["command"]
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    assert "healthcheck" in redis and "healthcheck" in services["api"] and "healthcheck" in services["worker"]
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker, "a worker must be scalable with --scale"
    assert worker["command"] == ["hinge", "worker"]
    for name in ("api", "worker"):
        url = interpolate(services[name]["environment"]["REDIS_URL"])
        assert url == "redis://:@redis:6379/0", "no password unless HINGE_REDIS_PASSWORD is set"
        with_password = interpolate(services[name]["environment"]["REDIS_URL"], {"HINGE_REDIS_PASSWORD": "pw1"})
        assert with_password == "redis://:pw1@redis:6379/0"
    assert "stop_grace_period" in worker


def test_data_sets_live_in_the_s3_server_and_the_hosts_workers_share_one_cache():
    services = spec()["services"]
    s3 = services["s3"]
    assert any(volume.endswith(":/data") for volume in s3["volumes"]) and "healthcheck" in s3
    assert "ports" not in s3, "S3 is published only by compose.multihost.yaml"
    assert s3["build"]["dockerfile"] == "docker/seaweedfs.Dockerfile"
    for name in ("api", "worker"):
        env = services[name]["environment"]
        assert env["HINGE_OBJECT_STORE"] == "s3" and env["HINGE_S3_ENDPOINT_URL"] == "http://s3:8333"
        # the identity SeaweedFS makes is the one Hinge signs with, whatever the shell sets
        for ours, theirs in (
            ("HINGE_S3_ACCESS_KEY_ID", "S3_ACCESS_KEY_ID"),
            ("HINGE_S3_SECRET_ACCESS_KEY", "S3_SECRET_ACCESS_KEY"),
        ):
            for shell in ({}, {ours: "custom-value"}):
                assert interpolate(env[ours], shell) == interpolate(s3["environment"][theirs], shell)
        assert interpolate(env["HINGE_S3_BUCKET"]) == interpolate(s3["environment"]["S3_BUCKET"]) == "hinge"
        assert "cache:/var/lib/hinge/cache" in services[name]["volumes"], name
        assert services[name]["depends_on"]["s3"] == {"condition": "service_healthy"}
    assert "cache" in spec()["volumes"] and "s3-data" in spec()["volumes"]
    assert "mkdir -p /var/lib/hinge/cache" in DOCKERFILE.read_text(), "the cache volume starts owned by hinge"


def test_publishing_redis_and_s3_to_other_machines_needs_their_secrets():
    override = yaml.safe_load((ROOT / "docker" / "compose.multihost.yaml").read_text())["services"]
    assert set(override) == {"redis", "s3"}
    assert interpolate(override["redis"]["ports"][0]) == "127.0.0.1:6379:6379"
    assert interpolate(override["s3"]["ports"][0], {"HINGE_PUBLISH_BIND": "10.0.0.5"}) == "10.0.0.5:8333:8333"
    assert ":?" in override["redis"]["environment"]["REDISCLI_AUTH"]
    assert ":?" in override["s3"]["environment"]["S3_SECRET_ACCESS_KEY"]
    workers = yaml.safe_load((ROOT / "docker" / "compose.workers.yaml").read_text())
    assert set(workers["services"]) == {"worker"}
    worker = workers["services"]["worker"]
    for name in ("REDIS_URL", "HINGE_S3_ENDPOINT_URL", "HINGE_S3_SECRET_ACCESS_KEY"):
        assert ":?" in worker["environment"][name], f"{name} is required on another machine"
    main_worker = spec()["services"]["worker"]
    assert worker["healthcheck"]["test"] == main_worker["healthcheck"]["test"]
    assert worker["command"] == main_worker["command"] and "cache:/var/lib/hinge/cache" in worker["volumes"]


def test_project_is_named_hinge_for_compose_v1_and_v2():
    # compose v1 (1.29) refuses a top-level `name:`; both versions read COMPOSE_PROJECT_NAME from the .env
    # file next to the compose file.
    assert "name" not in spec(), "docker-compose 1.29 refuses a top-level name: key"
    env = dict(
        line.split("=", 1) for line in ENV_FILE.read_text().splitlines() if line.strip() and not line.startswith("#")
    )
    assert env.get("COMPOSE_PROJECT_NAME") == "hinge"


def test_api_published_on_localhost_by_default():
    api = spec()["services"]["api"]
    (port,) = api["ports"]
    assert interpolate(port) == "127.0.0.1:8000:8000"
    assert interpolate(port, {"HINGE_BIND": "0.0.0.0", "HINGE_PORT": "9000"}) == "0.0.0.0:9000:8000"
    # keys reach the API when set in the shell or docker/.env (a null value passes the variable through)
    assert "HINGE_API_KEYS" in api["environment"] and api["environment"]["HINGE_API_KEYS"] is None


def test_redis_has_a_memory_limit_and_never_evicts():
    command = [interpolate(part) for part in spec()["services"]["redis"]["command"]]
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    raw = spec()["services"]["redis"]["command"][command.index("--maxmemory") + 1]
    assert "HINGE_REDIS_MAXMEMORY" in raw, "the limit is configurable with HINGE_REDIS_MAXMEMORY"
    default = interpolate(raw)
    match = re.fullmatch(r"(\d+)(kb|mb|gb)?", default.lower())
    assert match, f"maxmemory default {default!r} is not a Redis memory size"
    factor = {None: 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}[match.group(2)]
    assert int(match.group(1)) * factor >= 256 * 1024**2, "a limit of 0 turns the 507 storage_full guard off"
    assert interpolate(raw, {"HINGE_REDIS_MAXMEMORY": "512mb"}) == "512mb"


def test_workers_cores_and_shutdown_policy():
    worker = spec()["services"]["worker"]
    env = worker["environment"]
    assert interpolate(env["HINGE_WORKER_CORES"]) == "", "unset: the host's core budget decides"
    assert interpolate(env["HINGE_WORKER_CORES"], {"HINGE_WORKER_CORES": "2"}) == "2"
    assert interpolate(env["HINGE_SHUTDOWN_POLICY"]) == "requeue"
    assert interpolate(env["HINGE_SHUTDOWN_POLICY"], {"HINGE_SHUTDOWN_POLICY": "checkpoint"}) == "checkpoint"
    grace = int(str(worker["stop_grace_period"]).rstrip("s"))
    assert 10 <= grace <= 120


def test_worker_health_is_its_heartbeat():
    # Healthy while its heartbeat key (written from before the kernels load or compile) names this container:
    # a worker compiling kernels is never `unhealthy`; RQ registration comes only after the first kernels.
    import inspect

    from service.cli import cmd_worker_health

    check = spec()["services"]["worker"]["healthcheck"]
    assert check["test"] == ["CMD", "hinge", "worker-health"]
    text = inspect.getsource(cmd_worker_health)
    assert "worker_beats" in text and "gethostname" in text and '"host"' in text
    assert "rq.Worker" not in text
    start = int(str(check["start_period"]).rstrip("s"))
    assert 10 <= start <= 120


def test_kernel_cache_volume_shared_by_api_and_workers():
    services = spec()["services"]
    assert "kernels" in spec()["volumes"]
    for name in ("api", "worker"):
        assert f"kernels:{KERNEL_CACHE}" in services[name]["volumes"], name
    text = DOCKERFILE.read_text()
    assert f"HINGE_KERNEL_CACHE_DIR={KERNEL_CACHE}" in text and f"HINGE_KERNEL_SEED_DIR={KERNEL_SEED}" in text
    assert re.search(rf"HINGE_KERNEL_CACHE_DIR={KERNEL_SEED} hinge compile --build", text), "compiled code built in"


def test_dockerfile_installs_the_project():
    text = DOCKERFILE.read_text()
    assert "FROM python:3.11" in text and "pip install" in text and "NUMBA_THREADING_LAYER=workqueue" in text


def test_dockerfile_leaves_no_source_tree_to_shadow_the_installed_package():
    *build, final = stages(DOCKERFILE.read_text())
    assert build, "a build stage makes the wheel"
    copied = " ".join(line for line in build[0] if line.upper().startswith("COPY"))
    for package in ("core", "service", "worker", "hinge_client"):
        assert re.search(rf"\b{package}\b", copied), f"the wheel stage copies {package} (hingectl needs hinge_client)"
    for line in final:
        if line.upper().startswith("COPY") and "--from=" not in line:
            assert not re.search(r"\b(core|service|worker|hinge_client)\b", line), (
                f"source copied into the image: {line}"
            )
    workdirs = [line.split()[1] for line in final if line.upper().startswith("WORKDIR")]
    assert workdirs and workdirs[-1] not in ("/app", "/"), "the working directory must hold no package"
    assert any("pip install" in line and ".whl" in line for line in final)
    assert any(line == "USER hinge" for line in final)
    assert any("hingectl --help" in line for line in final), "the build checks that hingectl runs"


def dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""

    def regex(pattern: str) -> re.Pattern:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                out, i = out + pattern[i : end + 1], end + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return re.compile(out + r"\Z")

    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        compiled = regex(pattern.lstrip("!").strip("/"))
        if any(compiled.match(prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


def test_dockerignore_sends_only_what_the_build_needs():
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    needed = [
        "pyproject.toml",
        "README.md",
        "docker/Dockerfile",
        "core/schemas/jobs.py",
        "service/api/app.py",
        "service/static/dashboard/index.html",
        "worker/solvers/dcd.py",
        "hinge_client/cli.py",
    ]
    for path in needed:
        assert not dockerignore_excludes(path, patterns), f".dockerignore leaves out {path}"
    left_out = [
        ".venv/bin/python",
        "hinge-data/appendonly.aof",
        ".git/HEAD",
        "tests/.cache/x",
        "tests/test_dcd.py",
        "service/__pycache__/cli.cpython-311.pyc",
        "worker/solvers/__pycache__/hinge-kernels/worker.solvers/dcd.x-1.py311.nbi",
        "worker/solvers/dcd.x-1.py311.1.nbc",
        "node_modules/x/index.js",
        "service/static/node_modules/x.js",
        "build/lib/service/cli.py",
        "dist/hinge-0.1.0.whl",
        "hinge.egg-info/PKG-INFO",
    ]
    for path in left_out:
        assert dockerignore_excludes(path, patterns), f".dockerignore sends {path}"
    # every file the Dockerfile copies from the context is sent
    for stage in stages(DOCKERFILE.read_text()):
        for line in stage:
            if line.upper().startswith("COPY") and "--from=" not in line:
                for source in line.split()[1:-1]:
                    assert not dockerignore_excludes(source.rstrip("/"), patterns), f"{line}: {source} left out"


def test_compose_test_script_runs_its_own_project():
    text = TEST_SCRIPT.read_text()
    assert TEST_SCRIPT.stat().st_mode & 0o111, "docker/test-compose.sh is executable"
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text
    assert "PROJECT=${HINGE_TEST_PROJECT:-hinge-test}" in text, "never the user's `hinge` project"
    assert "down -v" in text and "trap cleanup EXIT" in text
    assert "--network host" in text and "--scale worker=4" in text and "--scale worker=5" in text
    for check in ("docker kill -s KILL", "docker stop", "restart redis", "storage_full", "distribute"):
        assert check in text, check
    if shutil.which("bash"):
        result = subprocess.run(["bash", "-n", str(TEST_SCRIPT)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


@pytest.mark.skipif(not (shutil.which("docker-compose") or shutil.which("docker")), reason="no docker client")
def test_compose_config_accepted():
    commands = []
    files = [
        ["-f", str(COMPOSE)],
        ["-f", str(COMPOSE), "-f", str(ROOT / "docker" / "compose.multihost.yaml")],
        ["-f", str(ROOT / "docker" / "compose.workers.yaml")],
    ]
    for chosen in files:
        if shutil.which("docker-compose"):
            commands.append(["docker-compose", *chosen, "config", "-q"])
        if shutil.which("docker"):
            commands.append(["docker", "compose", *chosen, "config", "-q"])
    env = dict(
        os.environ,
        HINGE_REDIS_PASSWORD="pw",
        HINGE_S3_SECRET_ACCESS_KEY="secret",
        HINGE_REDIS_URL="redis://:pw@10.0.0.5:6379/0",
        HINGE_S3_ENDPOINT_URL="http://10.0.0.5:8333",
    )
    results = [subprocess.run(cmd, capture_output=True, text=True, env=env) for cmd in commands]
    usable = [r for r in results if "is not a docker command" not in r.stderr and "unknown" not in r.stderr.lower()]
    if not usable:
        pytest.skip("no compose implementation available")
    for result in usable:
        assert result.returncode == 0, result.stderr


def test_settings_take_what_docker_env_files_hold(monkeypatch):
    """The compose deployment's values read the same in `hinge serve`: Redis's memory units, and an empty
    line (`HINGE_API_KEYS=` in docker/.env) means the default instead of stopping the API."""
    from core.config import Settings

    monkeypatch.setenv("HINGE_REDIS_MAXMEMORY", "2gb")
    monkeypatch.setenv("HINGE_API_KEYS", "")
    settings = Settings()
    assert settings.redis_maxmemory == 2 * 1024**3 and settings.api_keys == {}
    for text, expected in (("512mb", 512 * 1024**2), ("3k", 3000), ("1000", 1000), ("0", 0)):
        monkeypatch.setenv("HINGE_REDIS_MAXMEMORY", text)
        assert Settings().redis_maxmemory == expected, text
