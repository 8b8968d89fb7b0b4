"""The one Settings object: environment prefix MCP_MEDIA_, nested sections with `__`.

Settings are read once, at the edge (CLI, worker start), and turned into the frozen
dataclasses the pipeline stages take. The doors' sections are in `workers.core.door_settings`;
what a process keeps of its environment, in `workers.core.confinement`.
"""

from __future__ import annotations

import contextvars
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from pipelines.cache import DEFAULT_MAX_BLOB_BYTES, CacheLimits, MediaCache
from pipelines.errors import ConfigError
from pipelines.results import Sidecars
from workers.core.door_settings import ApiSettings, McpSettings, WyomingSettings


def default_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "mcp-media"


class VisionSettings(BaseModel):
    enabled: bool = True
    # auto: `openai` when a base URL is configured, else `local` (Pillow facts + OCR).
    provider: Literal["auto", "openai", "local", "none"] = "auto"
    base_url: str | None = None
    api_key: SecretStr = SecretStr("")
    model: str | None = None
    prompt: str | None = None
    timeout: float = Field(default=20.0, gt=0)
    max_side: int = Field(default=1568, ge=64)
    max_concurrency: int = Field(default=4, ge=1)
    max_output_chars: int = Field(default=4000, ge=100)
    min_side: int = Field(default=16, ge=1)
    concurrency: int = Field(default=4, ge=1)  # threads per vision worker
    auxiliary_model: str | None = None  # AUXILIARY_VISION_MODEL, read with the settings

    @property
    def resolved_provider(self) -> Literal["openai", "local", "none"]:
        if not self.enabled or self.provider == "none":
            return "none"
        if self.provider == "auto":
            return "openai" if self.base_url else "local"
        return self.provider

    def resolved_model(self) -> str:
        """Settings, then AUXILIARY_VISION_MODEL, then a configuration error."""
        model = self.model or self.auxiliary_model
        if not model:
            raise ConfigError(
                "vision provider `openai` needs a model: set MCP_MEDIA_VISION__MODEL "
                "or AUXILIARY_VISION_MODEL"
            )
        return model


class SpeechSettings(BaseModel):
    model_dir: Path | None = None  # default: <home>/models/<default model>
    # auto: by the model folder's layout (ours: native; sherpa-onnx's release folders:
    # sherpa-onnx); native: our onnxruntime engines; sherpa-onnx: sherpa-onnx's.
    engine: Literal["auto", "native", "sherpa-onnx"] = "auto"
    threads: int = Field(default=1, ge=1)
    concurrency: int | None = Field(default=None, ge=1)  # default: cores // threads

    def processes(self) -> int:
        if self.concurrency is not None:
            return self.concurrency
        return max(1, len(os.sched_getaffinity(0)) // self.threads)


class SttSettings(SpeechSettings):
    model: str = "whisper-tiny.en"  # folder under <home>/models (model_dir overrides it)
    language: str = ""  # "": English for .en models, detected by multilingual ones
    # Mandarin transcripts in this script: simplified, traditional (-tw, -hk) or as-is (as
    # whisper writes them); a request's language tag (zh-Hant, zh-TW, zh-CN) overrides it.
    chinese_script: Literal[
        "simplified", "traditional", "traditional-tw", "traditional-hk", "as-is"
    ] = "simplified"
    max_seconds: float = Field(default=7200.0, gt=0)
    vad_model: Path | None = None  # a silero file or folder; default: <home>/models/silero-vad
    # Long audio: this many windows, cut where nobody speaks, decoded together in one job
    # (our whisper: one encoder run and one decoder run a step for all of them); 1: one at
    # a time, each continuing where the last one's text stopped. 4 by default: on 10 minutes
    # of speech (bench long_audio's recording, 2 cores shared with other work, load about
    # 2.4) 4 took 10.7-11.4 s, 2 took 12.4-13.2 s, one at a time 14.4-20.6 s, and 4 read it
    # at WER 3.35 % where one at a time read 4.45 %; at 8 a step costs as much as two at 4.
    batch_windows: int = Field(default=4, ge=1, le=16)


class TtsSettings(SpeechSettings):
    max_chars: int = Field(default=20000, ge=1)
    # A model folder under <home>/models (piper, or Kokoro with its first voice), or a voice
    # of a Kokoro folder there (af_heart, zf_xiaobei, ...).
    voice: str = "piper-en_US-joe-medium"
    speed: float = Field(default=1.0, gt=0.2, le=4.0)
    format: Literal["ogg", "wav"] = "ogg"
    noise_scale: float = Field(default=0.667, ge=0)  # 0 and 0: deterministic output
    noise_scale_w: float = Field(default=0.8, ge=0)
    # The first sentence's opening clause or this many words spoken alone, for a fast first
    # audio; 0: the first sentence whole; unset: 4 for Kokoro voices, 0 for piper voices.
    first_chunk_words: int | None = Field(default=None, ge=0, le=50)


class DocumentSettings(BaseModel):
    """The document digest: caps of one extraction (all in its processor version but the
    wall-clock timeout, which ends a job and changes no output)."""

    enabled: bool = True
    max_pages: int = Field(default=200, ge=1)
    max_chars: int = Field(default=500_000, ge=1000)
    excerpt_chars: int = Field(default=2000, ge=0)  # the text the agent's block shows
    timeout: float = Field(default=60.0, gt=0)
    memory_mib: int = Field(default=1024, ge=64)  # the extraction child's address space
    ocr_pages: int = Field(default=2, ge=0)  # scanned pages (no text layer) read by OCR
    concurrency: int = Field(default=2, ge=1)  # threads per documents worker


class JobSettings(BaseModel):
    max_deliveries: int = Field(default=3, ge=1)  # redelivery cap before the dead-letter list
    claim_ttl: float = Field(default=30.0, ge=5)  # renewed while the job runs
    result_ttl: int = Field(default=7 * 24 * 3600, ge=60)  # Redis index; sidecars stay
    vision_soft_limit: float = Field(default=45.0, gt=0)
    speech_soft_limit: float = Field(default=120.0, gt=0)  # plus time per input MiB
    stt_seconds_per_mib: float = Field(default=150.0, ge=0)
    tts_seconds_per_mib: float = Field(default=20000.0, ge=0)  # ~20 s per 1000 characters
    speech_max_limit: float = Field(default=1800.0, gt=0)  # 2 h of audio at RTF 0.25
    # A door asking for a bound (the HTTP API) is refused while a live lane holds this many.
    high_water: int = Field(default=500, ge=1)
    batch_high_water: int = Field(default=500, ge=1)  # reprocess waits while a batch lane is full
    # The batch lanes' floor: one fetch in this many takes batch work first while both lanes
    # of a worker wait, so a steady live stream leaves batch at least 1/N of the slots.
    batch_every: int = Field(default=10, ge=2, le=1000)
    # A worker told to stop (SIGTERM) lets its running jobs finish this long, then hands the
    # rest back and exits: inside Kubernetes' default terminationGracePeriodSeconds (30).
    shutdown_grace: float = Field(default=25.0, ge=0)


class StoreSettings(BaseModel):
    """Where blobs, result sidecars and the job journal live for every node.

    Unset `url`: this machine's home (the local cache, `results/`, `jobs/`); nodes then share
    them only through one mounted volume. `s3://BUCKET[/PREFIX]`: an S3 bucket, reached with
    the standard AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION
    variables; each node keeps local copies of what it reads within `local_budget_mb`.
    """

    url: str | None = None
    endpoint_url: str | None = None  # AWS_ENDPOINT_URL (AWS_ENDPOINT_URL_S3 first)
    access_key_id: str | None = None  # AWS_ACCESS_KEY_ID
    secret_access_key: SecretStr = SecretStr("")  # AWS_SECRET_ACCESS_KEY
    session_token: SecretStr = SecretStr("")  # AWS_SESSION_TOKEN
    region: str | None = None  # AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1
    timeout: float = Field(default=30.0, gt=0)  # seconds per request
    local_budget_mb: float = Field(default=5120.0, gt=0)  # fetched copies kept on this node

    @field_validator("url")
    @classmethod
    def _s3_url(cls, url: str | None) -> str | None:
        if url is not None and url.strip() == "":
            return None
        if url is not None and not url.startswith("s3://"):
            raise ValueError(f"MCP_MEDIA_STORE__URL must be s3://BUCKET[/PREFIX], not {url!r}")
        return url


# The standard variables of S3 tools, read into the store settings unless those are set.
_AWS_ENV = (
    ("AWS_ENDPOINT_URL_S3", "endpoint_url"),
    ("AWS_ENDPOINT_URL", "endpoint_url"),
    ("AWS_ACCESS_KEY_ID", "access_key_id"),
    ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
    ("AWS_SESSION_TOKEN", "session_token"),
    ("AWS_REGION", "region"),
    ("AWS_DEFAULT_REGION", "region"),
)


# The environment `Settings.from_env` reads instead of os.environ, for this context only.
_given_env: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "given_env", default=None
)


class _GivenEnvSource(EnvSettingsSource):
    def _load_env_vars(self) -> Mapping[str, str | None]:
        env = dict(_given_env.get() or os.environ)
        # The agent platforms' own variable is honoured as the vision model fallback.
        aux = env.get("AUXILIARY_VISION_MODEL")
        if aux:
            env.setdefault("MCP_MEDIA_VISION__AUXILIARY_MODEL", aux)
        for name, field in _AWS_ENV:
            if env.get(name):
                env.setdefault(f"MCP_MEDIA_STORE__{field.upper()}", env[name])
        return {key.lower(): value for key, value in env.items()}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MCP_MEDIA_", env_nested_delimiter="__", extra="ignore"
    )

    home: Path = Field(default_factory=default_home)
    redis_url: str | None = None
    # How to reach Redis beyond its URL (workers.broker.target turns all of these into
    # connections for the store and for Celery alike). ACL user and password: in the URL.
    # TLS: a rediss:// URL, or any of the three files, verifies the server's certificate.
    redis_ca_certs: Path | None = None  # the CA that signed the server's certificate
    redis_certfile: Path | None = None  # a client certificate, when the server asks for one
    redis_keyfile: Path | None = None
    # Sentinel: `host:port,host:port`. The URL (optional then) gives only the scheme, user,
    # password and database of the master; a `sentinel://h1:p1;sentinel://h2:p2` URL works too.
    redis_sentinels: Annotated[list[str], NoDecode] = Field(default_factory=list)
    redis_master_name: str = "mymaster"
    redis_sentinel_password: SecretStr = SecretStr("")  # the sentinels' own requirepass
    # JSON laid over Celery's broker_transport_options, e.g. {"visibility_timeout": 7200}.
    redis_transport_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("redis_sentinels", mode="before")
    @classmethod
    def _sentinel_list(cls, value: Any) -> Any:
        if isinstance(value, str):  # `h1:p1,h2:p2`, or a JSON list
            if value.lstrip().startswith("["):
                return json.loads(value)
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _sentinel_url(self) -> Settings:
        # With sentinels alone, the URL names the master: never the embedded broker.
        if self.redis_sentinels and not self.redis_url:
            self.redis_url = f"redis://{self.redis_master_name}/0"
        return self

    max_blob_bytes: int = Field(default=DEFAULT_MAX_BLOB_BYTES, gt=0)
    vision: VisionSettings = Field(default_factory=VisionSettings)
    stt: SttSettings = Field(default_factory=SttSettings)
    tts: TtsSettings = Field(default_factory=TtsSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    documents: DocumentSettings = Field(default_factory=DocumentSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    wyoming: WyomingSettings = Field(default_factory=WyomingSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, home: Path) -> Path:
        # Workers, the embedded broker and model recipes run in other folders: a relative
        # MCP_MEDIA_HOME means the folder it names from where the command was started.
        return home.expanduser().absolute()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _GivenEnvSource(settings_cls))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **values: Any) -> Settings:
        """Settings read from `env` (default: os.environ) as if it were the environment.

        Tests and parent processes build the settings of another process this way, without
        touching this process's environment.
        """
        token = _given_env.set(dict(os.environ if env is None else env))
        try:
            return cls(**values)
        finally:
            _given_env.reset(token)

    @property
    def cache_root(self) -> Path:
        return self.home / "cache"

    @property
    def results_root(self) -> Path:
        return self.home / "results"

    def sidecars(self) -> Sidecars:
        return Sidecars(self.results_root)

    @property
    def models_root(self) -> Path:
        return self.home / "models"

    def media_cache(self) -> MediaCache:
        return MediaCache(self.cache_root, CacheLimits(max_blob_bytes=self.max_blob_bytes))
