"""Speech stages on the real default models: piper voice, whisper tiny.en, silero VAD."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import av
import numpy as np
import pytest
from numpy.typing import NDArray

from pipelines.engines.registry import load_detector, load_transcriber, load_tts, load_vad
from pipelines.errors import ConfigError
from pipelines.speech.audio import (
    AudioDecodeError,
    AudioTooLongError,
    EmptyAudioError,
    NotAudioError,
    decode_audio,
    write_wav,
)
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import Progress, Transcriber, Transcript, to_srt, to_vtt, transcribe
from pipelines.speech.stt import validate_model_dir as validate_whisper_dir
from pipelines.speech.text import EmptyTextError, TextTooLongError, normalize
from pipelines.speech.tts import SynthesisError, TextToSpeech
from pipelines.speech.tts import validate_model_dir as validate_voice_dir
from pipelines.speech.vad import SpeechDetector, VadConfig
from tests.support.audio_samples import CONTAINERS, encode, silent_wav, tone

pytestmark = pytest.mark.models

Samples = NDArray[np.float32]
VOICE = "piper-en_US-joe-medium"
WHISPER = "whisper-tiny.en"


@pytest.fixture(scope="session")
def models(models_home: Path) -> Path:
    return models_home / "models"


@pytest.fixture(scope="session")
def tts(models: Path) -> TextToSpeech:
    return load_tts(TtsConfig(models / VOICE, threads=2, noise_scale=0.0, noise_scale_w=0.0))


@pytest.fixture(scope="session")
def stt_config(models: Path) -> SttConfig:
    return SttConfig(models / WHISPER, vad_model=models / "silero-vad", threads=2)


@pytest.fixture(scope="session")
def transcriber(stt_config: SttConfig) -> Transcriber:
    return load_transcriber(stt_config)


@pytest.fixture(scope="session")
def detector(stt_config: SttConfig) -> SpeechDetector:
    vad = load_vad(stt_config)
    assert vad is not None
    return vad


def words(text: str) -> list[str]:
    """Compare what was meant: both sides through the TTS normaliser, case and punctuation
    dropped. Whisper writes clock times as "at 10.35" or "at 1035"; read those as times."""
    text = re.sub(r"\b(at|by|until) (\d{1,2})\.?(\d{2})\b", r"\1 \2:\3", text)
    spoken = normalize(text).lower().replace("-", " ")
    return re.sub(r"[^a-z' ]", " ", spoken).split()


def wer(reference: Sequence[str], hypothesis: Sequence[str]) -> float:
    row = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, start=1):
        previous, row[0] = row[:], i
        for j, hyp in enumerate(hypothesis, start=1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ref != hyp))
    return row[-1] / max(len(reference), 1)


def speak_to_wav(tts: TextToSpeech, text: str, path: Path) -> Path:
    speech = tts.synthesize(text)
    assert speech.samples is not None
    return write_wav(path, speech.samples, speech.sample_rate)


ROUND_TRIP = [
    "The meeting moved to December 2nd, 2026, at 10:35 in the morning.",
    "Tickets cost $3.50 each, and 25% of the seats are already gone.",
    "Dr. Smith said the 3rd report, not the 1st one, was correct!",
    "Call me at 3pm tomorrow; I will bring 12 apples and 7 oranges.",
    "Our team grew from 40 to 125 people in 2025.",
]


@pytest.mark.parametrize("sentence", ROUND_TRIP)
def test_round_trip_speak_then_transcribe(
    tts: TextToSpeech,
    transcriber: Transcriber,
    stt_config: SttConfig,
    sentence: str,
    tmp_path: Path,
) -> None:
    wav = speak_to_wav(tts, sentence, tmp_path / "s.wav")
    result = transcribe(wav, transcriber, stt_config)
    assert wer(words(sentence), words(result.text)) <= 0.10, result.text
    # One sentence, timed by whisper's own timestamps within the clip.
    assert len(result.segments) == 1
    (said,) = result.segments
    assert 0.0 <= said.start < 0.5
    assert result.duration_s - 1.0 < said.end <= result.duration_s


LONG_CLIP = [
    "The quick brown fox jumps over the lazy dog.",
    "A journey of a thousand miles begins with a single step.",
    "Please remember to water the plants on Tuesday.",
    "The library closes early during the winter holidays.",
    "Our new office has a view of the river and the old bridge.",
    "Fresh bread is delivered to the bakery every morning.",
    "The children built a tall snowman in the park.",
    "He forgot his umbrella and got soaked on the way home.",
    "Bright stars filled the sky above the quiet village.",
    "The museum opens a new exhibition about ancient maps next week.",
    "She plays the violin in the city orchestra.",
    "We watched the sunset from the top of the hill.",
    "The soup needs a little more salt and pepper.",
    "Trains to the airport run every fifteen minutes.",
    "My grandmother keeps her letters in a wooden box.",
    "The garden is full of roses and tall sunflowers.",
    "Please close the window before the rain starts.",
    "The old clock in the hall stopped at midnight.",
]
GAPS_S = (1.0, 1.5, 2.0, 2.5, 3.0)


@pytest.fixture(scope="module")
def long_clip(
    tts: TextToSpeech, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[tuple[float, float]]]:
    """About 90 s: the sentences above with known silences between them, and where each
    sentence is spoken (start, end in seconds)."""
    rate = tts.sample_rate
    parts: list[Samples] = []
    spans: list[tuple[float, float]] = []
    position = 0
    for i, sentence in enumerate(LONG_CLIP):
        gap = np.zeros(int(GAPS_S[i % len(GAPS_S)] * rate), np.float32)
        speech = tts.synthesize(sentence).samples
        assert speech is not None
        spans.append(((position + len(gap)) / rate, (position + len(gap) + len(speech)) / rate))
        parts += [gap, speech]
        position += len(gap) + len(speech)
    parts.append(np.zeros(rate, np.float32))
    path = tmp_path_factory.mktemp("long") / "clip.wav"
    write_wav(path, np.concatenate(parts), rate)
    return path, spans


def test_long_audio_is_segmented_by_vad(
    long_clip: tuple[Path, list[tuple[float, float]]],
    transcriber: Transcriber,
    stt_config: SttConfig,
    detector: SpeechDetector,
) -> None:
    path, spans = long_clip
    progress: list[Progress] = []
    result = transcribe(path, transcriber, stt_config, detector, checkpoint=progress.append)
    assert 80 < result.duration_s < 100
    assert wer(words(" ".join(LONG_CLIP)), words(result.text)) <= 0.10, result.text
    # Segments are whisper's own phrases timed back to the clip through the laid-out speech:
    # in order, and none runs over a pause: each lies within one spoken sentence (a phrase
    # whisper joined across two sentences is cut at the pause between them).
    assert len(result.segments) >= len(LONG_CLIP)
    assert all(a.end <= b.start for a, b in itertools.pairwise(result.segments))
    for segment in result.segments:
        assert segment.start < segment.end
        assert any(
            start - 0.3 <= segment.start and segment.end <= end + 0.3 for start, end in spans
        ), segment
    # A segment that opens a sentence starts when that sentence does.
    openings = 0
    for sentence, (start, _) in zip(LONG_CLIP, spans, strict=True):
        head = words(sentence)[:3]
        for segment in result.segments:
            if words(segment.text)[:3] == head:
                assert abs(segment.start - start) < 0.5, (segment, start)
                openings += 1
    assert openings >= len(LONG_CLIP) // 4
    # Each checkpoint hands on what its window said, in order, once.
    assert tuple(itertools.chain.from_iterable(p.said for p in progress)) == result.segments
    assert all(a.done_s < b.done_s for a, b in itertools.pairwise(progress))


def test_without_vad_long_audio_is_cut_at_quiet_points(
    long_clip: tuple[Path, list[tuple[float, float]]],
    transcriber: Transcriber,
    stt_config: SttConfig,
) -> None:
    result = transcribe(long_clip[0], transcriber, stt_config, detector=None)
    assert all(s.end - s.start <= stt_config.max_segment_s + 0.01 for s in result.segments)
    assert len(result.segments) >= 4
    assert wer(words(" ".join(LONG_CLIP)), words(result.text)) <= 0.15, result.text


def test_a_checkpoint_can_stop_a_long_transcription(
    long_clip: tuple[Path, list[tuple[float, float]]],
    transcriber: Transcriber,
    stt_config: SttConfig,
    detector: SpeechDetector,
) -> None:
    class TimeUp(Exception):
        pass

    seen: list[Progress] = []

    def checkpoint(progress: Progress) -> None:
        seen.append(progress)
        if len(seen) == 2:
            raise TimeUp

    with pytest.raises(TimeUp):
        transcribe(long_clip[0], transcriber, stt_config, detector, checkpoint=checkpoint)
    assert len(seen) == 2


def test_continuous_speech_over_28_s_is_split(
    tts: TextToSpeech, transcriber: Transcriber, stt_config: SttConfig, models: Path, tmp_path: Path
) -> None:
    # Pauses too short for the VAD and a VAD cut-off of 60 s: one long region to split.
    detector = load_detector(VadConfig(models / "silero-vad", max_speech_s=60.0))
    sentences = LONG_CLIP[:13]
    tts_short_pause = TextToSpeech(
        tts.synthesizer, tts.phonemizer, TtsConfig(tts.config.model_dir, sentence_pause_s=0.1)
    )
    speech = tts_short_pause.synthesize(" ".join(sentences))
    assert speech.samples is not None and speech.duration_s > 32
    wav = write_wav(tmp_path / "run_on.wav", speech.samples, speech.sample_rate)
    detector.reset()
    detector.accept(decode_audio(wav, detector.sample_rate).samples)
    detector.flush()
    regions = [len(samples) / detector.sample_rate for _, samples in detector.pop()]
    assert max(regions) > 28.0, regions  # the VAD alone would hand whisper too much
    result = transcribe(wav, transcriber, stt_config, detector)
    assert len(result.segments) >= 2
    assert all(s.end - s.start <= 28.0 for s in result.segments)
    assert wer(words(" ".join(sentences)), words(result.text)) <= 0.15, result.text


@pytest.mark.parametrize("container", sorted(CONTAINERS))
def test_speech_in_every_container_transcribes(
    tts: TextToSpeech, transcriber: Transcriber, stt_config: SttConfig, container: str
) -> None:
    sentence = "Please remember to water the plants on Tuesday."
    speech = tts.synthesize(sentence)
    assert speech.samples is not None
    data = encode(speech.samples, speech.sample_rate, container)
    result = transcribe(data, transcriber, stt_config)
    assert wer(words(sentence), words(result.text)) <= 0.10, result.text


def test_bad_inputs_fail_with_specific_errors(
    transcriber: Transcriber, stt_config: SttConfig, tmp_path: Path
) -> None:
    with pytest.raises(EmptyAudioError):
        transcribe(b"", transcriber, stt_config)
    with pytest.raises(NotAudioError):
        transcribe(b"not audio at all, just some text " * 10, transcriber, stt_config)
    good = encode(np.zeros(16_000, np.float32), 16_000, "ogg-opus")
    with pytest.raises(AudioDecodeError):
        transcribe(good[:100], transcriber, stt_config)
    short_limit = SttConfig(stt_config.model_dir, max_seconds=0.5)
    with pytest.raises(AudioTooLongError, match=r"longer than the 0\.5 s limit"):
        transcribe(good, transcriber, short_limit)


def test_transcript_formats(
    tts: TextToSpeech, transcriber: Transcriber, stt_config: SttConfig, tmp_path: Path
) -> None:
    wav = speak_to_wav(tts, "Fresh bread is delivered every morning.", tmp_path / "f.wav")
    result: Transcript = transcribe(wav, transcriber, stt_config)
    srt, vtt = to_srt(result), to_vtt(result)
    assert srt.startswith("1\n00:00:00,000 --> 00:00:0")
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:0")
    assert "bread" in srt.lower() and "bread" in vtt.lower()
    assert json.loads(json.dumps(result.to_dict()))["segments"][0]["text"] == result.text


def test_ogg_opus_voice_note_matches_the_wav(tts: TextToSpeech, tmp_path: Path) -> None:
    text = "Here is your voice note. It has two sentences."
    wav = tts.synthesize_to_file(text, tmp_path / "note.wav", fmt="wav")
    ogg = tts.synthesize_to_file(text, tmp_path / "note.ogg", fmt="ogg")
    assert ogg.path is not None and wav.path is not None
    with av.open(str(ogg.path)) as container:
        stream = container.streams.audio[0]
        assert (stream.codec_context.name, stream.channels) == ("opus", 1)
    decoded = decode_audio(ogg.path, 48_000)
    assert decoded.duration_s == pytest.approx(wav.duration_s, rel=0.02)
    assert decode_audio(wav.path, tts.sample_rate).duration_s == pytest.approx(wav.duration_s)


def test_synthesis_is_deterministic_with_zero_noise(tts: TextToSpeech) -> None:
    first = tts.synthesize("Determinism matters for tests, 42 times over.").samples
    second = tts.synthesize("Determinism matters for tests, 42 times over.").samples
    assert first is not None and second is not None
    assert np.array_equal(first, second)


def test_streaming_yields_the_first_sentence_before_the_rest(tts: TextToSpeech) -> None:
    calls: list[int] = []

    class Counting:
        sample_rate = tts.sample_rate

        def synthesize(
            self, phonemes: Sequence[str], speaker_id: int = 0, speed: float = 1.0
        ) -> Samples:
            calls.append(len(phonemes))
            return tts.synthesizer.synthesize(phonemes, speaker_id, speed)

    counted = TextToSpeech(Counting(), tts.phonemizer, tts.config)
    stream = counted.stream("First sentence here. Second one follows. And a third!")
    first = next(stream)
    assert first.index == 0 and first.text == "First sentence here."
    assert len(calls) == 1
    rest = list(stream)
    assert [part.index for part in rest] == [1, 2]
    full = tts.synthesize("First sentence here. Second one follows. And a third!").samples
    assert full is not None
    assert np.array_equal(np.concatenate([first.samples, *(p.samples for p in rest)]), full)


def test_silent_output_is_an_error(tts: TextToSpeech) -> None:
    class Foreign:
        def phonemize(self, text: str) -> list[str]:
            return ["你好"]  # not in the voice's phoneme table: sherpa skips them all

    class Nothing:
        def phonemize(self, text: str) -> list[str]:
            return []

    with pytest.raises(SynthesisError, match="silence"):
        TextToSpeech(tts.synthesizer, Foreign(), tts.config).synthesize("Hello there.")
    with pytest.raises(SynthesisError, match="no phonemes"):
        TextToSpeech(tts.synthesizer, Nothing(), tts.config).synthesize("Hello there.")


def test_text_limits_fail_before_synthesis(tts: TextToSpeech, tmp_path: Path) -> None:
    with pytest.raises(TextTooLongError):
        tts.synthesize("word " * 5000)
    with pytest.raises(EmptyTextError):
        tts.synthesize_to_file("👍 **", tmp_path / "x.ogg")
    assert list(tmp_path.iterdir()) == []


def _strip_metadata(src: Path, dst: Path) -> None:
    """Copy an ONNX file without its metadata_props (field 14 of ModelProto)."""
    data = src.read_bytes()
    out = bytearray()
    pos = 0

    def varint(at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, at

    while pos < len(data):
        start = pos
        key, pos = varint(pos)
        wire = key & 7
        if wire == 0:
            _, pos = varint(pos)
        elif wire == 2:
            length, pos = varint(pos)
            pos += length
        else:
            pos += 8 if wire == 1 else 4
        if key >> 3 != 14:
            out += data[start:pos]
    dst.write_bytes(bytes(out))


def test_a_voice_without_metadata_is_refused(models: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare-voice"
    bare.mkdir()
    _strip_metadata(models / VOICE / "model.onnx", bare / "model.onnx")
    for name in ("tokens.txt", "model.onnx.json"):
        shutil.copy(models / VOICE / name, bare / name)
    with pytest.raises(ConfigError, match="lacks VITS metadata sample_rate, n_speakers"):
        validate_voice_dir(bare)
    with pytest.raises(ConfigError, match="add piper metadata to the model first"):
        load_tts(TtsConfig(bare))


def test_a_whisper_without_metadata_is_refused(models: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare-whisper"
    bare.mkdir()
    _strip_metadata(models / WHISPER / "encoder.int8.onnx", bare / "encoder.int8.onnx")
    for name in ("decoder.int8.onnx", "tokens.txt"):
        (bare / name).symlink_to(models / WHISPER / name)
    with pytest.raises(ConfigError, match="lacks whisper metadata n_mels"):
        validate_whisper_dir(bare)
    assert validate_whisper_dir(models / WHISPER).encoder.name == "encoder.int8.onnx"


def test_a_folder_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"this is not protobuf")
    (tmp_path / "tokens.txt").write_text("_ 0\n")
    with pytest.raises(ConfigError):
        validate_voice_dir(tmp_path)
    with pytest.raises(ConfigError, match="no encoder"):
        validate_whisper_dir(tmp_path)


def test_no_speech_gives_an_empty_transcript(
    transcriber: Transcriber, stt_config: SttConfig, detector: SpeechDetector
) -> None:
    rng = np.random.default_rng(0)
    hiss = (0.01 * rng.standard_normal(48_000)).astype(np.float32)
    for data in (silent_wav(3.0), encode(hiss, 16_000, "wav"), encode(tone(3.0), 16_000, "wav")):
        result = transcribe(data, transcriber, stt_config, detector)
        assert (result.text, result.segments) == ("", ())
        assert result.duration_s == pytest.approx(3.0)
        assert result.note == "no speech detected"
        assert result.to_dict()["note"] == "no speech detected"


def test_the_piper_voice_on_onnxruntime_speaks_what_sherpa_onnx_did(models: Path) -> None:
    """Same ids, same model, noise scales 0: our samples are sherpa-onnx's, plus the trailing
    near-silence sherpa cuts."""
    import sherpa_onnx

    from pipelines.engines.phonemizer import EspeakPhonemizer
    from pipelines.engines.vits import OrtVits

    folder = models / VOICE
    espeak = EspeakPhonemizer("en-us")
    phonemes = espeak.phonemize("The invoice was paid on Monday.") + espeak.phonemize("At nine.")
    ours = OrtVits(
        folder / "model.onnx", folder / "tokens.txt", 22050, noise_scale=0, noise_scale_w=0
    ).synthesize(phonemes)
    vits = sherpa_onnx.OfflineTtsVitsModelConfig(
        model=str(folder / "model.onnx"),
        tokens=str(folder / "tokens.txt"),
        noise_scale=0.0,
        noise_scale_w=0.0,
    )
    tts = sherpa_onnx.OfflineTts(
        sherpa_onnx.OfflineTtsConfig(
            model=sherpa_onnx.OfflineTtsModelConfig(vits=vits, num_threads=1),
            max_num_sentences=1,
        )
    )
    generation = sherpa_onnx.GenerationConfig()
    generation.phoneme_codepoints = [[ord(ch) for ch in part] for part in phonemes]
    theirs = np.asarray(tts.generate("", generation).samples, dtype=np.float32)
    assert len(phonemes) == 2 and theirs.size > 22050
    assert 0.8 * len(ours) < len(theirs) <= len(ours)
    np.testing.assert_allclose(ours[: len(theirs)], theirs, atol=1e-4)
    assert float(np.abs(ours[len(theirs) :]).max(initial=0.0)) < 0.02
