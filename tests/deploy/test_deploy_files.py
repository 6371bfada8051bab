"""Static checks of the deployment files: Dockerfile, docker-compose.yml, deploy/.

Nothing here builds an image or talks to Docker or a cluster. The files are
parsed (PyYAML, a small Dockerfile reader) and checked against the code they
start: every ``EVALPLAN_`` variable must be a field of ``evalplan.kit.settings.Settings``,
every ``evalplan ...`` command line must be accepted by the CLI's argparse
parser, worker queues must exist, and the API port is 8000 everywhere.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from evalplan.kit.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
COMPOSE_FILE = ROOT / "docker-compose.yml"
CONSTRAINTS = ROOT / "constraints.txt"
DEPLOY = ROOT / "deploy"

API_PORT = 8000
QUEUES = {"cpu", "gpu"}
API_IMAGE, WORKER_IMAGE = "evalplan-api", "evalplan-worker"
IMAGE_REPOSITORIES = {API_IMAGE, WORKER_IMAGE}
TORCH_PIN = "torch==2.13.0"
SETTINGS_ENV_NAMES = {"EVALPLAN_" + name.upper() for name in Settings.model_fields}


# --------------------------------------------------------------------------- readers


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    current = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, rest = current.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        current = ""
    assert current == "", "Dockerfile ends inside a line continuation"
    return instructions


def dockerfile_args(keyword: str, stage: str | None = None) -> list[str]:
    """The arguments of every ``keyword`` instruction, or of those in build stage ``stage`` only."""
    return [rest for kw, rest in dockerfile_stage(stage) if kw == keyword]


def dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
    """Build stage name (``FROM ... AS name``) -> its instructions."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for kw, rest in dockerfile_instructions():
        if kw == "FROM":
            current = stages.setdefault(rest.split()[-1], [])
        current.append((kw, rest))
    return stages


def dockerfile_stage(stage: str | None) -> list[tuple[str, str]]:
    """One stage's instructions together with those of the stages it builds on (``FROM base AS x``)."""
    if stage is None:
        return dockerfile_instructions()
    stages = dockerfile_stages()
    own = stages[stage]
    parent = own[0][1].split()[0]
    return (dockerfile_stage(parent) if parent in stages else []) + own


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in dockerfile_args("ENV"):
        for token in shlex.split(rest):
            key, sep, value = token.partition("=")
            assert sep, f"use the ENV KEY=VALUE form: {rest!r}"
            env[key] = value
    return env


def dockerfile_build_args() -> dict[str, str]:
    args: dict[str, str] = {}
    for rest in dockerfile_args("ARG"):
        key, _, value = rest.partition("=")
        args[key.strip()] = value.strip()
    return args


def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def compose_services() -> dict:
    return compose()["services"]


def manifest_files() -> list[Path]:
    return sorted(p for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")


def manifests() -> list[dict]:
    docs: list[dict] = []
    for path in manifest_files():
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None)
    return docs


def manifest(kind: str, name: str) -> dict:
    found = [d for d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected exactly one {kind} {name}, found {len(found)}"
    return found[0]


def pod_spec(doc: dict) -> dict:
    return doc["spec"]["template"]["spec"]


def workload_manifests() -> list[dict]:
    return [d for d in manifests() if d["kind"] in {"Deployment", "Job", "StatefulSet", "DaemonSet"}]


def k8s_containers() -> list[tuple[str, dict]]:
    out = []
    for doc in workload_manifests():
        spec = pod_spec(doc)
        for container in spec.get("initContainers", []) + spec["containers"]:
            out.append((f"{doc['kind']}/{doc['metadata']['name']}/{container['name']}", container))
    return out


def container_argv(container: dict) -> list[str]:
    return [str(x) for x in container.get("command", []) + container.get("args", [])]


def compose_argv(service: dict) -> list[str]:
    command = service.get("command", [])
    if isinstance(command, str):
        return shlex.split(command)
    return [str(x) for x in command]


def dockerfile_cmd(stage: str = "api") -> list[str]:
    cmds = dockerfile_args("CMD", stage)
    assert len(cmds) == 1, f"the Dockerfile's {stage} stage needs exactly one CMD"
    argv = json.loads(cmds[0])  # exec form: a JSON array
    assert isinstance(argv, list)
    return argv


def evalplan_command_lines() -> list[tuple[str, list[str]]]:
    """Every command line in the deployment files that starts ``evalplan``."""
    lines: list[tuple[str, list[str]]] = [("Dockerfile api CMD", dockerfile_cmd("api")),
                                          ("Dockerfile worker CMD", dockerfile_cmd("worker"))]
    for name, service in compose_services().items():
        lines.append((f"compose service {name}", compose_argv(service)))
    for where, container in k8s_containers():
        lines.append((where, container_argv(container)))
    return [(where, argv) for where, argv in lines if argv and argv[0] == "evalplan"]


def queues_of(argv: list[str]) -> set[str]:
    for i, token in enumerate(argv):
        if token == "--queues":
            return set(argv[i + 1].split(","))
        if token.startswith("--queues="):
            return set(token.split("=", 1)[1].split(","))
    raise AssertionError(f"worker command without --queues: {argv}")


def image_repository(image: str) -> str:
    return image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]


# --------------------------------------------------------------------------- parsing


def test_yaml_files_parse() -> None:
    assert isinstance(compose(), dict)
    assert manifest_files(), "deploy/ holds no manifests"
    for path in [*manifest_files(), DEPLOY / "kustomization.yaml"]:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs, f"{path.name} is empty"
        for doc in docs:
            assert doc.get("apiVersion"), f"{path.name}: apiVersion missing"
            assert doc.get("kind"), f"{path.name}: kind missing"
    for doc in manifests():
        assert doc["metadata"]["name"], f"{doc['kind']} without metadata.name"


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    assert sorted(resources) == sorted(p.name for p in manifest_files())
    assert (DEPLOY / "README.md").is_file()


def test_expected_kubernetes_objects_exist() -> None:
    kinds_names = {(d["kind"], d["metadata"]["name"]) for d in manifests()}
    assert kinds_names == {
        ("ConfigMap", "evalplan-config"),
        ("Secret", "evalplan-secrets"),
        ("Job", "evalplan-migrate"),
        ("Deployment", "evalplan-api"),
        ("Service", "evalplan-api"),
        ("Deployment", "evalplan-worker-cpu"),
        ("Deployment", "evalplan-worker-gpu"),
    }


# --------------------------------------------------------------------------- Dockerfile


def test_dockerfile_base_image_stages_and_build_args() -> None:
    froms = dockerfile_args("FROM")
    assert froms == ["python:3.11-slim AS base", "base AS worker", "base AS api"]  # api last: the default target
    args = dockerfile_build_args()
    assert args["TORCH_VARIANT"] == "cpu"
    assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/${TORCH_VARIANT}"


def test_dockerfile_runs_as_non_root() -> None:
    for stage in ("api", "worker"):
        users = dockerfile_args("USER", stage)
        assert users, f"the {stage} image must switch to a non-root USER"
        assert users[-1].split(":")[0] not in {"root", "0"}, stage


def test_dockerfile_worker_installs_torch_first_then_the_worker_extra_with_constraints() -> None:
    pip_runs = [rest for rest in dockerfile_args("RUN", "worker") if "pip install" in rest]
    torch_runs = [i for i, rest in enumerate(pip_runs) if TORCH_PIN in rest]
    project_runs = [i for i, rest in enumerate(pip_runs) if 'pip install -c constraints.txt ".[worker]"' in rest]
    assert len(torch_runs) == 1, pip_runs
    assert len(project_runs) == 1, pip_runs
    assert torch_runs[0] < project_runs[0], "torch must be installed before the project"
    torch_run = pip_runs[torch_runs[0]]
    assert "-c constraints.txt" in torch_run
    assert '--index-url "${TORCH_INDEX_URL}"' in torch_run or "--index-url ${TORCH_INDEX_URL}" in torch_run
    # No other pip install sneaks in a second torch or skips the constraints.
    for rest in pip_runs:
        assert "-c constraints.txt" in rest, rest


def test_dockerfile_api_installs_the_base_project_without_torch() -> None:
    pip_runs = [rest for rest in dockerfile_args("RUN", "api") if "pip install" in rest]
    assert len(pip_runs) == 1 and re.search(r"pip install -c constraints\.txt \.(\s|$)", pip_runs[0]), pip_runs
    assert "torch" not in pip_runs[0].split("&&")[0]
    assert "find_spec('torch')" in pip_runs[0]  # the build fails if torch came in anyway


def test_constraints_pin_torch() -> None:
    lines = [ln.split("#")[0].strip() for ln in CONSTRAINTS.read_text().splitlines()]
    assert TORCH_PIN in lines


def test_dockerfile_env_and_expose() -> None:
    env = dockerfile_env()
    assert env["HF_HUB_OFFLINE"] == "1"
    assert dockerfile_args("EXPOSE", "api") == [str(API_PORT)]


def test_dockerfile_cmd_runs_serve_and_no_entrypoint() -> None:
    assert dockerfile_args("ENTRYPOINT") == []
    assert dockerfile_cmd("worker")[:2] == ["evalplan", "worker"]
    argv = dockerfile_cmd("api")
    assert argv[:2] == ["evalplan", "serve"]
    assert argv[argv.index("--port") + 1] == str(API_PORT)
    assert argv[argv.index("--host") + 1] == "0.0.0.0"


def test_dockerfile_healthcheck_probes_health_with_urllib() -> None:
    assert dockerfile_args("HEALTHCHECK", "worker") == []  # a worker serves no HTTP
    checks = dockerfile_args("HEALTHCHECK", "api")
    assert len(checks) == 1
    assert "urllib" in checks[0]
    assert f"127.0.0.1:{API_PORT}/health" in checks[0]


def test_dockerignore_excludes_local_state() -> None:
    entries = {ln.strip() for ln in DOCKERIGNORE.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    for required in [".venv", ".git", "*.db", "var"]:
        assert required in entries, required
    assert "**/__pycache__" in entries or "__pycache__" in entries


# --------------------------------------------------------------------------- compose


def test_compose_services_and_healthchecks() -> None:
    services = compose_services()
    assert {"api", "worker", "migrate", "postgres", "redis"} <= set(services)
    for name in ["api", "postgres", "redis"]:
        test = services[name]["healthcheck"]["test"]
        assert test and test[0] in {"CMD", "CMD-SHELL"}, name
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert services["redis"]["healthcheck"]["test"][1:] == ["redis-cli", "ping"]
    api_check = " ".join(services["api"]["healthcheck"]["test"])
    assert f":{API_PORT}/health" in api_check and "urllib" in api_check
    # The image's HEALTHCHECK probes HTTP; services that serve no HTTP turn it off.
    assert services["worker"]["healthcheck"] == {"disable": True}
    assert services["migrate"]["healthcheck"] == {"disable": True}
    assert services["postgres"]["image"] == "postgres:16"
    assert services["redis"]["image"] == "redis:7"


def test_compose_volumes_are_named_and_declared() -> None:
    doc = compose()
    declared = set(doc["volumes"])
    services = doc["services"]
    assert any(v.endswith(":/var/lib/postgresql/data") for v in services["postgres"]["volumes"])
    assert any(v.endswith(":/data") for v in services["redis"]["volumes"])
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith((".", "/", "~")):  # not a bind mount
                assert source in declared, f"{name}: volume {source} not declared"
    assert {"postgres-data", "redis-data"} <= declared


def test_compose_dependencies() -> None:
    services = compose_services()
    assert services["migrate"]["command"] == ["evalplan", "db", "upgrade"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ["api", "worker"]:
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_compose_evalplan_services_use_the_two_images_and_point_at_compose_services() -> None:
    services = compose_services()
    for name, image, target in [("api", API_IMAGE, "api"), ("migrate", API_IMAGE, "api"),
                                ("worker", WORKER_IMAGE, "worker")]:
        service = services[name]
        assert service["image"] == f"{image}:latest", name
        assert service["build"]["context"] == ".", name
        assert service["build"].get("dockerfile", "Dockerfile") == "Dockerfile", name
        assert service["build"]["target"] == target, name
        env = service["environment"]
        assert isinstance(env, dict), f"{name}: use the mapping form of environment"
        assert "@postgres:5432/" in env["EVALPLAN_DATABASE_URL"], name
        assert env["EVALPLAN_DATABASE_URL"].startswith("postgresql+psycopg://"), name
        assert env["EVALPLAN_REDIS_URL"].startswith("redis://redis:6379/"), name
        assert env["EVALPLAN_AUTH"] == "required", f"{name}: production needs tokens (docs/SECURITY.md)"


def test_compose_api_publishes_8000() -> None:
    api = compose_services()["api"]
    container_ports = [str(p).split(":")[-1].split("/")[0] for p in api["ports"]]
    assert container_ports == [str(API_PORT)]


# --------------------------------------------------------------------------- settings


def all_evalplan_env_names() -> dict[str, set[str]]:
    files = [DOCKERFILE, COMPOSE_FILE, *sorted(DEPLOY.glob("*.yaml")), DEPLOY / "README.md"]
    return {path.name: set(re.findall(r"EVALPLAN_[A-Z0-9_]+", path.read_text())) for path in files}


def test_every_evalplan_env_name_is_a_settings_field() -> None:
    names_by_file = all_evalplan_env_names()
    assert names_by_file["docker-compose.yml"], "compose sets no EVALPLAN_ variables"
    assert names_by_file["configmap.yaml"], "the ConfigMap sets no EVALPLAN_ variables"
    for filename, names in names_by_file.items():
        unknown = names - SETTINGS_ENV_NAMES
        assert not unknown, f"{filename}: not fields of evalplan.kit.settings.Settings: {sorted(unknown)}"


def test_k8s_env_sources_hold_only_settings_and_strings() -> None:
    config = manifest("ConfigMap", "evalplan-config")["data"]
    secret = manifest("Secret", "evalplan-secrets")
    assert "data" not in secret, "keep placeholders in stringData"
    secret_data = secret["stringData"]
    assert set(secret_data) == {"EVALPLAN_DATABASE_URL", "EVALPLAN_REDIS_URL", "EVALPLAN_ADMIN_TOKEN",
                                "EVALPLAN_METRICS_TOKEN"}
    assert config["EVALPLAN_AUTH"] == "required", "production needs tokens (docs/SECURITY.md)"
    assert not (set(config) & set(secret_data)), "a setting is in both the ConfigMap and the Secret"
    for key, value in {**config, **secret_data}.items():
        assert isinstance(value, str), f"{key}: ConfigMap/Secret values must be YAML strings"
    for where, container in k8s_containers():
        for env in container.get("env", []):
            assert isinstance(env.get("value", ""), str), f"{where}: {env['name']} must be a string"


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in SETTINGS_ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    return Settings()


def test_env_values_validate_as_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The values themselves load: integers parse, URLs select the intended mode."""
    config = manifest("ConfigMap", "evalplan-config")["data"]
    secret = manifest("Secret", "evalplan-secrets")["stringData"]
    k8s = settings_from({**config, **secret}, monkeypatch)
    assert not k8s.is_sqlite and k8s.uses_celery

    for name in ["api", "worker", "migrate"]:
        env = compose_services()[name]["environment"]
        compose_settings = settings_from(env, monkeypatch)
        assert not compose_settings.is_sqlite and compose_settings.uses_celery, name

    image_settings = settings_from(dockerfile_env(), monkeypatch)
    assert image_settings.is_sqlite and not image_settings.uses_celery  # embedded mode by default


# --------------------------------------------------------------------------- CLI


def test_evalplan_commands_are_accepted_by_the_cli() -> None:
    from evalplan.cli import build_parser

    lines = evalplan_command_lines()
    subcommands = set()
    for where, argv in lines:
        try:
            build_parser().parse_args(argv[1:])
        except SystemExit as exc:  # argparse exits on an unknown command or option
            pytest.fail(f"{where}: `{' '.join(argv)}` rejected by evalplan.cli (exit {exc.code})")
        subcommands.add(tuple(argv[1:3]) if argv[1] == "db" else (argv[1],))
    assert {("serve",), ("worker",), ("db", "upgrade")} <= subcommands


def test_every_evalplan_image_runs_an_evalplan_command() -> None:
    """No container of the evalplan image silently runs something else."""
    for name, service in compose_services().items():
        if image_repository(service.get("image", "")) in IMAGE_REPOSITORIES:
            argv = compose_argv(service) or dockerfile_cmd(service["build"]["target"])
            assert argv[0] == "evalplan", name
    for where, container in k8s_containers():
        repository = image_repository(container["image"])
        assert repository in IMAGE_REPOSITORIES, where
        argv = container_argv(container) or dockerfile_cmd("api" if repository == API_IMAGE else "worker")
        assert argv[0] == "evalplan", where
        # workers need torch (embeddings, RepCore): only the worker image has it
        assert (repository == WORKER_IMAGE) == (argv[1] == "worker"), where


def test_worker_queues_are_known() -> None:
    workers = [(where, argv) for where, argv in evalplan_command_lines() if argv[1] == "worker"]
    assert len(workers) == 4  # the worker image's CMD, compose worker, k8s cpu worker, k8s gpu worker
    for where, argv in workers:
        queues = queues_of(argv)
        assert queues and queues <= QUEUES, f"{where}: unknown queues {queues - QUEUES}"
    assert queues_of(compose_argv(compose_services()["worker"])) == {"cpu", "gpu"}
    cpu = pod_spec(manifest("Deployment", "evalplan-worker-cpu"))["containers"][0]
    gpu = pod_spec(manifest("Deployment", "evalplan-worker-gpu"))["containers"][0]
    assert queues_of(container_argv(cpu)) == {"cpu"}
    assert queues_of(container_argv(gpu)) == {"gpu"}


# --------------------------------------------------------------------------- Kubernetes


def test_gpu_worker_requests_a_gpu_and_cpu_worker_does_not() -> None:
    gpu = pod_spec(manifest("Deployment", "evalplan-worker-gpu"))["containers"][0]
    assert str(gpu["resources"]["limits"]["nvidia.com/gpu"]) == "1"
    requests = gpu["resources"].get("requests", {})
    if "nvidia.com/gpu" in requests:  # extended resources: requests must equal limits
        assert requests["nvidia.com/gpu"] == gpu["resources"]["limits"]["nvidia.com/gpu"]
    assert gpu["image"] == "evalplan-worker:cuda"
    for where, container in k8s_containers():
        if "evalplan-worker-gpu" not in where:
            resources = container.get("resources", {})
            assert "nvidia.com/gpu" not in resources.get("limits", {}), where


def test_images_agree_between_compose_and_kubernetes() -> None:
    compose_images = {
        s["image"] for s in compose_services().values() if image_repository(s["image"]) in IMAGE_REPOSITORIES
    }
    assert compose_images == {"evalplan-api:latest", "evalplan-worker:latest"}
    k8s_images = {container["image"] for _, container in k8s_containers()}
    assert k8s_images == {"evalplan-api:latest", "evalplan-worker:latest", "evalplan-worker:cuda"}


def test_port_8000_everywhere() -> None:
    api = manifest("Deployment", "evalplan-api")
    (container,) = pod_spec(api)["containers"]
    argv = container_argv(container)
    assert argv[argv.index("--port") + 1] == str(API_PORT)
    assert [p["containerPort"] for p in container["ports"]] == [API_PORT]
    for probe in ["readinessProbe", "livenessProbe"]:
        assert container[probe]["httpGet"] == {"path": "/health", "port": API_PORT}, probe
    if "startupProbe" in container:
        assert container["startupProbe"]["httpGet"] == {"path": "/health", "port": API_PORT}

    service = manifest("Service", "evalplan-api")
    (port,) = service["spec"]["ports"]
    assert port["port"] == 80
    assert port["targetPort"] == API_PORT

    compose_api = compose_services()["api"]
    argv = compose_argv(compose_api)
    assert argv[argv.index("--port") + 1] == str(API_PORT)


def test_api_deployment() -> None:
    api = manifest("Deployment", "evalplan-api")
    assert api["spec"]["replicas"] == 2
    (container,) = pod_spec(api)["containers"]
    assert container["command"] == ["evalplan", "serve", "--host", "0.0.0.0", "--port", "8000"]
    assert container["image"] == "evalplan-api:latest"
    assert container["resources"]["requests"] and container["resources"]["limits"]


def test_workloads_read_config_and_secret_and_run_non_root() -> None:
    for doc in workload_manifests():
        spec = pod_spec(doc)
        assert spec["securityContext"]["runAsNonRoot"] is True, doc["metadata"]["name"]
        for container in spec["containers"]:
            sources = container["envFrom"]
            assert {"configMapRef": {"name": "evalplan-config"}} in sources, doc["metadata"]["name"]
            assert {"secretRef": {"name": "evalplan-secrets"}} in sources, doc["metadata"]["name"]
            assert "resources" in container, doc["metadata"]["name"]


def test_selectors_match_pod_labels() -> None:
    for doc in manifests():
        if doc["kind"] == "Deployment":
            selector = doc["spec"]["selector"]["matchLabels"]
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= labels.items(), doc["metadata"]["name"]
    service_selector = manifest("Service", "evalplan-api")["spec"]["selector"]
    api_labels = manifest("Deployment", "evalplan-api")["spec"]["template"]["metadata"]["labels"]
    assert service_selector.items() <= api_labels.items()
    for name in ["evalplan-worker-cpu", "evalplan-worker-gpu"]:
        worker_labels = manifest("Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert not service_selector.items() <= worker_labels.items(), f"the API Service would select {name}"


def test_migration_job() -> None:
    job = manifest("Job", "evalplan-migrate")
    assert isinstance(job["spec"]["backoffLimit"], int)
    spec = pod_spec(job)
    assert spec["restartPolicy"] == "Never"
    (container,) = spec["containers"]
    assert container["command"] == ["evalplan", "db", "upgrade"]
    assert container["image"] == "evalplan-api:latest"
