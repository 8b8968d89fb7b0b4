"""What the API offers, by OpenAI's names and ours: the STT model, the TTS models and
voices, from the catalog the serving workers announce (`workers.core.catalog`). Read per
request (the gateway caches the announcements for a few seconds), never from model folders.
"""

from __future__ import annotations

from anyio import to_thread

from workers.core.catalog import Catalog, SttModel, VoiceNotFound
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError

TTS_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
STT_ALIAS = "whisper-1"
# A worker that serves the stt queue without saying what (its announcement failed, or it
# predates announcing): the door passes every option on, and the worker decides.
UNANNOUNCED_STT = SttModel(STT_ALIAS, multilingual=True, word_timestamps=True)


async def catalog(ctx: ApiContext) -> Catalog:
    return await to_thread.run_sync(ctx.gateway.catalog)


def tts_models(found: Catalog) -> list[str]:
    """OpenAI's TTS model names, then each served TTS folder."""
    return [*TTS_MODELS, *(model.id for model in found.tts_models)]


def stt_model(found: Catalog) -> SttModel:
    """The served STT model (what its options are checked against); while no stt worker
    announced one, one that takes every option (with no worker at all, the request is a 503
    once its upload is in: `jobs.served`)."""
    return found.stt if found.stt is not None else UNANNOUNCED_STT


def resolve_voice(ctx: ApiContext, found: Catalog, voice: str, model: str | None = None) -> str:
    """`Catalog.resolve_voice`, an unknown voice a 400 `unknown_voice` naming what is served."""
    try:
        return found.resolve_voice(voice, model, ctx.settings.api.voices)
    except VoiceNotFound as exc:
        raise ApiError(400, str(exc), param="voice", code="unknown_voice") from None


def model_ids(found: Catalog) -> list[str]:
    stt = [STT_ALIAS, found.stt.id] if found.stt is not None else [STT_ALIAS]
    return [*stt, *tts_models(found)]
