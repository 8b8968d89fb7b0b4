"""deploy/ keeps what docs/guides/scaling.md promises: every Kubernetes manifest validates
against the Kubernetes schemas (kubernetes-validate, pinned in the dev extra, offline and
strict: an unknown field fails), and the files agree with the project (one worker per
capability on its queue, the settings' real names, secrets from Secrets, KEDA scaling on
the metrics `/metrics` publishes). KEDA's own schemas are checked in
tests/integration/test_deploy_schemas.py (a node process)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from workers.core.capabilities import CAPABILITIES, Lane
from workers.core.settings import Settings
from workers.doors.api.queue_metrics import FAMILIES

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
KEDA = ROOT / "deploy" / "keda"
# The oldest and the newest Kubernetes the manifests are checked against.
VERSIONS = ("1.30", "1.37")
GRACE_SECONDS = 30  # the worker's shutdown grace fits in Kubernetes' default


def documents(folder: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    only: dict[str, Any]
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


@pytest.mark.parametrize("version", VERSIONS)
def test_every_kubernetes_manifest_validates_strictly(version: str) -> None:
    docs = documents(KUBERNETES)
    assert {d["kind"] for d in docs} == {"Namespace", "ConfigMap", "Deployment", "Service"}
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_a_wrong_field_or_type_fails_validation() -> None:
    deployment = of_kind(documents(KUBERNETES), "Deployment")["mcp-media-worker-stt"]
    misspelt = copy.deepcopy(deployment)
    misspelt["spec"]["template"]["spec"]["terminationGracePeriod"] = GRACE_SECONDS
    with pytest.raises(kubernetes_validate.ValidationError, match="terminationGracePeriod"):
        kubernetes_validate.validate(misspelt, VERSIONS[-1], strict=True)
    mistyped = copy.deepcopy(deployment)
    mistyped["spec"]["replicas"] = "zero"
    with pytest.raises(kubernetes_validate.ValidationError, match="zero"):
        kubernetes_validate.validate(mistyped, VERSIONS[-1], strict=True)


def test_each_kustomization_lists_every_file_of_its_folder() -> None:
    for folder in (KUBERNETES, KEDA):
        kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
        files = {p.name for p in folder.glob("*.yaml")} - {"kustomization.yaml"}
        assert sorted(kustomization["resources"]) == sorted(files), folder


def test_one_worker_deployment_per_capability_on_its_queue() -> None:
    deployments = of_kind(documents(KUBERNETES), "Deployment")
    grace = worker_grace()
    for spec in CAPABILITIES.values():
        deployment = deployments[f"mcp-media-worker-{spec.queue}"]
        pod = deployment["spec"]["template"]["spec"]
        assert container(deployment)["args"] == ["worker", "--queues", spec.queue]
        assert pod["terminationGracePeriodSeconds"] == GRACE_SECONDS
        # The worker hands back what still runs before Kubernetes kills it.
        assert 0 <= grace < GRACE_SECONDS
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert deployment["spec"]["replicas"] == 0, "KEDA owns the replica count"
    assert set(deployments) == {f"mcp-media-worker-{s.queue}" for s in CAPABILITIES.values()} | {
        "mcp-media-serve"
    }


def test_settings_are_real_names_and_secrets_come_from_secrets() -> None:
    docs = documents(KUBERNETES)
    (config,) = of_kind(docs, "ConfigMap").values()
    names = set(config["data"])
    for deployment in of_kind(docs, "Deployment").values():
        env = container(deployment)["env"]
        names |= {e["name"] for e in env}
        for entry in env:
            if re.search(r"KEY|URL|PASSWORD", entry["name"]) and "STORE__URL" not in entry["name"]:
                assert "secretKeyRef" in entry["valueFrom"], entry
    for name in names:
        assert setting_exists(name), name


def worker_grace() -> float:
    """The workers' shutdown grace as the ConfigMap sets it (else the setting's default)."""
    (config,) = of_kind(documents(KUBERNETES), "ConfigMap").values()
    given = config["data"].get("MCP_MEDIA_JOBS__SHUTDOWN_GRACE")
    return float(given) if given is not None else Settings().jobs.shutdown_grace


def setting_exists(name: str) -> bool:
    """Does `MCP_MEDIA_A__B` name a field `a.b` of Settings?"""
    model: Any = Settings
    for part in name.removeprefix("MCP_MEDIA_").lower().split("__"):
        field = model.model_fields.get(part)
        if field is None:
            return False
        model = field.annotation
    return True


def test_serve_is_probed_on_its_open_health_route_and_exposed() -> None:
    docs = documents(KUBERNETES)
    serve = of_kind(docs, "Deployment")["mcp-media-serve"]
    (probe_port,) = {p["name"] for p in container(serve)["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        assert container(serve)[probe]["httpGet"] == {"path": "/healthz", "port": probe_port}
    assert "--host" in container(serve)["args"]
    assert any(e["name"] == "MCP_MEDIA_API__KEY" for e in container(serve)["env"])
    (service,) = of_kind(docs, "Service").values()
    assert service["spec"]["selector"] == serve["spec"]["selector"]["matchLabels"]


def test_each_capability_scales_from_zero_on_the_signals_metrics_publishes() -> None:
    docs = documents(KEDA)
    objects = of_kind(docs, "ScaledObject")
    auths = of_kind(docs, "TriggerAuthentication")
    published = {f"mcp_media_queue_{name}" for name, _doc in FAMILIES}
    for spec in CAPABILITIES.values():
        scaled = objects[f"mcp-media-worker-{spec.queue}"]["spec"]
        assert scaled["scaleTargetRef"]["name"] == f"mcp-media-worker-{spec.queue}"
        assert scaled["minReplicaCount"] == 0
        triggers = {t["name"]: t for t in scaled["triggers"]}
        redis = triggers["live-list"]
        assert redis["type"] == "redis" and redis["authenticationRef"]["name"] in auths
        assert redis["metadata"]["listName"] == spec.lane_queue(Lane.LIVE)
        assert "password" not in redis["metadata"]
        assert int(redis["metadata"]["activationListLength"]) >= 0
        for name in ("backlog", "live-age"):
            meta = triggers[name]["metadata"]
            assert triggers[name]["type"] == "prometheus"
            used = set(re.findall(r"mcp_media_\w+", meta["query"]))
            assert used and used <= published, used - published
            assert f'capability="{spec.capability.value}"' in meta["query"]
            assert float(meta["activationThreshold"]) >= 0


def test_a_misnamed_setting_is_caught() -> None:
    assert setting_exists("MCP_MEDIA_STORE__SECRET_ACCESS_KEY")
    assert not setting_exists("MCP_MEDIA_STORE__SECRET_KEY")
    assert not setting_exists("MCP_MEDIA_STT_CONCURRENCY")
