"""Every processing capability, declared in one place.

A declaration names the tag, queue, task, input kind, time limits, retry policy, the inputs
of its processor version, the stage that does the work and the probe that proves a worker
can serve it. Adding a capability is one `CapabilitySpec` plus one stage function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.errors import TransientError
from pipelines.media import Capability, MediaKind
from pipelines.results import StageOutcome
from workers import speech, stages
from workers.resources import Resources, vision_config
from workers.settings import Settings

Stage = Callable[[Resources, Path, Mapping[str, Any]], StageOutcome]


@dataclass(frozen=True, slots=True)
class CapabilitySpec:
    capability: Capability
    queue: str
    task_name: str
    input_kind: MediaKind
    pool: str  # `threads` for I/O-bound work, `prefork` for CPU-bound models
    transient: tuple[type[BaseException], ...]
    max_retries: int
    version: Callable[[Settings], str]
    stage: Stage
    load: Callable[[Resources], object]  # load this capability's engines in this process
    probe: Callable[[Resources], object]  # prove they work (run once, in a throwaway process)

    def time_limits(self, settings: Settings, input_bytes: int) -> tuple[float, float]:
        """(soft, hard) seconds: a fast tier for vision, a tier scaled by size for speech."""
        jobs = settings.jobs
        if self.queue == "vision":
            soft = max(jobs.vision_soft_limit, settings.vision.timeout + 10)
        else:
            # STT input is compressed audio (8 kb/s speech: ~17 min per MiB); TTS input is
            # the request text (1 MiB would be a book): each gets its own rate.
            per_mib = jobs.stt_seconds_per_mib if self.queue == "stt" else jobs.tts_seconds_per_mib
            mib = input_bytes / (1024 * 1024)
            soft = min(jobs.speech_soft_limit + per_mib * mib, jobs.speech_max_limit)
        return soft, soft + 30


def _vision_version(settings: Settings) -> str:
    from pipelines.vision import processor_version

    return processor_version(vision_config(settings))


CAPABILITIES: Mapping[Capability, CapabilitySpec] = {
    spec.capability: spec
    for spec in (
        CapabilitySpec(
            capability=Capability.VISION_SUMMARIZE,
            queue="vision",
            task_name="mcp_media.summarize_image",
            input_kind=MediaKind.IMAGE,
            pool="threads",
            transient=(TransientError, ConnectionError),
            max_retries=3,
            version=_vision_version,
            stage=lambda res, path, params: stages.summarize(res, path),
            load=lambda res: res.vision_provider(),
            probe=lambda res: stages.probe_vision(res),
        ),
        CapabilitySpec(
            capability=Capability.AUDIO_TRANSCRIBE,
            queue="stt",
            task_name="mcp_media.transcribe_audio",
            input_kind=MediaKind.AUDIO,
            pool="prefork",
            transient=(TransientError,),
            max_retries=2,
            version=speech.stt_version,
            stage=lambda res, path, params: stages.transcribe(res, path),
            load=lambda res: res.transcriber(),
            probe=lambda res: stages.probe_stt(res),
        ),
        CapabilitySpec(
            capability=Capability.AUDIO_SYNTHESIZE,
            queue="tts",
            task_name="mcp_media.synthesize_speech",
            input_kind=MediaKind.DOCUMENT,
            pool="prefork",
            transient=(TransientError,),
            max_retries=2,
            version=speech.tts_version,
            stage=lambda res, path, params: stages.synthesize(res, path),
            load=lambda res: res.synthesizer(),
            probe=lambda res: stages.probe_tts(res),
        ),
    )
}

QUEUES = tuple(dict.fromkeys(spec.queue for spec in CAPABILITIES.values()))


def for_queue(queue: str) -> CapabilitySpec:
    for spec in CAPABILITIES.values():
        if spec.queue == queue:
            return spec
    raise KeyError(queue)
