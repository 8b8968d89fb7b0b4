from __future__ import annotations

import io
import json
import os
import tracemalloc
import wave
from collections.abc import Sequence
from pathlib import Path

import av
import numpy as np
import pytest
from numpy.typing import NDArray

from pipelines.errors import PermanentError
from pipelines.speech.audio import (
    AudioDecodeError,
    AudioDecodeTimeoutError,
    AudioEncodeError,
    AudioTooLargeError,
    AudioTooLongError,
    EmptyAudioError,
    NotAudioError,
    OggOpusWriter,
    WavWriter,
    decode_audio,
    iter_audio,
    write_ogg_opus,
    write_wav,
)
from pipelines.speech.config import DecodeLimits
from pipelines.speech.stt import (
    Segment,
    Transcript,
    TranscriptFormat,
    format_transcript,
    to_srt,
    to_vtt,
)
from pipelines.speech.vad import split_long, window_chunks
from tests.support.audio_samples import (
    CONTAINERS,
    corrupt,
    encode,
    flac_claiming,
    silent_wav,
    tone,
    wav_claiming,
)

pytestmark = pytest.mark.unit

Samples = NDArray[np.float32]


def aligned_error(decoded: Samples, reference: Samples, max_lag: int = 2000) -> float:
    """RMS error after the best alignment (codecs add priming delay)."""
    window = reference[: len(reference) // 2]
    lag = max(
        range(max_lag),
        key=lambda k: float(np.dot(decoded[k : k + len(window)], window)),
    )
    piece = decoded[lag : lag + len(window)]
    return float(np.sqrt(np.mean((piece - window) ** 2)))


SOURCE = tone(3.0, 16_000)
LOSSY_RMS = {"wav": 1e-3, "flac": 1e-3}


@pytest.mark.parametrize("container", sorted(CONTAINERS))
@pytest.mark.parametrize("rate", [16_000, 22_050])
def test_every_container_decodes_to_mono_float32_at_the_target_rate(
    container: str, rate: int
) -> None:
    data = encode(SOURCE, 16_000, container)
    audio = decode_audio(data, rate)
    assert audio.samples.dtype == np.float32
    assert audio.samples.ndim == 1
    assert audio.sample_rate == rate
    assert audio.duration_s == pytest.approx(3.0, abs=0.08)
    reference = tone(3.0, rate)
    assert aligned_error(audio.samples, reference) < LOSSY_RMS.get(container, 0.03)


def test_path_and_bytes_give_the_same_samples(tmp_path: Path) -> None:
    data = encode(SOURCE, 16_000, "flac")
    path = tmp_path / "in.flac"
    path.write_bytes(data)
    assert np.array_equal(decode_audio(path, 16_000).samples, decode_audio(data, 16_000).samples)


def test_stereo_is_downmixed() -> None:
    data = encode(SOURCE, 16_000, "mp3")  # the mp3 sample is stereo
    with av.open(io.BytesIO(data)) as container:
        assert container.streams.audio[0].channels == 2
    samples = decode_audio(data, 16_000).samples
    assert aligned_error(samples, SOURCE) < 0.03


def test_resampling_keeps_a_tone_clean() -> None:
    """48 kHz -> 16 kHz through the proper resampler: no aliasing of a 7 kHz tone."""
    high = tone(1.0, 48_000, freq=7_000.0)
    alias = tone(1.0, 48_000, freq=9_000.0)  # would fold to 7 kHz if decimated naively
    out = decode_audio(encode(high + alias, 48_000, "wav"), 16_000).samples
    spectrum = np.abs(np.fft.rfft(out[2000:14000]))
    freqs = np.fft.rfftfreq(12000, 1 / 16_000)
    assert freqs[int(np.argmax(spectrum))] == pytest.approx(7_000, abs=10)
    assert (
        float(np.max(np.abs(out[2000:14000]))) < 0.4
    )  # the 9 kHz tone is gone, not folded onto 7 kHz


def test_decoding_streams_in_small_chunks() -> None:
    data = encode(tone(30.0, 16_000), 16_000, "ogg-opus")
    sizes = [len(chunk) for chunk in iter_audio(data, 16_000)]
    assert sum(sizes) == pytest.approx(30 * 16_000, abs=400)
    assert max(sizes) <= 16_000  # never more than a second at a time


def test_memory_stays_bounded_while_streaming() -> None:
    data = encode(tone(60.0, 16_000), 16_000, "flac")
    tracemalloc.start()
    total = sum(len(chunk) for chunk in iter_audio(data, 16_000))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert total == 60 * 16_000
    assert peak < 1_000_000  # 60 s of float32 would be 3.8 MB


def test_a_header_claiming_ten_hours_allocates_nothing_up_front() -> None:
    data = flac_claiming(seconds=36_000, actual_seconds=2.0)
    with av.open(io.BytesIO(data), "r") as container:
        assert container.duration is not None
        assert container.duration / 1e6 > 3_600  # FFmpeg believes the header
    tracemalloc.start()
    audio = decode_audio(data, 16_000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert audio.duration_s == pytest.approx(2.0, abs=0.01)
    assert peak < 2_000_000  # ten hours at 16 kHz float32 would be 2.3 GB


def test_a_streamed_wav_header_is_not_trusted() -> None:
    data = wav_claiming(seconds=36_000, actual_seconds=2.0)
    assert decode_audio(data, 16_000).duration_s == pytest.approx(2.0, abs=0.01)


def test_over_long_audio_stops_decoding_with_a_clear_error() -> None:
    data = encode(tone(12.0, 16_000), 16_000, "mp3")
    produced = 0
    with pytest.raises(AudioTooLongError, match=r"^audio is longer than the 10 s limit$"):
        for chunk in iter_audio(data, 16_000, DecodeLimits(max_seconds=10)):
            produced += len(chunk)
    assert 9.5 * 16_000 < produced <= 10 * 16_000
    assert DecodeLimits().max_seconds == 7200


def test_default_limit_message() -> None:
    data = encode(tone(1.0, 8_000), 8_000, "wav")
    with pytest.raises(AudioTooLongError, match=r"^audio is longer than the 0.5 s limit$"):
        decode_audio(data, 8_000, DecodeLimits(max_seconds=0.5))
    assert str(AudioTooLongError(f"audio is longer than the {7200.0:g} s limit")) == (
        "audio is longer than the 7200 s limit"
    )


def test_byte_limit() -> None:
    data = encode(SOURCE, 16_000, "wav")
    with pytest.raises(AudioTooLargeError, match=f"{len(data)} bytes, over the 1000 byte limit"):
        decode_audio(data, 16_000, DecodeLimits(max_bytes=1000))


def test_wall_time_bound() -> None:
    data = encode(SOURCE, 16_000, "wav")
    with pytest.raises(AudioDecodeTimeoutError, match="longer than the 0 s bound"):
        decode_audio(data, 16_000, DecodeLimits(max_wall_s=0))


def test_empty_inputs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.ogg"
    empty.touch()
    with pytest.raises(EmptyAudioError, match="empty \\(0 bytes\\)"):
        decode_audio(empty, 16_000)
    with pytest.raises(EmptyAudioError, match="empty \\(0 bytes\\)"):
        decode_audio(b"", 16_000)
    with pytest.raises(EmptyAudioError, match="zero samples"):
        decode_audio(silent_wav(0.0), 16_000)


def test_silence_is_audio_not_an_error() -> None:
    audio = decode_audio(silent_wav(1.0), 16_000)
    assert audio.duration_s == pytest.approx(1.0)
    assert not audio.samples.any()


PLAYLIST = b"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n"


@pytest.mark.parametrize(
    "data",
    [
        b"hello, this is plain text and certainly not audio " * 20,
        b'{"content": [{"type": "text", "text": "hi"}]}',
        b"\x89PNG\r\n\x1a\n" + bytes(200),
        PLAYLIST,
        b"ffconcat version 1.0\nfile '/etc/passwd'\n",
    ],
    ids=["text", "json", "png", "hls-playlist", "concat-script"],
)
def test_not_audio(data: bytes) -> None:
    with pytest.raises(NotAudioError, match="not a supported audio container"):
        decode_audio(data, 16_000)


def test_video_without_audio_is_not_audio() -> None:
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height = 32, 32
        for _ in range(5):
            frame = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    with pytest.raises(NotAudioError, match="no audio stream"):
        decode_audio(buf.getvalue(), 16_000)


def test_missing_file() -> None:
    with pytest.raises(NotAudioError, match="cannot read audio file"):
        decode_audio(Path("/nonexistent/x.ogg"), 16_000)


@pytest.mark.parametrize("container", sorted(CONTAINERS))
def test_truncated_header_is_a_decode_error(container: str) -> None:
    data = encode(SOURCE, 16_000, container)[:100]
    with pytest.raises(AudioDecodeError, match="corrupt"):
        decode_audio(data, 16_000)


@pytest.mark.parametrize("container", sorted(set(CONTAINERS) - {"adts-aac"}))
def test_scrambled_body_is_a_decode_error(container: str) -> None:
    # ADTS has no container header: noise after the first frames decodes as a short blip.
    with pytest.raises(AudioDecodeError, match="corrupt"):
        decode_audio(corrupt(encode(SOURCE, 16_000, container)), 16_000)


def test_a_cut_off_voice_note_keeps_what_arrived() -> None:
    data = encode(SOURCE, 16_000, "ogg-opus")
    audio = decode_audio(data[: len(data) // 2], 16_000)
    assert 0.5 < audio.duration_s < 2.5


def test_errors_are_permanent() -> None:
    for error in (AudioDecodeError, NotAudioError, EmptyAudioError, AudioTooLongError):
        assert issubclass(error, PermanentError)


def test_wav_writer_round_trip(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "out.wav", SOURCE, 16_000)
    with wave.open(str(path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16_000)
        assert wav.getnframes() == len(SOURCE)
    assert np.max(np.abs(decode_audio(path, 16_000).samples - SOURCE)) < 1e-4


def test_writers_are_atomic(tmp_path: Path) -> None:
    target = tmp_path / "voice.ogg"
    writer = OggOpusWriter(target, 22_050)
    writer.write(tone(1.0, 22_050))
    assert not target.exists()
    writer.close()
    assert target.exists()
    assert os.listdir(tmp_path) == ["voice.ogg"]


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "voice.wav"
    with pytest.raises(RuntimeError), WavWriter(target, 16_000) as writer:
        writer.write(SOURCE)
        raise RuntimeError("synthesis failed half way")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt", ["wav", "ogg"])
def test_zero_samples_are_refused(tmp_path: Path, fmt: str) -> None:
    writer = write_wav if fmt == "wav" else write_ogg_opus
    with pytest.raises(AudioEncodeError, match="zero samples"):
        writer(tmp_path / f"x.{fmt}", np.zeros(0, np.float32), 16_000)
    assert os.listdir(tmp_path) == []


def test_bad_samples_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AudioEncodeError, match="mono"):
        write_wav(tmp_path / "x.wav", np.zeros((2, 100), np.float32), 16_000)
    with pytest.raises(AudioEncodeError, match="NaN"):
        write_wav(tmp_path / "x.wav", np.full(100, np.nan, np.float32), 16_000)


def test_ogg_opus_is_a_voice_note(tmp_path: Path) -> None:
    speechlike = tone(4.7, 22_050)
    path = write_ogg_opus(tmp_path / "note.ogg", speechlike, 22_050)
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        assert container.format.name == "ogg"
        assert stream.codec_context.name == "opus"
        assert stream.channels == 1
        assert stream.sample_rate == 48_000
    audio = decode_audio(path, 22_050)
    assert audio.duration_s == pytest.approx(4.7, rel=0.02)
    assert aligned_error(audio.samples, speechlike) < 0.05
    assert 10_000 < path.stat().st_size < 25_000  # ~24 kbps for 4.7 s, plus pages


def test_ogg_opus_bitrate_is_honoured(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    noisy = (tone(10.0, 48_000) + 0.05 * rng.standard_normal(480_000)).astype(np.float32)
    sizes = {
        rate: write_ogg_opus(tmp_path / f"{rate}.ogg", noisy, 48_000, rate).stat().st_size
        for rate in (16_000, 32_000)
    }
    assert sizes[16_000] * 8 / 10 == pytest.approx(16_000, rel=0.15)
    assert sizes[32_000] * 8 / 10 == pytest.approx(32_000, rel=0.15)


def test_ogg_opus_streams_pages_while_sentences_arrive() -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    received: list[int] = []
    with os.fdopen(write_fd, "wb", buffering=0) as sink:
        writer = OggOpusWriter(sink, 22_050)
        for _ in range(4):
            writer.write(tone(1.0, 22_050))
            try:
                received.append(len(os.read(read_fd, 1 << 20)))
            except BlockingIOError:
                received.append(0)
        writer.close()
    tail = b""
    while True:
        try:
            piece = os.read(read_fd, 1 << 20)
        except BlockingIOError:
            break
        if not piece:
            break
        tail += piece
    os.close(read_fd)
    assert all(size > 0 for size in received), received  # bytes before the end
    assert tail


def test_ogg_opus_appends_sentence_by_sentence(tmp_path: Path) -> None:
    path = tmp_path / "speech.ogg"
    with OggOpusWriter(path, 22_050) as writer:
        for seconds in (1.2, 0.7, 2.1):
            writer.write(tone(seconds, 22_050))
    assert decode_audio(path, 48_000).duration_s == pytest.approx(4.0, rel=0.02)


# Cutting audio for whisper, and transcript formats (pure functions, no model) ------------


def speech_with_pauses(rate: int, pattern: Sequence[tuple[float, float]]) -> Samples:
    """Tone for each (speech seconds, pause seconds) pair."""
    parts: list[Samples] = []
    for speech_s, pause_s in pattern:
        parts += [tone(speech_s, rate), np.zeros(int(pause_s * rate), np.float32)]
    return np.concatenate(parts)


def test_split_long_cuts_in_the_pauses() -> None:
    rate = 16_000
    audio = speech_with_pauses(rate, [(12.0, 0.3), (9.0, 0.3), (15.0, 0.3), (20.0, 0.3), (8.0, 0)])
    pieces = split_long(audio, rate, max_s=28.0)
    assert all(len(piece) <= 28 * rate for _, piece in pieces)
    assert np.array_equal(np.concatenate([piece for _, piece in pieces]), audio)
    assert [offset for offset, _ in pieces] == list(
        np.cumsum([0] + [len(piece) for _, piece in pieces[:-1]])
    )
    for offset, _ in pieces[1:]:
        assert not audio[offset - 80 : offset + 80].any(), offset / rate  # inside a pause


def test_split_long_cuts_in_a_pause_not_in_the_closure_before_a_plosive() -> None:
    """Speech has short silent gaps inside words (the closure before a `p` or `t`, 30-80 ms),
    quieter than the breath between two words: the cut goes in the longer pause."""
    rate = 16_000
    closure = np.zeros(int(0.04 * rate), np.float32)  # silent, but inside a word
    pause = (0.01 * tone(0.25, rate)).astype(np.float32)  # a breath: quiet, not silent
    audio = np.concatenate([tone(12.0, rate), pause, tone(6.0, rate), closure, tone(15.0, rate)])
    pieces = split_long(audio, rate, max_s=28.0)
    assert len(pieces) == 2
    cut = pieces[1][0]
    assert 12.0 * rate < cut < 12.25 * rate, cut / rate


def test_split_long_cuts_unbroken_sound_too() -> None:
    audio = tone(70.0, 8_000)
    pieces = split_long(audio, 8_000, max_s=28.0)
    assert 3 <= len(pieces) <= 7
    assert all(28 * 8_000 / 3 <= len(piece) <= 28 * 8_000 for _, piece in pieces[:-1])
    [(offset, short)] = split_long(audio[:8_000], 8_000)
    assert offset == 0 and np.array_equal(short, audio[:8_000])


def test_window_chunks_stream_covers_everything_in_bounded_pieces() -> None:
    rate = 16_000
    audio = speech_with_pauses(rate, [(10.0, 0.5)] * 7)
    blocks = (audio[i : i + 1234] for i in range(0, len(audio), 1234))
    chunks = list(window_chunks(blocks, rate, max_chunk_s=28.0))
    assert np.array_equal(np.concatenate([c.samples for c in chunks]), audio)
    assert all(c.end_s - c.start_s <= 28.0 for c in chunks)
    assert [c.start_s for c in chunks[1:]] == pytest.approx([c.end_s for c in chunks[:-1]])
    for chunk in chunks[1:]:
        at = int(chunk.start_s * rate)
        assert not audio[at - 80 : at + 80].any()


TRANSCRIPT = Transcript(
    text="Hello <world> & more. Then --> this.",
    segments=(
        Segment(0.0, 2.5, "Hello <world> & more."),
        Segment(3725.25, 3727.0, "Then --> this."),
    ),
    language="en",
    duration_s=3728.0,
    processing_s=1.5,
)


def test_srt() -> None:
    assert to_srt(TRANSCRIPT) == (
        "1\n00:00:00,000 --> 00:00:02,500\nHello <world> & more.\n\n"
        "2\n01:02:05,250 --> 01:02:07,000\nThen -> this.\n"
    )


def test_vtt() -> None:
    assert to_vtt(TRANSCRIPT) == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nHello &lt;world&gt; &amp; more.\n\n"
        "01:02:05.250 --> 01:02:07.000\nThen -&gt; this.\n"
    )


def test_json_and_text() -> None:
    data = json.loads(format_transcript(TRANSCRIPT, "json"))
    assert data["segments"][1] == {
        "start": 3725.25,
        "end": 3727.0,
        "text": "Then --> this.",
        # what whisper's decoding said of its window (none here: a transcript built by hand)
        "tokens": [],
        "seek": 0,
        "avg_logprob": 0.0,
        "compression_ratio": 0.0,
        "no_speech_prob": 0.0,
    }
    assert data["duration_s"] == 3728.0
    assert format_transcript(TRANSCRIPT, TranscriptFormat.TEXT) == TRANSCRIPT.text + "\n"
    with pytest.raises(ValueError, match="'doc' is not a valid TranscriptFormat"):
        format_transcript(TRANSCRIPT, "doc")


def test_long_cues_are_wrapped() -> None:
    long = Transcript("w " * 60, (Segment(0, 20, ("word " * 60).strip()),), "en", 20, 1)
    lines = to_srt(long).splitlines()[2:]
    assert len(lines) > 1 and all(len(line) <= 42 for line in lines if line)


def test_empty_transcript_formats() -> None:
    empty = Transcript("", (), "en", 3.0, 0.1)
    assert to_srt(empty) == ""
    assert to_vtt(empty) == "WEBVTT\n"
    assert format_transcript(empty, "text") == ""
