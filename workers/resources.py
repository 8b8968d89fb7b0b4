"""Per-process engines: built once, after fork, behind a lock; never at import."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from pipelines.results import Sidecars
from pipelines.vision import ProviderKind, VisionConfig, VisionProvider, make_provider
from workers.settings import Settings

if TYPE_CHECKING:
    from pipelines.speech.stt import Transcriber
    from pipelines.speech.tts import TextToSpeech
    from pipelines.speech.vad import SpeechDetector
    from workers.capabilities import CapabilitySpec
from workers.store import ResultStore


def vision_config(settings: Settings) -> VisionConfig:
    """Settings -> the frozen config the vision stage takes."""
    vs = settings.vision
    provider = ProviderKind(vs.resolved_provider)
    extra: dict[str, Any] = {}
    if vs.prompt:
        extra["prompt"] = vs.prompt
    return VisionConfig(
        provider=provider,
        base_url=vs.base_url,
        api_key=vs.api_key.get_secret_value(),
        model=vs.resolved_model() if provider is ProviderKind.OPENAI else "",
        timeout=vs.timeout,
        max_side=vs.max_side,
        min_side=vs.min_side,
        max_output_chars=vs.max_output_chars,
        max_concurrency=vs.max_concurrency,
        **extra,
    )


def redis_client(url: str) -> redis.Redis[bytes]:
    """A client that rides out a broker restart: connection errors are retried with backoff
    for about half a minute before they surface."""
    return redis.Redis.from_url(
        url,
        socket_timeout=30,
        socket_connect_timeout=5,
        health_check_interval=15,
        retry=Retry(ExponentialBackoff(cap=2.0, base=0.1), retries=20),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )


def result_store(settings: Settings, url: str) -> ResultStore:
    client = redis_client(url)
    return ResultStore(client, Sidecars(settings.results_root), settings.jobs.result_ttl)


class Resources:
    """What one worker process holds: settings, the result store, loaded engines."""

    def __init__(self, settings: Settings, store: ResultStore | None) -> None:
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

    def version(self, spec: CapabilitySpec) -> str:
        """This process's processor version for a capability (computed once)."""
        name = f"version:{spec.task_name}"
        with self._lock:
            if name not in self._engines:
                self._engines[name] = spec.version(self.settings)
            value: str = self._engines[name]
            return value

    def vision_provider(self) -> VisionProvider:
        provider: VisionProvider = self._engine("vision", lambda: make_provider(self.vision))
        return provider

    def transcriber(self) -> tuple[Transcriber, SpeechDetector | None]:
        from workers.speech import build_transcriber

        engines: tuple[Transcriber, SpeechDetector | None] = self._engine(
            "stt", lambda: build_transcriber(self.settings)
        )
        return engines

    def synthesizer(self) -> TextToSpeech:
        from workers.speech import build_synthesizer

        tts: TextToSpeech = self._engine("tts", lambda: build_synthesizer(self.settings))
        return tts


_process: Resources | None = None
_process_lock = threading.Lock()


def for_process(settings: Settings, url: str | None) -> Resources:
    """The Resources of this process, created on first use (after fork)."""
    global _process
    with _process_lock:
        if _process is None:
            store = result_store(settings, url) if url else None
            _process = Resources(settings, store)
        return _process


def reset_process() -> None:
    """Forget the parent's resources in a freshly forked child."""
    global _process
    _process = None
