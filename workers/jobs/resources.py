"""Per-process engines: built once, after fork, behind a lock; never at import."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipelines.vision import VisionProvider, make_provider
from workers.configs import vision_config
from workers.settings import Settings
from workers.store import ResultStore, redis_store

if TYPE_CHECKING:
    from pipelines.speech.stt import Transcriber
    from pipelines.speech.tts import TextToSpeech
    from pipelines.speech.vad import SpeechDetector
    from workers.capabilities import CapabilitySpec


class Resources:
    """What one worker process holds: settings, the result store, loaded engines."""

    def __init__(self, settings: Settings, store: ResultStore) -> None:
        self.settings = settings
        self.store = store
        self._lock = threading.Lock()
        self._engines: dict[str, Any] = {}
        self.vision = vision_config(settings)

    def _engine(self, name: str, build: Any) -> Any:
        with self._lock:
            if name not in self._engines:
                self._engines[name] = build()
            return self._engines[name]

    def version(self, spec: CapabilitySpec, params: Mapping[str, Any] | None = None) -> str:
        """This process's processor version for a capability and a job's parameters (each
        computed once)."""
        language = (params or {}).get("language") or ""
        name = f"version:{spec.task_name}:{language}"
        with self._lock:
            if name not in self._engines:
                self._engines[name] = spec.version_for(self.settings, params)
            value: str = self._engines[name]
            return value

    def vision_provider(self) -> VisionProvider:
        provider: VisionProvider = self._engine("vision", lambda: make_provider(self.vision))
        return provider

    def transcriber(self) -> tuple[Transcriber, SpeechDetector | None]:
        from workers.jobs.speech import build_transcriber

        engines: tuple[Transcriber, SpeechDetector | None] = self._engine(
            "stt", lambda: build_transcriber(self.settings)
        )
        return engines

    def synthesizer(self) -> TextToSpeech:
        from workers.jobs.speech import build_synthesizer

        tts: TextToSpeech = self._engine("tts", lambda: build_synthesizer(self.settings))
        return tts


_process: Resources | None = None
_process_lock = threading.Lock()


def for_process(settings: Settings, url: str) -> Resources:
    """The Resources of this worker process, created on first use (after fork)."""
    global _process
    with _process_lock:
        if _process is None:
            _process = Resources(settings, redis_store(settings, url))
        return _process


def reset_process() -> None:
    """Forget the parent's resources in a freshly forked child."""
    global _process
    _process = None
