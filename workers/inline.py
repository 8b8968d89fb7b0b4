"""--inline: run the jobs of one command in this process, no broker; sidecars give dedup."""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.media import JobRequest
from pipelines.results import ResultKey
from workers.capabilities import CAPABILITIES
from workers.client import JobHandle
from workers.jobs import execute
from workers.resources import Resources
from workers.settings import Settings


def run_inline(settings: Settings, jobs: Sequence[JobRequest], trace_id: str) -> list[JobHandle]:
    resources = Resources(settings, None)
    handles = []
    for job in jobs:
        spec = CAPABILITIES[job.capability]
        key = ResultKey(job.capability, spec.version(settings), job.sha256)
        envelope = execute(spec, resources, key, job.path, {}, job_id=None, trace_id=trace_id)
        handles.append(JobHandle("inline", key, job.path, envelope.status, envelope))
    return handles
