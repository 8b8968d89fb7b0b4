"""Per-process engines: built once, after fork, behind a lock; never at import."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import redis

from pipelines.digest import Extractor
from pipelines.engines.registry import document_extractor, vision_provider
from pipelines.vision import VisionProvider
from workers.core.settings import Settings
from workers.core.stage_configs import stt_options, vision_config
from workers.files.blobs import LocalBlobs
from workers.files.node_cache import NodeCache
from workers.files.shared_files import open_shared_files
from workers.state.shared_state import (
    SharedState,
    broker_client,
    memory_state,
    redis_state,
)

if TYPE_CHECKING:
    from pipelines.speech.stt import Transcriber
    from pipelines.speech.tts import TextToSpeech
    from pipelines.speech.vad import SpeechDetector
    from workers.core.capabilities import CapabilitySpec


class Resources:
    """What one worker process holds: settings, the shared state (and the broker client
    it is on, for the worker's leases; None in process), loaded engines."""

    def __init__(
        self,
        settings: Settings,
        state: SharedState,
        node: NodeCache | None = None,
        broker: redis.Redis[bytes] | None = None,
    ) -> None:
        self.settings = settings
        self.state = state
        self.broker = broker
        # Where job inputs are found or fetched, and outputs published.
        self.node = node or NodeCache(
            settings.media_cache(), LocalBlobs(settings.media_cache()), node_budget(settings)
        )
        self._lock = threading.Lock()
        self._engines: dict[str, Any] = {}
        self.vision = vision_config(settings)

    def _engine(self, name: str, build: Any) -> Any:
        with self._lock:
            if name not in self._engines:
                self._engines[name] = build()
            return self._engines[name]

    def version(self, spec: CapabilitySpec, params: Mapping[str, Any] | None = None) -> str:
        """This process's processor version for a capability and job options (computed once)."""
        options = stt_options(params) if spec.queue == "stt" else {}
        name = f"version:{spec.task_name}:{sorted(options.items())}"
        with self._lock:
            if name not in self._engines:
                self._engines[name] = spec.version(self.settings, options)
            value: str = self._engines[name]
            return value

    def vision_provider(self) -> VisionProvider:
        provider: VisionProvider = self._engine("vision", lambda: vision_provider(self.vision))
        return provider

    def document_extractor(self) -> Extractor:
        extractor: Extractor = self._engine("documents", document_extractor)
        return extractor

    def transcriber(
        self, options: Mapping[str, str] | None = None
    ) -> tuple[Transcriber, SpeechDetector | None]:
        """The recognizer for these job options (`configs.stt_options`): one per language
        and task, each loaded once."""
        from workers.jobs.speech import build_transcriber

        # The script is applied to the text after decoding, and words are timed on request:
        # one recognizer serves them all.
        given = {k: v for k, v in (options or {}).items() if k not in ("script", "words")}
        name = "stt" if not given else f"stt:{sorted(given.items())}"
        engines: tuple[Transcriber, SpeechDetector | None] = self._engine(
            name, lambda: build_transcriber(self.settings, given)
        )
        return engines

    def synthesizer(self, voice: str | None = None) -> TextToSpeech:
        """The default voice, or another prepared voice folder by name (loaded once)."""
        from workers.jobs.speech import build_synthesizer

        voice = None if voice == self.settings.tts.voice else voice
        name = "tts" if voice is None else f"tts:{voice}"
        tts: TextToSpeech = self._engine(name, lambda: build_synthesizer(self.settings, voice))
        return tts


def node_budget(settings: Settings) -> int:
    return int(settings.store.local_budget_mb * 1024 * 1024)


_process: Resources | None = None
_process_lock = threading.Lock()


def for_process(settings: Settings, url: str) -> Resources:
    """The Resources of this worker process, created on first use (after fork)."""
    global _process
    with _process_lock:
        if _process is None:
            files = open_shared_files(settings)
            node = NodeCache(
                settings.media_cache(), files.blobs, node_budget(settings), replicas=True
            )
            client = broker_client(settings, url)
            state = redis_state(
                client, files.sidecars, settings.jobs.result_ttl, settings.redis_transport_options
            )
            _process = Resources(settings, state, node, client)
        return _process


def reset_process() -> None:
    """Forget the parent's resources in a freshly forked child."""
    global _process
    _process = None


def local_resources(settings: Settings) -> Resources:
    """This process's engines with the in-memory shared state: `--inline` runs and probes."""
    return Resources(
        settings,
        memory_state(settings.sidecars(), result_ttl=settings.jobs.result_ttl),
    )
