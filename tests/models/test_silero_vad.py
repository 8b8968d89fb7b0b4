"""The silero detector on the prepared model: where speech is, in both model layouts."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from pipelines.engines.registry import load_detector, load_tts
from pipelines.engines.silero import SileroVad
from pipelines.errors import ConfigError
from pipelines.speech.config import TtsConfig
from pipelines.speech.vad import SpeechDetector, VadConfig, validate_vad_model

pytestmark = pytest.mark.models

RATE = 16_000
SENTENCES = ("The ferry leaves at noon.", "Please bring the signed contract.", "Thank you.")
GAPS_S = (1.0, 2.0, 1.5, 1.0)  # before each sentence, and after the last


@pytest.fixture(scope="module")
def clip(models_home: Path) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Three sentences at 16 kHz with known silences around them, and where each one is."""
    voice = load_tts(TtsConfig(models_home / "models" / "piper-en_US-joe-medium", noise_scale=0.0))
    parts, spoken, position = [], [], 0.0
    for gap_s, sentence in zip(GAPS_S, SENTENCES, strict=False):
        speech = voice.synthesize(sentence).samples
        assert speech is not None
        at_16k = np.interp(
            np.arange(0, len(speech) * RATE / voice.sample_rate) * voice.sample_rate / RATE,
            np.arange(len(speech)),
            speech,
        ).astype(np.float32)
        parts += [np.zeros(int(gap_s * RATE), np.float32), at_16k]
        position += gap_s
        spoken.append((position, position + len(at_16k) / RATE))
        position += len(at_16k) / RATE
    parts.append(np.zeros(int(GAPS_S[-1] * RATE), np.float32))
    return np.concatenate(parts), spoken


def regions(
    detector: SpeechDetector, audio: np.ndarray, block: int
) -> list[tuple[int, np.ndarray]]:
    detector.reset()
    found = []
    for start in range(0, len(audio), block):
        detector.accept(audio[start : start + block])
        found += detector.pop()
    detector.flush()
    return found + detector.pop()


def test_each_sentence_is_one_region_with_its_padding(
    models_home: Path, clip: tuple[np.ndarray, list[tuple[float, float]]]
) -> None:
    audio, spoken = clip
    detector = load_detector(VadConfig(models_home / "models" / "silero-vad"))
    found = regions(detector, audio, 1470)  # the block size PyAV hands over for a 22 kHz WAV
    assert len(found) == len(SENTENCES)
    for (start, samples), (begins, ends) in zip(found, spoken, strict=True):
        # The region covers the sentence, with at most its padding (0.2 s) and a window more.
        assert begins - 0.3 <= start / RATE <= begins + 0.1
        assert ends - 0.1 <= (start + len(samples)) / RATE <= ends + 0.3
        assert np.array_equal(samples, audio[start : start + len(samples)])


def test_the_sequence_and_streaming_exports_find_the_same_regions(
    models_home: Path, clip: tuple[np.ndarray, list[tuple[float, float]]]
) -> None:
    audio, _ = clip
    folder = models_home / "models" / "silero-vad"
    assert validate_vad_model(folder).name == "silero_vad_16k_sequence.onnx"
    sequence = SileroVad(folder / "silero_vad_16k_sequence.onnx")
    streaming = SileroVad(folder / "silero_vad.onnx")
    ours = [(s, len(x)) for s, x in regions(sequence, audio, 16_000)]
    theirs = [(s, len(x)) for s, x in regions(streaming, audio, 16_000)]
    assert ours == theirs and ours
    # The block size the audio arrives in changes nothing.
    assert [(s, len(x)) for s, x in regions(sequence, audio, 333)] == ours


def test_speech_without_pauses_is_handed_on_in_contiguous_pieces(
    models_home: Path, clip: tuple[np.ndarray, list[tuple[float, float]]]
) -> None:
    audio, spoken = clip
    begins, ends = spoken[1]
    sentence = audio[int(begins * RATE) : int(ends * RATE)]
    detector = SileroVad(
        models_home / "models" / "silero-vad" / "silero_vad_16k_sequence.onnx", max_speech_s=0.5
    )
    found = regions(detector, sentence, 4000)
    assert len(found) >= 2
    for (start, samples), (following, _) in itertools.pairwise(found):
        assert start + len(samples) == following  # no gap, no overlap


def test_a_region_at_its_longest_is_cut_in_a_short_pause_not_mid_word(
    models_home: Path, clip: tuple[np.ndarray, list[tuple[float, float]]]
) -> None:
    """Two sentences 0.3 s apart (shorter than the 0.5 s that ends a region), and a limit that
    falls inside the second one: the cut goes in the pause between them, where silero cuts,
    not at the limit in the middle of a word."""
    audio, spoken = clip
    first, second = (audio[int(b * RATE) : int(e * RATE)] for b, e in spoken[:2])
    pause = np.zeros(int(0.3 * RATE), np.float32)
    speech = np.concatenate([first, pause, second])
    limit_s = (len(first) + len(pause)) / RATE + 0.5
    detector = SileroVad(
        models_home / "models" / "silero-vad" / "silero_vad_16k_sequence.onnx",
        max_speech_s=limit_s,
    )
    found = regions(detector, np.concatenate([pause, speech, pause, pause]), 4000)
    assert len(found) == 2, [(s / RATE, len(x) / RATE) for s, x in found]
    (start, samples), (following, _) = found
    assert start + len(samples) == following  # contiguous: nothing lost at the cut
    pause_begins = len(pause) + len(first)
    assert pause_begins <= following <= pause_begins + len(pause), following / RATE


@pytest.mark.parametrize("sentence", range(len(SENTENCES)))
def test_the_short_rest_of_a_cut_region_is_kept(
    models_home: Path, clip: tuple[np.ndarray, list[tuple[float, float]]], sentence: int
) -> None:
    """A limit that falls 0.12 s before a sentence's speech ends leaves a rest shorter than
    `min_speech_s` (0.25 s): it is the end of the sentence, not a click, and is kept."""
    audio, spoken = clip
    begins, ends = spoken[sentence]
    said = audio[int(begins * RATE) : int(ends * RATE)]
    model = models_home / "models" / "silero-vad" / "silero_vad_16k_sequence.onnx"
    ((start, whole),) = regions(SileroVad(model, pad_s=0.0), said, 4000)
    limit_s = (len(whole) - 0.12 * RATE) / RATE
    found = regions(SileroVad(model, pad_s=0.0, max_speech_s=limit_s), said, 4000)
    assert len(found) == 2, [(s / RATE, len(x) / RATE) for s, x in found]
    assert found[0][0] == start
    assert found[1][0] + len(found[1][1]) == start + len(whole)  # all the speech, to its end


def test_of_two_pauses_the_longer_is_where_a_region_is_cut(
    models_home: Path, clip: tuple[np.ndarray, list[tuple[float, float]]]
) -> None:
    """A breath of 0.35 s, then one of 0.15 s, then speech past the limit: the cut goes in
    the longer one, as silero's does, not in the last (which may be a dip inside a word)."""
    audio, spoken = clip
    first, second, third = (audio[int(b * RATE) : int(e * RATE)] for b, e in spoken)
    long, short = np.zeros(int(0.35 * RATE), np.float32), np.zeros(int(0.15 * RATE), np.float32)
    speech = np.concatenate([first, long, second, short, third])
    limit_s = (len(speech) - len(third) / 2) / RATE
    detector = SileroVad(
        models_home / "models" / "silero-vad" / "silero_vad_16k_sequence.onnx",
        max_speech_s=limit_s,
    )
    found = regions(detector, np.concatenate([long, speech, long, long]), 4000)
    assert len(found) == 2, [(s / RATE, len(x) / RATE) for s, x in found]
    cut = found[1][0] - len(long)
    assert len(first) <= cut <= len(first) + len(long), cut / RATE


def test_a_file_that_is_not_a_silero_model_is_refused(models_home: Path, tmp_path: Path) -> None:
    whisper = models_home / "models" / "whisper-tiny.en" / "encoder.int8.onnx"
    with pytest.raises(ConfigError, match="not a silero VAD model"):
        SileroVad(whisper)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(ConfigError):
        load_detector(VadConfig(junk))
