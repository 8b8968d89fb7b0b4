"""The one place stages meet their engines: each builder imports its engine when called, in
the worker process that runs it (after fork), never at import.

Stage modules own their ports (Protocols and errors) and never import an engine; whoever
runs a stage asks this registry for the engine behind the port.
"""

from __future__ import annotations

from pipelines.errors import ConfigError, Skipped
from pipelines.vision import LocalVisionProvider, ProviderKind, VisionConfig, VisionProvider


def vision_provider(config: VisionConfig) -> VisionProvider:
    """The provider `config` asks for."""
    match config.provider:
        case ProviderKind.NONE:
            raise Skipped("vision provider is 'none'")
        case ProviderKind.LOCAL:
            from pipelines.engines.ocr import RapidOcrReader

            return LocalVisionProvider(RapidOcrReader())
        case ProviderKind.OPENAI:
            from pipelines.engines.openai_vision import OpenAIVisionProvider

            return OpenAIVisionProvider(config)
    raise ConfigError(f"unknown vision provider {config.provider!r}")  # pragma: no cover
