"""What runs each capability: its stage (a pipelines call plus cluster coordination), the
engines it loads in a process, and the probe that proves a process can serve it
(`workers.jobs.probes`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipelines.cache import file_sha256
from pipelines.digest import digest_document
from pipelines.errors import Skipped, Stopped
from pipelines.media import Capability, MediaKind
from pipelines.outcomes import Outcome
from pipelines.results import StageOutcome, Status
from pipelines.vision import ProviderKind, summarize_image
from workers.core.stage_configs import digest_config, stt_options
from workers.files.blobs import BlobRef
from workers.jobs.probes import probe_stt, probe_tts, probe_vision
from workers.jobs.resources import Resources
from workers.jobs.speech import run_synthesize, run_transcribe
from workers.state.cancellation import checkpoint, stop_asked

log = logging.getLogger(__name__)

VISION_SLOT = "vision-provider"
SLOT_POLL = 0.05


def summarize(resources: Resources, path: Path, slot_wait: float = 120.0) -> StageOutcome:
    """Describe one image, holding one of the cluster's provider slots while calling out."""
    config = resources.vision
    claims = resources.state.claims
    token: str | None = None
    stop = stop_asked(resources.state.coordination)
    ttl = config.timeout + 15  # a dead holder's slot frees itself after this
    if config.provider is ProviderKind.OPENAI:
        deadline = time.monotonic() + slot_wait
        while token is None:
            token = claims.acquire_slot(VISION_SLOT, config.max_concurrency, ttl)
            if token is None:
                if time.monotonic() > deadline:
                    return StageOutcome(
                        Status.DEGRADED,
                        reason="provider_busy: no provider slot became free",
                        outcome=Outcome.PROVIDER_BUSY,
                    )
                if stop is not None and stop():
                    raise Stopped("stopped while waiting for a provider slot")
                time.sleep(SLOT_POLL)
    try:
        return summarize_image(path, config, resources.vision_provider(), stop)
    finally:
        if token is not None:
            claims.release_slot(VISION_SLOT, token)


@contextmanager
def _streamed(
    resources: Resources, params: Mapping[str, Any] | None
) -> Iterator[Callable[[bytes], None] | None]:
    """With a `stream` param, the stage's output goes to that chunk stream (in the job's
    shared state) as it comes, ended with the failure's reason if the stage fails."""
    stream = (params or {}).get("stream")
    if not isinstance(stream, str):
        yield None
        return
    chunks = resources.state.chunks
    try:
        yield lambda data: chunks.append(stream, data)
    except BaseException as exc:
        chunks.end(stream, f"{type(exc).__name__}: {exc}"[:300] or "failed")
        raise
    chunks.end(stream)


def transcribe(
    resources: Resources, path: Path, params: Mapping[str, Any] | None = None
) -> StageOutcome:
    """Transcribe one clip; with a `stream` param, each segment goes out as it is heard."""
    options = stt_options(params)
    engines = resources.transcriber(options)
    with _streamed(resources, params) as on_segment:
        at = checkpoint(resources.state.coordination)
        return run_transcribe(engines, resources.settings, path, options, on_segment, at)


def synthesize(
    resources: Resources, path: Path, params: Mapping[str, Any] | None = None
) -> StageOutcome:
    """Speak one request; with a `stream` param, audio goes out sentence by sentence."""
    with _streamed(resources, params) as on_chunk:
        stop = stop_asked(resources.state.coordination)
        outcome = run_synthesize(resources.synthesizer, resources.settings, path, on_chunk, stop)
    blob = outcome.output.get("blob")
    if outcome.status is Status.DONE and isinstance(blob, dict):
        mime = outcome.output.get("mime")
        resources.node.publish(
            BlobRef.from_json(blob), Path(str(outcome.output["path"])), str(mime or "")
        )
    return outcome


def digest(resources: Resources, path: Path) -> StageOutcome:
    """Read one document (in a capped child process) and save its text beside it; where
    nodes share only a bucket, the text goes there too (`markdown_blob`), for read_document
    on the node that asked (its copy of the document has no text beside it)."""
    if not resources.settings.documents.enabled:
        raise Skipped("document digests are turned off")
    config = digest_config(resources.settings)
    outcome = digest_document(path, config, resources.document_extractor())
    if outcome.status is Status.DONE and resources.node.blobs.remote:
        markdown = Path(str(outcome.output["markdown"]))
        try:
            sha256 = file_sha256(markdown)
            if sha256 is None:
                raise OSError(f"{markdown.name} cannot be read")
            ref = BlobRef.of(MediaKind.DOCUMENT, markdown, sha256)
            resources.node.publish(ref, markdown, "text/markdown")
        except Exception as exc:  # the digest stands: read_document digests again there
            log.warning("digest text of %s not shared: %s", path.name, exc)
        else:
            output = {**outcome.output, "markdown_blob": ref.to_json()}
            return replace(outcome, output=output)
    return outcome


Stage = Callable[[Resources, Path, Mapping[str, Any]], StageOutcome]


@dataclass(frozen=True, slots=True)
class Runner:
    stage: Stage
    load: Callable[[Resources], object]  # this capability's engines, loaded in this process
    probe: Callable[[Resources], object]  # prove they work (once, in a throwaway process)


RUNNERS: Mapping[Capability, Runner] = {
    Capability.VISION_SUMMARIZE: Runner(
        stage=lambda res, path, params: summarize(res, path),
        load=lambda res: res.vision_provider(),
        probe=probe_vision,
    ),
    Capability.AUDIO_TRANSCRIBE: Runner(
        stage=transcribe,
        load=lambda res: res.transcriber(),
        probe=probe_stt,
    ),
    Capability.AUDIO_SYNTHESIZE: Runner(
        stage=synthesize,
        load=lambda res: res.synthesizer(),
        probe=probe_tts,
    ),
    Capability.DOCUMENT_DIGEST: Runner(
        stage=lambda res, path, params: digest(res, path),
        load=lambda res: res.document_extractor(),
        probe=lambda res: res.document_extractor(),
    ),
}


def for_queue(queue: str) -> Runner:
    from workers.core.capabilities import for_queue as spec_for_queue

    return RUNNERS[spec_for_queue(queue).capability]
