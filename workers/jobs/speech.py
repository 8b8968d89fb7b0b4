"""The speech engines of one process and the speech stages as jobs run them."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from pipelines.engines.registry import chinese_writer, load_transcriber, load_tts, load_vad
from pipelines.errors import PermanentError
from pipelines.media import MediaKind
from pipelines.render import audio_tag
from pipelines.results import StageOutcome, Status
from pipelines.sniff import Format
from pipelines.speech.request import SynthesisRequest
from pipelines.speech.stt import Progress, Transcriber, transcribe
from pipelines.speech.tts import TextToSpeech
from pipelines.speech.vad import SpeechDetector
from workers.core.settings import Settings
from workers.core.stage_configs import engine_named, stt_config, tts_config, tts_model
from workers.files.blobs import BlobRef

# A voice is a folder name under the models root, never a path.
_VOICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Raw PCM has no signature to sniff: the job says what it wrote.
_PCM = Format("pcm", ".pcm", "audio/pcm")


def build_transcriber(
    settings: Settings, options: Mapping[str, str] | None = None
) -> tuple[Transcriber, SpeechDetector | None]:
    config = stt_config(settings, options)
    return load_transcriber(config), load_vad(config)


def build_synthesizer(settings: Settings, voice: str | None = None) -> TextToSpeech:
    config = tts_config(settings)
    if voice:
        if not _VOICE_NAME.fullmatch(voice) or ".." in voice:
            raise PermanentError(f"voice {voice!r} is not a voice folder name")
        config = replace(config, model_dir=settings.models_root / voice, voice="")
    return load_tts(config)


def run_transcribe(
    engines: tuple[Transcriber, SpeechDetector | None],
    settings: Settings,
    path: Path,
    options: Mapping[str, str] | None = None,
    on_segment: Callable[[bytes], None] | None = None,
    at: Callable[[float], None] | None = None,
) -> StageOutcome:
    """Transcribe; `on_segment` gets each segment as JSON as soon as it is recognised, `at`
    the seconds done after each window (it may raise to stop the job)."""
    transcriber, detector = engines
    if detector is not None:
        detector.reset()

    def checkpoint(progress: Progress) -> None:
        if at is not None:
            at(progress.done_s)
        if on_segment is None:
            return
        for said in progress.said:
            on_segment(
                json.dumps({"start": said.start, "end": said.end, "text": said.text}).encode()
            )

    config = stt_config(settings, options)
    chinese = chinese_writer(config.chinese_script)
    transcript = transcribe(path, transcriber, config, detector, checkpoint, chinese)
    made_by = {"engine": engine_named(config), "model": config.model_dir.name}
    return StageOutcome(Status.DONE, {**transcript.to_dict(), **made_by})


def run_synthesize(
    voices: Callable[[str | None], TextToSpeech],
    settings: Settings,
    path: Path,
    on_chunk: Callable[[bytes], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> StageOutcome:
    """Speak the request document at `path` with the voice it names (`voices` loads it);
    `on_chunk` gets the encoded audio as each sentence is done; `should_stop` is asked
    before each piece (raises `Stopped`, nothing stored)."""
    request = SynthesisRequest.read(path, settings.tts.speed)
    text, fmt, speed, voice = request.text, request.format, request.speed, request.voice
    folder_name = speaker = None
    if voice and voice != settings.tts.voice:
        # A voice folder, or one voice of a many-voice folder (Kokoro): the folder is
        # loaded once per process, the voice is chosen per job.
        folder, speaker = tts_model(settings, voice, strict=True)
        if folder != tts_config(settings).model_dir:
            folder_name = folder.name
    tts = voices(folder_name).for_voice(speaker or None, speed)
    scratch = settings.home / "tmp"
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = scratch / f"speech-{secrets.token_hex(8)}.{fmt}"
    try:
        speech = tts.synthesize_to_file(text, tmp, fmt, on_chunk, should_stop)
        cache = settings.media_cache()
        stored = cache.store_file(
            tmp, MediaKind.AUDIO, validate=(lambda _p, _h: _PCM) if fmt == "pcm" else None
        )
        cache.mark_output(stored.sha256)
    finally:
        tmp.unlink(missing_ok=True)
    return StageOutcome(
        Status.DONE,
        {
            "path": str(stored.path),
            "format": fmt,
            "duration_s": round(speech.duration_s, 3),
            "media_tag": audio_tag(stored.path, fmt),
            "sample_rate": 24_000 if fmt == "pcm" else speech.sample_rate,
            "sentences": speech.sentences,
            "audio_sha256": stored.sha256,
            # The output blob by content: the producer fetches it into its own cache.
            "blob": BlobRef(
                stored.sha256, MediaKind.AUDIO, stored.path.suffix, stored.size
            ).to_json(),
            "mime": stored.mime,
            "engine": engine_named(tts.config),
            "model": tts.config.model_dir.name,
            "voice": tts.config.voice,
        },
    )
