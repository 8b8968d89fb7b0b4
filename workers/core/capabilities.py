"""Every processing capability, declared in one place.

A declaration names the tag, queue, task, input kind, pool, time limits, retry policy and
the inputs of its processor version. What runs a capability (its stage, engine loader and
probe) lives with the job runner in `workers.jobs.stages`; this module stays light so the
client can use it without any engine.

Each capability has two lanes, two Celery queues: live (`spec.queue`, everything a door
submits) and batch (`<queue>.batch`, reprocess). A worker of a capability consumes both,
live first (`workers.broker.lanes`); it announces the capability's queue, `spec.queue`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pipelines.media import Capability, MediaKind
from workers.core.offers import stt_offer, tts_offer
from workers.core.settings import Settings
from workers.core.stage_configs import (
    digest_version,
    stt_announcement,
    stt_config,
    stt_keyed,
    stt_version,
    tts_version,
    vision_version,
)


class Lane(StrEnum):
    """Where a job waits: live (a door's caller is waiting) or batch (reprocess)."""

    LIVE = "live"
    BATCH = "batch"


@dataclass(frozen=True, slots=True)
class CapabilitySpec:
    capability: Capability
    queue: str
    task_name: str
    input_kind: MediaKind
    pool: str  # `threads` for I/O-bound work, `prefork` for CPU-bound models
    versioner: Callable[[Settings, Mapping[str, Any] | None], str]
    # What a worker announces of this capability (its version, and what it serves: the
    # doors' catalog), and how a job is keyed from that: a producer keys its jobs by what
    # the serving workers run, with no models of its own.
    announcer: Callable[[Settings], dict[str, Any]] | None = None
    keyer: Callable[[Mapping[str, Any], Mapping[str, Any] | None], str] | None = None

    def lane_queue(self, lane: Lane) -> str:
        """The Celery queue of one of this capability's lanes (live: `queue` itself)."""
        return self.queue if lane is Lane.LIVE else f"{self.queue}.{lane.value}"

    @property
    def lane_queues(self) -> tuple[str, ...]:
        """The queues of both lanes, live first: what a worker of the capability consumes."""
        return tuple(self.lane_queue(lane) for lane in Lane)

    def version(self, settings: Settings, params: Mapping[str, Any] | None = None) -> str:
        """The processor version of a job with these params (the dedup key's middle)."""
        return self.versioner(settings, params)

    def announce(self, settings: Settings) -> dict[str, Any]:
        """What a worker serving this capability tells producers (see `version_from`)."""
        if self.announcer is not None:
            return self.announcer(settings)
        return {"version": self.versioner(settings, None)}

    def version_from(
        self, announced: Mapping[str, Any], params: Mapping[str, Any] | None = None
    ) -> str:
        """The version a job with these params gets on a worker that announced `announced`."""
        if self.keyer is not None:
            return self.keyer(announced, params)
        return str(announced["version"])

    def time_limits(self, settings: Settings, input_bytes: int) -> tuple[float, float]:
        """(soft, hard) seconds: a fast tier for vision, a tier scaled by size for speech."""
        jobs = settings.jobs
        if self.queue == "vision":
            soft = max(jobs.vision_soft_limit, settings.vision.timeout + 10)
        elif self.queue == "documents":
            soft = settings.documents.timeout + 15  # the child is killed at its timeout
        else:
            # STT input is compressed audio (8 kb/s speech: ~17 min per MiB); TTS input is
            # the request text (1 MiB would be a book): each gets its own rate.
            per_mib = jobs.stt_seconds_per_mib if self.queue == "stt" else jobs.tts_seconds_per_mib
            mib = input_bytes / (1024 * 1024)
            soft = min(jobs.speech_soft_limit + per_mib * mib, jobs.speech_max_limit)
        return soft, soft + 30


def _stt_announcement(settings: Settings) -> dict[str, Any]:
    return {**stt_announcement(settings), **stt_offer(settings, stt_config(settings).model_dir)}


def _tts_announcement(settings: Settings) -> dict[str, Any]:
    return {"version": tts_version(settings), **tts_offer(settings)}


CAPABILITIES: Mapping[Capability, CapabilitySpec] = {
    spec.capability: spec
    for spec in (
        CapabilitySpec(
            capability=Capability.VISION_SUMMARIZE,
            queue="vision",
            task_name="mcp_media.summarize_image",
            input_kind=MediaKind.IMAGE,
            pool="threads",
            versioner=lambda settings, params: vision_version(settings),
        ),
        CapabilitySpec(
            capability=Capability.AUDIO_TRANSCRIBE,
            queue="stt",
            task_name="mcp_media.transcribe_audio",
            input_kind=MediaKind.AUDIO,
            pool="prefork",
            versioner=stt_version,
            announcer=_stt_announcement,
            keyer=stt_keyed,
        ),
        CapabilitySpec(
            capability=Capability.AUDIO_SYNTHESIZE,
            queue="tts",
            task_name="mcp_media.synthesize_speech",
            input_kind=MediaKind.DOCUMENT,
            pool="prefork",
            versioner=tts_version,
            announcer=_tts_announcement,
        ),
        CapabilitySpec(
            capability=Capability.DOCUMENT_DIGEST,
            queue="documents",
            task_name="mcp_media.digest_document",
            input_kind=MediaKind.DOCUMENT,
            pool="threads",  # each document is read in a child process of its own
            versioner=lambda settings, params: digest_version(settings),
        ),
    )
}

QUEUES = tuple(dict.fromkeys(spec.queue for spec in CAPABILITIES.values()))


def lane_queues(queues: Iterable[str] = QUEUES) -> tuple[str, ...]:
    """Every lane queue of these capabilities' queues (default: all), each live lane before
    its batch lane."""
    return tuple(q for queue in queues for q in for_queue(queue).lane_queues)


def lane_of(queue: str) -> tuple[CapabilitySpec, Lane]:
    """The capability and the lane a lane queue belongs to (a capability's queue: live)."""
    for spec in CAPABILITIES.values():
        for lane in Lane:
            if spec.lane_queue(lane) == queue:
                return spec, lane
    raise KeyError(queue)


def for_queue(queue: str) -> CapabilitySpec:
    """The capability of a queue: its own (`spec.queue`) or one of its lanes'."""
    return lane_of(queue)[0]
