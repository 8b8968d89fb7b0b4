"""Voices by name: Kokoro-FastAPI's blend spelling, what each name resolves to, and the
speech request a door builds from `model` + `voice` (one voice never answers for another)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.speech.blend import BlendError, Part, canonical, mix, parse_blend
from pipelines.speech.request import SynthesisRequest
from workers.core.catalog import VoiceNotFound
from workers.core.offers import prepared_voices
from workers.core.settings import Settings
from workers.core.stage_configs import tts_model
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError
from workers.doors.api.speech import _request
from workers.gateways.inline import InlineGateway, own_catalog

pytestmark = pytest.mark.unit

KOKORO = [
    ("af_heart", "en-us"), ("af_bella", "en-us"), ("af_sky", "en-us"), ("bf_emma", "en-gb"),
    ("zf_xiaobei", "zh"),
]  # fmt: skip
PIPER = "piper-en_US-joe-medium"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A home whose models/ holds a piper folder and a Kokoro folder (their small files)."""
    settings = Settings(home=tmp_path / "home")
    kokoro = settings.models_root / "kokoro-v1.0"
    piper = settings.models_root / PIPER
    for folder in (kokoro, piper):
        folder.mkdir(parents=True)
        (folder / "model.onnx").write_bytes(b"onnx")
        (folder / "tokens.txt").write_text("a 1\n")
    (kokoro / "voices.bin").write_bytes(b"\0" * 16)
    catalogue = [
        {"name": n, "language": lang, "speaker_id": i} for i, (n, lang) in enumerate(KOKORO)
    ]
    (kokoro / "voices.json").write_text(json.dumps(catalogue))
    (piper / "model.onnx.json").write_text(json.dumps({"espeak": {"voice": "en-us"}}))
    return settings


def test_blends_read_as_kokoro_fastapi_spells_them() -> None:
    assert parse_blend("af_bella+af_sky") == (Part("af_bella", 1, 1), Part("af_sky", 1, 1))
    assert parse_blend(" af_bella(2) + af_sky(1) ") == (
        Part("af_bella", 2, 1),
        Part("af_sky", 1, 1),
    )
    assert parse_blend("af_bella(0.5)-af_sky") == (Part("af_bella", 0.5, 1), Part("af_sky", 1, -1))
    assert canonical(parse_blend("af_bella(1)+af_sky(2.50)")) == "af_bella+af_sky(2.5)"
    assert canonical(parse_blend("af_bella(3)")) == "af_bella"
    # the weighted average, normalised by the sum of the weights
    assert mix(parse_blend("af_bella(3)+af_sky(1)"), {"af_bella": 1, "af_sky": 2}) == (
        (1, 0.75),
        (2, 0.25),
    )
    assert mix(parse_blend("af_bella+af_sky"), {"af_bella": 1, "af_sky": 2}) == ((1, 0.5), (2, 0.5))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("af_bella+", "empty part"),
        ("+af_bella", "empty part"),
        ("af_bella++af_sky", "empty part"),
        ("af_bella(x)+af_sky", "not a voice name with an optional weight"),
        ("af_bella(2)(3)+af_sky", "not a voice name with an optional weight"),
        ("af_bella(0)+af_sky", "weight 0"),
        ("+".join(["af_bella"] * 9), "more than 8 voices"),
    ],
)
def test_a_bad_blend_is_refused_saying_why(spec: str, message: str) -> None:
    with pytest.raises(BlendError, match=message.replace("(", r"\(")):
        parse_blend(spec)


def test_every_prepared_voice_is_listed_by_its_own_name(settings: Settings) -> None:
    listed = {v.id: (v.language, v.model) for v in prepared_voices(settings)}
    assert listed[PIPER] == ("en-us", PIPER)
    assert listed["zf_xiaobei"] == ("zh", "kokoro-v1.0")
    assert listed["af_bella"] == ("en-us", "kokoro-v1.0")
    assert "kokoro-v1.0" not in listed  # a folder of voices, not a voice


def resolve_voice(settings: Settings, voice: str, model: str | None = None) -> str:
    """As a door resolves it: against the catalog this node's workers would announce."""
    return own_catalog(settings).resolve_voice(voice, model, settings.api.voices)


def aliases(settings: Settings) -> dict[str, str]:
    return own_catalog(settings).aliases(settings.api.voices)


def test_names_resolve_to_the_voice_they_name(settings: Settings) -> None:
    assert resolve_voice(settings, "af_heart") == "af_heart"
    assert resolve_voice(settings, "zf_xiaobei") == "zf_xiaobei"
    assert resolve_voice(settings, "af_bella", "kokoro-v1.0") == "af_bella"
    assert resolve_voice(settings, PIPER, PIPER) == PIPER
    assert resolve_voice(settings, "alloy") == PIPER  # the configured voice speaks English
    assert resolve_voice(settings, "alloy", "kokoro-v1.0") == "kokoro-v1.0"  # its first voice
    assert resolve_voice(settings, "af_bella(2)+af_sky(1)") == "af_bella(2)+af_sky"
    assert resolve_voice(settings, "af_bella + af_heart", "kokoro-v1.0") == "af_bella+af_heart"


@pytest.mark.parametrize(
    ("voice", "model", "message"),
    [
        ("nobody", None, "unknown voice 'nobody': use one of alloy"),
        ("af_bella", PIPER, "belongs to model 'kokoro-v1.0'"),
        ("af_bella+zf_xiaobei", None, "mixes languages"),
        ("af_bella+nobody", None, "'nobody' in blend"),
        (f"af_bella+{PIPER}", None, "not a served Kokoro voice"),
        ("af_bella++af_sky", None, "empty part"),
    ],
)
def test_an_unknown_voice_says_where_to_look(
    settings: Settings, voice: str, model: str | None, message: str
) -> None:
    with pytest.raises(VoiceNotFound, match=message):
        resolve_voice(settings, voice, model)


def test_openai_names_speak_english_whatever_the_default_voice(settings: Settings) -> None:
    settings.tts.voice = "zf_xiaobei"
    # an English voice of the same (loaded) model first
    assert set(aliases(settings).values()) == {"af_heart"}
    settings.tts.voice = "nothing-prepared"  # nothing says what it speaks: kept
    assert aliases(settings)["alloy"] == "nothing-prepared"
    settings.tts.voice = "bf_emma"
    assert aliases(settings)["nova"] == "bf_emma"  # English already: kept
    settings.api.voices = {"nova": "af_bella"}
    assert resolve_voice(settings, "nova") == "af_bella"  # API__VOICES still overrides


def _speech(settings: Settings, **body: object) -> SynthesisRequest:
    ctx = ApiContext(settings, key="k" * 24, gateway=InlineGateway(settings))
    params, *_ = _request(ctx, own_catalog(settings), {"input": "Hello.", **body})
    return SynthesisRequest.from_json(params)


def test_model_and_voice_together_pick_the_voice(settings: Settings) -> None:
    bella = _speech(settings, model="kokoro-v1.0", voice="af_bella")
    emma = _speech(settings, model="kokoro-v1.0", voice="bf_emma")
    assert (bella.voice, emma.voice) == ("af_bella", "bf_emma")
    assert bella.to_bytes() != emma.to_bytes()  # two voices, two cache keys
    assert _speech(settings, model="tts-1", voice="af_bella") == bella
    assert _speech(settings, model="tts-1", voice={"id": "zf_xiaobei"}).voice == "zf_xiaobei"
    with pytest.raises(ApiError) as refused:
        _speech(settings, model="tts-1", voice="af_heart+zf_xiaobei")
    assert refused.value.status == 400 and refused.value.code == "unknown_voice"
    with pytest.raises(ApiError) as refused:
        _speech(settings, model="kokoro-v2", voice="af_heart")
    assert refused.value.code == "model_not_found"


def test_a_worker_finds_a_blends_folder_by_its_first_voice(settings: Settings) -> None:
    kokoro = settings.models_root / "kokoro-v1.0"
    assert tts_model(settings, "af_bella(2)+af_sky", strict=True) == (kokoro, "af_bella(2)+af_sky")
    # a folder not prepared here keeps its name (a client computing versions without models)
    unknown = "piper-en_GB-alan-low"
    assert tts_model(settings, unknown) == (settings.models_root / unknown, "")
    assert tts_model(settings, "odd(voice)-name") == (settings.models_root / "odd(voice)-name", "")
