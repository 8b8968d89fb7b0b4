"""deploy/keda validates against KEDA's ScaledObject and TriggerAuthentication schemas, offline:
@kubernetes-models/keda (pinned in tests/support/schemas, installed by `make schemas`)
carries validators generated from KEDA's own types; node runs them
(tests/support/schemas/validate.mjs). A broken document fails."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from workers.core.capabilities import QUEUES

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "tests" / "support" / "schemas"
KEDA = ROOT / "deploy" / "keda"


def keda_documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(KEDA.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return docs


def validate(docs: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    assert (SCHEMAS / "node_modules" / "@kubernetes-models" / "keda").is_dir(), "make schemas"
    proc = subprocess.run(
        ["node", "validate.mjs"],
        input=json.dumps(docs),
        capture_output=True,
        text=True,
        cwd=SCHEMAS,
        timeout=120,
        check=False,
    )
    assert not proc.stderr, proc.stderr
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


def test_every_keda_document_validates() -> None:
    docs = keda_documents()
    code, results = validate(docs)
    assert code == 0, results
    # one ScaledObject per queue a worker Deployment serves, one shared authentication
    assert sorted(r["kind"] for r in results) == ["ScaledObject"] * len(QUEUES) + [
        "TriggerAuthentication"
    ]
    assert all(r["errors"] == [] for r in results)


def test_a_broken_scaled_object_fails() -> None:
    scaled = next(d for d in keda_documents() if d["kind"] == "ScaledObject")
    numeric = copy.deepcopy(scaled)  # KEDA's trigger metadata is strings only
    redis = next(t for t in numeric["spec"]["triggers"] if t["type"] == "redis")
    redis["metadata"]["listLength"] = 5
    untargeted = copy.deepcopy(scaled)
    del untargeted["spec"]["scaleTargetRef"]
    unknown = {**copy.deepcopy(scaled), "kind": "ScaledThing"}
    code, results = validate([numeric, untargeted, unknown])
    assert code == 1
    first, second, third = (r["errors"] for r in results)
    assert "listLength must be string" in first[0]
    assert "scaleTargetRef" in second[0]
    assert "no schema" in third[0]
