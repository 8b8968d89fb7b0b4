"""The deployment files keep what docs/guides/scaling.md promises.

docker-compose.yml, the Dockerfile and .dockerignore are parsed (no Docker engine needed) and
checked against the project's own Settings and capability time limits, so a change to a job
limit or a queue shows up here, not in production. (deploy/ is checked by test_deploy.py.)
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from workers.core.capabilities import QUEUES, for_queue
from workers.core.settings import Settings
from workers.doors.listen import ListenError, resolve_secret
from workers.provisioning.models import PIPER_JOE, SILERO_VAD, WHISPER_TINY_EN

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
WORKERS = {
    "worker-vision": "vision",
    "worker-stt": "stt",
    "worker-tts": "tts",
    "worker-documents": "documents",
}
THREAD_VARS = {
    "vision": ("MCP_MEDIA_VISION__CONCURRENCY",),
    "stt": ("MCP_MEDIA_STT__CONCURRENCY", "MCP_MEDIA_STT__THREADS"),
    "tts": ("MCP_MEDIA_TTS__CONCURRENCY", "MCP_MEDIA_TTS__THREADS"),
    "documents": ("MCP_MEDIA_DOCUMENTS__CONCURRENCY",),
}
LOOPBACK = "127.0.0.1"
S3_SERVICES = ("seaweedfs", "seaweedfs-bucket")
STORE_VARS = (
    "MCP_MEDIA_STORE__URL",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
)

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}; `$$` is a literal $.
_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class MissingVariable(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    op: str  # "", ":-", "-", ":?", "?"
    arg: str


def references(value: str) -> list[Reference]:
    return [
        Reference(m["name"], m["op"] or "", m["arg"] or "")
        for m in _VARIABLE.finditer(value)
        if m["name"]
    ]


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's substitution rules, enough for the forms these files use."""

    def one(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        name, op, arg = match["name"], match["op"] or "", match["arg"] or ""
        current = env.get(name)
        if op in (":-", ":?") and not current:
            current = None
        if current is not None:
            return current
        if op.endswith("?"):
            raise MissingVariable(f"{name}: {arg}")
        return arg if op.endswith("-") else ""

    return _VARIABLE.sub(one, value)


def seconds(duration: str) -> float:
    parts = _DURATION.findall(duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"bad duration {duration!r}"
    return sum(float(n) * _UNITS[u] for n, u in parts)


def strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield str(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def as_argv(command: object) -> list[str]:
    if isinstance(command, str):
        return shlex.split(command)
    assert isinstance(command, list), f"command must be a string or a list, not {command!r}"
    return [str(part) for part in command]


def environment(service: Mapping[str, Any]) -> dict[str, str | None]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) if "=" in item else (item, None) for item in env)
        return {key: value for key, value in pairs}
    return {str(k): None if v is None else str(v) for k, v in env.items()}


def flag_value(argv: list[str], flag: str) -> str:
    values = [argv[i + 1] for i, part in enumerate(argv[:-1]) if part == flag]
    values += [part.split("=", 1)[1] for part in argv if part.startswith(flag + "=")]
    assert len(values) == 1, f"expected one {flag} in {argv}, found {values}"
    return values[0]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def test_services_are_redis_one_worker_per_queue_flower_the_api_and_s3(
    services: dict[str, dict[str, Any]],
) -> None:
    assert set(services) == {"redis", "flower", "api", *WORKERS, *S3_SERVICES}
    assert sorted(WORKERS.values()) == sorted(QUEUES)


def test_the_api_serves_on_loopback_with_a_key_from_the_environment(
    services: dict[str, dict[str, Any]],
) -> None:
    api = services["api"]
    argv = as_argv(api["command"])
    assert argv[0] == "serve" and flag_value(argv, "--host") == "0.0.0.0"
    assert api["profiles"] == ["api"]  # plain `docker compose up` needs no key
    (published,) = api["ports"]
    assert interpolate(str(published), {}).startswith("127.0.0.1:")
    # Passed through from the shell, never interpolated: a compose that does not expand
    # `${...}` cannot hand the container a literal, and `:?` would make plain `up` ask for it.
    env = environment(api)
    assert "MCP_MEDIA_API__KEY" in env and env["MCP_MEDIA_API__KEY"] is None
    assert not any("${MCP_MEDIA_API__KEY" in text for text in strings(services))
    assert api["depends_on"]["redis"]["condition"] == "service_healthy"
    assert "/healthz" in " ".join(api["healthcheck"]["test"])


def test_workers_share_one_anchored_config(services: dict[str, dict[str, Any]]) -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    assert re.search(r"^x-[\w-]+: &worker\b", text, re.MULTILINE), "no &worker anchor"
    assert text.count("<<: *worker\n") == len(WORKERS)
    shared = ("image", "build", "depends_on", "volumes", "init", "restart", "stop_signal")
    first = services["worker-vision"]
    for name in WORKERS:
        for key in shared:
            assert services[name].get(key) == first.get(key), f"{name}.{key} differs"


def test_no_service_has_a_container_name(services: dict[str, dict[str, Any]]) -> None:
    # `docker compose up --scale worker-stt=4` fails on a fixed container name.
    for name, service in services.items():
        assert "container_name" not in service, name


def test_workers_and_redis_publish_no_ports(services: dict[str, dict[str, Any]]) -> None:
    for name in ("redis", *WORKERS):
        service = services[name]
        assert "ports" not in service, f"{name} must not be published on the host"
        assert service.get("network_mode") != "host", name
        assert "hostname" not in service, f"{name}: replicas need distinct hostnames"


def test_redis_persists_and_never_evicts(services: dict[str, dict[str, Any]]) -> None:
    redis = services["redis"]
    argv = as_argv(redis["command"])
    assert argv[0] == "redis-server"
    assert flag_value(argv, "--appendonly") == "yes"
    assert flag_value(argv, "--appendfsync") == "everysec"
    assert flag_value(argv, "--maxmemory-policy") == "noeviction"
    assert interpolate(str(redis["image"]), {}).startswith("redis:"), "official redis image"
    volumes = [str(v).split(":") for v in redis["volumes"]]
    assert any(v[1] == "/data" and not v[0].startswith((".", "/")) for v in volumes)


def test_redis_password_comes_from_the_environment(services: dict[str, dict[str, Any]]) -> None:
    argv = as_argv(services["redis"]["command"])
    password = flag_value(argv, "--requirepass")
    (ref,) = references(password)
    assert ref.name == "REDIS_PASSWORD" and ref.op == ":?"
    assert password == password.strip() and password.startswith("${") and password.endswith("}")
    with pytest.raises(MissingVariable):
        interpolate(password, {})
    assert interpolate(password, {"REDIS_PASSWORD": "s3cret"}) == "s3cret"


def test_no_password_is_hard_coded(compose: dict[str, Any]) -> None:
    for text in strings(compose):
        for match in re.finditer(r"redis://(?P<user>[^:/@]*):(?P<password>[^@]*)@", text):
            refs = references(match["password"])
            assert [r.name for r in refs] == ["REDIS_PASSWORD"], text
            assert _VARIABLE.fullmatch(match["password"]), (
                f"password is not only a variable: {text}"
            )
        assert not re.search(r"requirepass\s+[^$\s]", text), text
    for service in compose["services"].values():
        for key, value in environment(service).items():
            if re.search(r"PASSWORD|AUTH|API_KEY|SECRET", key) and value is not None:
                assert references(value), f"{key} is hard-coded"


def test_redis_healthcheck_authenticates_with_redis_cli(
    services: dict[str, dict[str, Any]],
) -> None:
    redis = services["redis"]
    check = redis["healthcheck"]
    test = check["test"]
    command = test if isinstance(test, str) else " ".join(test[1:])
    assert "redis-cli" in command and "ping" in command.lower()
    env = environment(redis)
    auth_from_env = env.get("REDISCLI_AUTH") is not None and [
        r.name for r in references(env["REDISCLI_AUTH"] or "")
    ] == ["REDIS_PASSWORD"]
    auth_on_cli = bool(re.search(r"(-a|--pass|--askpass)\b", command))
    assert auth_from_env or auth_on_cli, "the healthcheck must authenticate"
    assert "PONG" in command, "a NOAUTH error must not count as healthy"


def test_workers_wait_for_a_healthy_redis(services: dict[str, dict[str, Any]]) -> None:
    for name in (*WORKERS, "flower"):
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy", name


def test_each_worker_serves_its_queue_and_only_it(services: dict[str, dict[str, Any]]) -> None:
    for name, queue in WORKERS.items():
        service = services[name]
        assert "entrypoint" not in service, f"{name} must keep the image's mcp-media entry point"
        argv = as_argv(service["command"])
        assert argv[0] == "worker", argv
        assert flag_value(argv, "--queues").split(",") == [queue]
        assert all(q not in argv for q in QUEUES if q != queue), argv


def test_worker_concurrency_and_threads_come_from_the_environment(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, queue in WORKERS.items():
        env = environment(services[name])
        argv = as_argv(services[name]["command"])
        assert "--concurrency" not in argv, "a fixed --concurrency would override the variable"
        for var in THREAD_VARS[queue]:
            value = env.get(var)
            assert value is not None, f"{name} does not set {var}"
            (ref,) = references(value)
            assert ref.name == var and _VARIABLE.fullmatch(value), f"{name}: {var}={value}"
            assert int(interpolate(value, {})) >= 1
            assert interpolate(value, {var: "3"}) == "3"


def test_workers_share_one_named_volume_at_mcp_media_home(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    mounts: set[tuple[str, str]] = set()
    for name in WORKERS:
        service = services[name]
        home = environment(service).get("MCP_MEDIA_HOME")
        assert home and home.startswith("/") and not references(home), f"{name}: {home}"
        for volume in service["volumes"]:
            if isinstance(volume, str):
                source, target, *mode = volume.split(":")
                read_only = "ro" in mode
            else:
                source, target = volume["source"], volume["target"]
                read_only = bool(volume.get("read_only"))
            if target == home:
                assert source in compose["volumes"], f"{name}: {source} is not a named volume"
                assert not read_only, name
                mounts.add((source, target))
    assert len(mounts) == 1, f"every worker must mount the same volume at one home: {mounts}"


def _settings_for(service: Mapping[str, Any], tmp_path: Path) -> Settings:
    """The Settings a worker of this service gets when only the required variables are set."""
    shell = {"REDIS_PASSWORD": "x"}
    env = {
        key: interpolate(value, shell)
        for key, value in environment(service).items()
        if value is not None
    }
    env["MCP_MEDIA_HOME"] = str(tmp_path)  # the settings must not touch the real home
    return Settings.from_env(env)


def test_stop_grace_period_outlasts_the_longest_job(
    services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, queue in WORKERS.items():
        service = services[name]
        assert service.get("stop_signal", "SIGTERM") == "SIGTERM", "SIGTERM = warm shutdown"
        settings = _settings_for(service, tmp_path)
        _soft, hard = for_queue(queue).time_limits(settings, settings.max_blob_bytes)
        grace = seconds(str(service["stop_grace_period"]))
        assert grace > hard, f"{name}: stop_grace_period {grace:.0f} s <= hard limit {hard:.0f} s"


def test_flower_is_opt_in_authenticated_and_on_loopback(
    services: dict[str, dict[str, Any]],
) -> None:
    flower = services["flower"]
    assert flower.get("profiles") == ["flower"]
    for name, service in services.items():
        if name not in ("flower", "api", *S3_SERVICES):  # the api needs a key: opt-in too
            assert "profiles" not in service, f"{name} must start with a plain `up`"
    assert flower["ports"], "flower publishes its UI"
    for port in flower["ports"]:
        if isinstance(port, str):
            resolved = interpolate(port, {})
            assert resolved.startswith(LOOPBACK + ":"), port
            assert resolved.count(":") == 2, f"want address:host port (or empty):container: {port}"
        else:
            assert port.get("host_ip") == LOOPBACK, port
    auth = environment(flower).get("FLOWER_BASIC_AUTH")
    assert auth is not None and [r.name for r in references(auth)] == ["FLOWER_BASIC_AUTH"]
    # Compose interpolates every profile, so `:?` would break a plain `up`: the command checks.
    guard = " ".join(as_argv(flower["command"]))
    assert re.search(r"test -n \"\$\$\{?FLOWER_BASIC_AUTH\}?\"\s*\|\|.*exit 1", guard), guard


def test_the_api_refuses_what_a_compose_may_hand_it_as_a_key(tmp_path: Path) -> None:
    for given in ("${MCP_MEDIA_API__KEY:-}", "${MCP_MEDIA_API__KEY}", "short-key"):
        with pytest.raises(ListenError):
            resolve_secret(tmp_path, given, "0.0.0.0", file="k", how="MCP_MEDIA_API__KEY")
    with pytest.raises(ListenError, match="without a key"):
        resolve_secret(tmp_path, "", "0.0.0.0", file="k", how="MCP_MEDIA_API__KEY")


def test_workers_and_the_api_pass_the_s3_store_through(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    shell = {
        "REDIS_PASSWORD": "x",
        "MCP_MEDIA_STORE__URL": "s3://media/mcp-media",
        "AWS_ENDPOINT_URL": "http://seaweedfs:8333",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_REGION": "us-east-1",
    }
    for name in (*WORKERS, "api"):
        env = environment(services[name])
        for var in STORE_VARS:
            assert var in env and env[var] is None, f"{name}: {var} must be passed through"
        # What the container sees: its own values, plus the pass-through ones from the shell.
        seen = {k: interpolate(v, shell) for k, v in env.items() if v is not None}
        seen |= {k: shell[k] for k, v in env.items() if v is None and k in shell}
        seen["MCP_MEDIA_HOME"] = str(tmp_path)
        store = Settings.from_env(seen).store
        assert (
            store.url == "s3://media/mcp-media" and store.endpoint_url == shell["AWS_ENDPOINT_URL"]
        )
        assert (
            store.access_key_id == "id" and store.secret_access_key.get_secret_value() == "secret"
        )
        assert _settings_for(services[name], tmp_path).store.url is None, "unset: the volume"


def test_the_s3_profile_runs_seaweedfs_unpublished_with_checked_credentials(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    for name in S3_SERVICES:
        service = services[name]
        assert service["profiles"] == ["s3"], name
        assert "ports" not in service and service.get("network_mode") != "host", name
        (ref,) = references(str(service["image"]))
        assert ref.name == "SEAWEEDFS_IMAGE" and ref.op == ":-" and ref.arg, name
    server = services["seaweedfs"]
    env = environment(server)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert [r.name for r in references(env[var] or "")] == [var], var
    script = " ".join(as_argv(server["command"]))
    assert server["entrypoint"] == ["sh", "-c"]
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert f'test -n "$${{{var}}}"' in script, f"the command must refuse an empty {var}"
    assert re.search(r"\|\|\s*\{[^}]*exit 1", script), script
    weed = shlex.split(script[script.index("exec weed server") :])
    assert {"-filer", "-s3", "-ip.bind=0.0.0.0"} <= set(weed), weed
    assert "-ip=seaweedfs" in weed, "the volume server is advertised under the service name"
    assert not any(a.startswith("-s3.port=") for a in weed), "8333, as AWS_ENDPOINT_URL says"
    assert "http://seaweedfs:8333" in COMPOSE.read_text(encoding="utf-8")
    data = [str(v).split(":") for v in server["volumes"]]
    assert ["seaweedfs-data", "/data"] in data and "seaweedfs-data" in compose["volumes"]
    assert "-dir=/data" in weed
    grace = seconds(str(server["stop_grace_period"]))
    assert grace >= 10, "let the filer and volume server flush"


def test_the_bucket_is_made_once_from_the_store_url(services: dict[str, dict[str, Any]]) -> None:
    bucket = services["seaweedfs-bucket"]
    assert environment(bucket) == {"MCP_MEDIA_STORE__URL": None}
    assert bucket["restart"] == "on-failure", "a one-shot: done once it succeeded"
    assert bucket["depends_on"]["seaweedfs"]["condition"] == "service_started"
    script = " ".join(as_argv(bucket["command"]))
    assert "$${MCP_MEDIA_STORE__URL#s3://}" in script and "$${b%%/*}" in script
    assert "s3.bucket.create -name $$b" in script and "weed shell -master=seaweedfs:9333" in script
    assert '*"already exists"*' in script, "a second `up` must not fail on the bucket"


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str
    value: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction]

    def values(self, keyword: str) -> list[str]:
        return [i.value for i in self.instructions if i.keyword == keyword]


def dockerfile_stages() -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) with continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "dangling line continuation"
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, value = line.partition(" ")
        keyword, value = keyword.upper(), value.strip()
        if keyword == "FROM":
            parts = value.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m[1], m[0]), parts[0])
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(image, name, []))
        elif not stages:
            assert keyword == "ARG", f"only ARG may come before FROM, not {keyword}"
            key, _, default = value.partition("=")
            args[key] = default
        else:
            stages[-1].instructions.append(Instruction(keyword, value))
    return args, stages


def test_dockerfile_is_multi_stage_with_a_models_stage() -> None:
    _args, stages = dockerfile_stages()
    assert len(stages) >= 2
    assert stages[0].base.startswith("python:3.11-") and "slim" in stages[0].base
    prepares = [s for s in stages if any("models prepare" in r for r in s.values("RUN"))]
    assert len(prepares) == 1 and prepares[0].name, "one named stage runs `models prepare`"
    models = prepares[0]
    assert any(re.search(r"\bmcp-media models prepare\b", r) for r in models.values("RUN"))
    runtime = stages[-1]
    assert runtime is not models, "the runtime stage must not carry the converter venv"
    copies = runtime.values("COPY")
    assert any(c.startswith(f"--from={models.name} ") for c in copies), copies


def test_dockerfile_lets_the_converter_use_a_cpu_torch_index() -> None:
    _args, stages = dockerfile_stages()
    (models,) = [s for s in stages if any("models prepare" in r for r in s.values("RUN"))]
    arg_defaults = {a.partition("=")[0]: a.partition("=")[2] for a in models.values("ARG")}
    assert "TORCH_INDEX_URL" in arg_defaults
    (run,) = [r for r in models.values("RUN") if "models prepare" in r]
    assert re.search(r"PIP_EXTRA_INDEX_URL=\"?\$\{?TORCH_INDEX_URL", run), run


def test_dockerfile_installs_every_runtime_extra() -> None:
    _args, stages = dockerfile_stages()
    installs = [r for s in stages for r in s.values("RUN") if "pip install" in r]
    extras = ".[jobs,vision,speech,api,phonemes,s3,wyoming,documents]"
    assert any(extras in r for r in installs), installs


def test_dockerfile_runs_mcp_media_as_a_non_root_user() -> None:
    _args, stages = dockerfile_stages()
    runtime = stages[-1]
    users = runtime.values("USER")
    assert users, "the runtime stage must set USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users
    assert json.loads(runtime.values("ENTRYPOINT")[-1]) == ["mcp-media"]
    cmd = json.loads(runtime.values("CMD")[-1])
    assert cmd[0] == "worker" and flag_value(cmd, "--queues") in QUEUES
    assert runtime.values("STOPSIGNAL") in ([], ["SIGTERM"])


def test_image_models_are_where_the_settings_look(services: dict[str, dict[str, Any]]) -> None:
    _args, stages = dockerfile_stages()
    runtime = stages[-1]
    env: dict[str, str] = {}
    for value in runtime.values("ENV"):
        for item in shlex.split(value):
            key, _, val = item.partition("=")
            env[key] = val
    home = env["MCP_MEDIA_HOME"]
    for name in WORKERS:
        assert environment(services[name])["MCP_MEDIA_HOME"] == home, name
    models_dir = Path(env["MCP_MEDIA_STT__MODEL_DIR"]).parent
    assert env["MCP_MEDIA_STT__MODEL_DIR"] == str(models_dir / WHISPER_TINY_EN.name)
    assert env["MCP_MEDIA_TTS__MODEL_DIR"] == str(models_dir / PIPER_JOE.name)
    assert any(c.rstrip("/").endswith(f" {models_dir}") for c in runtime.values("COPY"))
    # The VAD has no setting: it is found as <home>/models/silero-vad only.
    assert any(f"ln -s {models_dir} {home}/models" in r for r in runtime.values("RUN")), (
        f"{home}/models must lead to {models_dir} ({SILERO_VAD.name})"
    )


def _ignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pat) or fnmatch.fnmatch(path, pat + "/*"):
            ignored = not negate
    return ignored


def test_dockerignore_sends_sources_only() -> None:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for path in (
        "pyproject.toml",
        "README.md",
        "workers/cli/main.py",
        "workers/provisioning/whisper_export.py",
    ):
        assert not _ignored(path, patterns), path
    assert not _ignored("pipelines/speech/stt.py", patterns)
    for path in (".venv/bin/python", ".home/cache/x", ".git/HEAD", "tests/unit/test_cache.py"):
        assert _ignored(path, patterns), path
    assert _ignored("workers/cli/__pycache__/main.cpython-311.pyc", patterns)
