"""--inline: run the jobs of one command in this process, no broker; sidecars give dedup."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.media import JobRequest
from pipelines.results import ResultKey
from workers.capabilities import CAPABILITIES
from workers.client import JobHandle
from workers.jobs.execute import Job, execute
from workers.jobs.resources import Resources
from workers.localstore import LocalStore
from workers.settings import Settings


def local_resources(settings: Settings) -> Resources:
    return Resources(settings, LocalStore(settings.sidecars()))


def run_inline(
    settings: Settings,
    jobs: Sequence[JobRequest],
    trace_id: str,
    resources: Resources | None = None,
    params: Mapping[str, Any] | None = None,
) -> list[JobHandle]:
    resources = resources or local_resources(settings)
    handles = []
    for request in jobs:
        spec = CAPABILITIES[request.capability]
        key = ResultKey(request.capability, resources.version(spec, params), request.sha256)
        job = Job(key, request.path, trace_id=trace_id, worker="inline", params=dict(params or {}))
        envelope = execute(resources, job)
        handles.append(JobHandle("inline", key, request.path, envelope.status, envelope))
    return handles
