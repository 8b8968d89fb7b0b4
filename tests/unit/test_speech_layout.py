"""Which engine runs a model folder, told from file names: sherpa-onnx's release folders
(made here of empty files), ours, and folders that are neither, refused naming what lacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.errors import ConfigError
from pipelines.speech.layout import Engine, choose_engine, detect_stt, detect_tts, stt_engine
from workers.core.settings import Settings
from workers.core.stage_configs import stt_config, stt_version, tts_version
from workers.provisioning.models import list_models

pytestmark = pytest.mark.unit


def folder(root: Path, name: str, *files: str) -> Path:
    made = root / name
    made.mkdir(parents=True)
    for file in files:
        if file.endswith("/"):
            (made / file).mkdir()
        else:
            (made / file).write_bytes(b"")
    return made


@pytest.mark.parametrize(
    ("name", "files", "family", "roles"),
    [
        (
            "sherpa-onnx-whisper-tiny.en",
            ["tiny.en-encoder.onnx", "tiny.en-encoder.int8.onnx", "tiny.en-decoder.onnx",
             "tiny.en-decoder.int8.onnx", "tiny.en-tokens.txt"],
            "whisper",
            {"encoder": "tiny.en-encoder.int8.onnx", "decoder": "tiny.en-decoder.int8.onnx",
             "tokens": "tiny.en-tokens.txt"},
        ),
        (
            "sherpa-onnx-sense-voice-zh-en-ja-ko-yue-2024-07-17",
            ["model.onnx", "model.int8.onnx", "tokens.txt"],
            "sense_voice",
            {"model": "model.int8.onnx", "tokens": "tokens.txt"},
        ),
        (
            "sherpa-onnx-paraformer-zh-2023-09-14",
            ["model.int8.onnx", "tokens.txt"],
            "paraformer",
            {"model": "model.int8.onnx", "tokens": "tokens.txt"},
        ),
        (
            "sherpa-onnx-zipformer-en-2023-06-26",
            ["encoder-epoch-99-avg-1.onnx", "decoder-epoch-99-avg-1.onnx",
             "joiner-epoch-99-avg-1.onnx", "joiner-epoch-99-avg-1.int8.onnx", "tokens.txt"],
            "transducer",
            {"encoder": "encoder-epoch-99-avg-1.onnx", "joiner": "joiner-epoch-99-avg-1.int8.onnx",
             "decoder": "decoder-epoch-99-avg-1.onnx"},
        ),
        (
            "sherpa-onnx-moonshine-tiny-en-int8",
            ["preprocess.onnx", "encode.int8.onnx", "uncached_decode.int8.onnx",
             "cached_decode.int8.onnx", "tokens.txt"],
            "moonshine",
            {"preprocessor": "preprocess.onnx", "encoder": "encode.int8.onnx",
             "uncached_decoder": "uncached_decode.int8.onnx",
             "cached_decoder": "cached_decode.int8.onnx"},
        ),
    ],
)  # fmt: skip
def test_sherpa_recognizer_folders_are_read_by_their_files(
    tmp_path: Path, name: str, files: list[str], family: str, roles: dict[str, str]
) -> None:
    layout = detect_stt(folder(tmp_path, name, *files))
    assert (layout.family, layout.native) == (family, False)
    assert {role: layout.files[role].name for role in roles} == roles
    assert choose_engine("auto", layout) is Engine.SHERPA


def test_our_whisper_folder_is_native_and_sherpa_onnx_runs_it_too(tmp_path: Path) -> None:
    ours = folder(
        tmp_path, "whisper-tiny.en", "encoder.int8.onnx", "decoder.int8.onnx", "tokens.txt",
        "mel_filters.npy",
    )  # fmt: skip
    assert stt_engine("auto", ours) is Engine.NATIVE
    assert stt_engine("sherpa-onnx", ours) is Engine.SHERPA  # through its sherpa-layout copy


@pytest.mark.parametrize(
    ("name", "files", "family", "native"),
    [
        ("vits-piper-en_US-amy-low",
         ["en_US-amy-low.onnx", "en_US-amy-low.onnx.json", "tokens.txt", "espeak-ng-data/"],
         "vits", False),
        ("vits-zh-aishell3", ["vits-aishell3.onnx", "lexicon.txt", "tokens.txt"], "vits", False),
        ("matcha-icefall-en_US-ljspeech",
         ["model-steps-3.onnx", "vocos-22khz-univ.onnx", "tokens.txt", "espeak-ng-data/"],
         "matcha", False),
        ("kokoro-multi-lang-v1_0",
         ["model.onnx", "voices.bin", "tokens.txt", "espeak-ng-data/", "lexicon-us-en.txt"],
         "kokoro", False),
        ("piper-en_US-joe-medium", ["model.onnx", "model.onnx.json", "tokens.txt"], "vits", True),
        ("kokoro-v1.0", ["model.onnx", "voices.bin", "voices.json", "tokens.txt"], "kokoro", True),
    ],
)  # fmt: skip
def test_voice_folders_are_read_by_their_files(
    tmp_path: Path, name: str, files: list[str], family: str, native: bool
) -> None:
    layout = detect_tts(folder(tmp_path, name, *files))
    assert (layout.family, layout.native) == (family, native)
    assert layout.files["tokens"].name == "tokens.txt"
    expected = Engine.NATIVE if native else Engine.SHERPA
    assert choose_engine("auto", layout) is expected
    assert choose_engine("sherpa-onnx", layout) is Engine.SHERPA  # sherpa reads ours too


def test_the_native_engine_refuses_a_sherpa_folder(tmp_path: Path) -> None:
    theirs = folder(tmp_path, "amy", "amy.onnx", "amy.onnx.json", "tokens.txt", "espeak-ng-data/")
    with pytest.raises(ConfigError, match="sherpa-onnx's layout, which the native engines"):
        choose_engine("native", detect_tts(theirs))
    with pytest.raises(ConfigError, match="unknown speech engine 'onnx': auto, native"):
        choose_engine("onnx", detect_tts(theirs))


@pytest.mark.parametrize(
    ("kind", "files", "missing"),
    [
        ("stt", ["preprocess.onnx", "encode.onnx", "uncached_decode.onnx", "tokens.txt"],
         "Moonshine folder but has no cached_decoder file"),
        ("stt", ["tiny-encoder.onnx", "tiny-decoder.onnx"], "whisper folder but has no tokens"),
        ("stt", ["encoder.onnx", "joiner.onnx", "tokens.txt"],
         "transducer folder but has no decoder file"),
        ("stt", ["README.md"], "is no speech recognizer folder: expected mel_filters.npy"),
        ("tts", ["model-steps-3.onnx", "tokens.txt"], "Matcha folder but has no vocoder file"),
        ("tts", ["model.onnx", "voices.bin"], "Kokoro folder but has no tokens file"),
        ("tts", ["notes.txt"], "is no voice folder: expected a piper voice"),
    ],
)  # fmt: skip
def test_a_bad_folder_is_refused_naming_what_it_lacks(
    tmp_path: Path, kind: str, files: list[str], missing: str
) -> None:
    bad = folder(tmp_path, "some-model", *files)
    with pytest.raises(ConfigError, match=missing):
        (detect_stt if kind == "stt" else detect_tts)(bad)


def test_a_sherpa_folder_that_is_neither_sense_voice_nor_paraformer_says_so(
    tmp_path: Path,
) -> None:
    bare = folder(tmp_path, "my-model", "model.onnx", "tokens.txt")
    with pytest.raises(ConfigError, match="neither its name nor its metadata"):
        detect_stt(bare)


def test_results_of_the_two_engines_never_share_a_key(tmp_path: Path) -> None:
    models = tmp_path / "models"
    folder(models, "piper-en_US-joe-medium", "model.onnx", "model.onnx.json", "tokens.txt")
    folder(
        models, "whisper-tiny.en", "encoder.int8.onnx", "decoder.int8.onnx", "tokens.txt",
        "mel_filters.npy",
    )  # fmt: skip
    theirs = folder(models, "sherpa-onnx-whisper-base", "base-encoder.onnx",
                    "base-decoder.onnx", "base-tokens.txt")  # fmt: skip
    env = {"MCP_MEDIA_HOME": str(tmp_path)}
    native = Settings.from_env(env)
    forced = Settings.from_env({**env, "MCP_MEDIA_TTS__ENGINE": "sherpa-onnx"})
    assert Settings.from_env({**env, "MCP_MEDIA_TTS__ENGINE": "native"}).tts.engine == "native"
    assert tts_version(native) != tts_version(forced)
    auto = Settings.from_env({**env, "MCP_MEDIA_STT__MODEL_DIR": str(theirs)})
    by_name = Settings.from_env(
        {**env, "MCP_MEDIA_STT__MODEL_DIR": str(theirs), "MCP_MEDIA_STT__ENGINE": "sherpa-onnx"}
    )
    assert stt_version(auto) == stt_version(by_name) != stt_version(native)


def test_models_list_shows_each_folders_engine_and_folders_users_bring(tmp_path: Path) -> None:
    models = tmp_path / "models"
    folder(models, "sherpa-onnx-moonshine-tiny-en-int8", "preprocess.onnx", "encode.int8.onnx",
           "uncached_decode.int8.onnx", "cached_decode.int8.onnx", "tokens.txt")  # fmt: skip
    folder(models, "vits-piper-en_US-amy-low", "en_US-amy-low.onnx", "tokens.txt",
           "espeak-ng-data/")  # fmt: skip
    folder(models, "not-a-model", "notes.txt")
    listed = {info.name: info.to_json() for info in list_models(tmp_path)}
    assert set(listed) == {"sherpa-onnx-moonshine-tiny-en-int8", "vits-piper-en_US-amy-low"}
    moonshine = listed["sherpa-onnx-moonshine-tiny-en-int8"]
    assert (moonshine["kind"], moonshine["engine"]) == ("stt", "sherpa-onnx")
    assert moonshine["source"] == "brought (moonshine)"
    piper = listed["vits-piper-en_US-amy-low"]
    assert (piper["kind"], piper["engine"], piper["source"]) == (
        "tts",
        "sherpa-onnx",
        "brought (vits)",
    )


def test_a_sherpa_recognizer_other_than_whisper_detects_its_language(tmp_path: Path) -> None:
    sense = folder(tmp_path, "sherpa-onnx-sense-voice-zh-en", "model.int8.onnx", "tokens.txt")
    whisper = folder(tmp_path, "sherpa-onnx-whisper-x", "x-encoder.onnx", "x-decoder.onnx",
                     "x-tokens.txt")  # fmt: skip
    env = {"MCP_MEDIA_HOME": str(tmp_path)}
    for model, language in ((sense, ""), (whisper, "en")):  # an unreadable whisper: English
        settings = Settings.from_env({**env, "MCP_MEDIA_STT__MODEL_DIR": str(model)})
        assert stt_config(settings).language == language
        assert stt_config(settings).engine == "auto"
