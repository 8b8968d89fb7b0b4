"""Audio with no speech model prepared: the agent reads what is missing and how to get it
(code `model_missing`), never a folder on a server it cannot see; the folder is logged."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pipelines import ingest
from pipelines.errors import ConfigError, ModelMissing
from pipelines.outcomes import Outcome
from pipelines.render import job_notes
from pipelines.results import Status
from pipelines.speech.layout import detect_stt, detect_tts, engine_or_default, is_multilingual
from tests.support.factories import audio_block, result, wav_bytes
from workers.core.settings import Settings
from workers.doors.mcp.outcomes import ADVICE
from workers.doors.mcp.rewriter import MCP_FETCH
from workers.gateways.inline import InlineGateway

pytestmark = pytest.mark.unit


def test_a_folder_that_is_not_there_is_a_missing_model_named_without_its_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "models" / "whisper-tiny.en"
    for detect, what in ((detect_stt, "speech-to-text"), (detect_tts, "text-to-speech")):
        with caplog.at_level(logging.WARNING), pytest.raises(ModelMissing) as caught:
            detect(folder)
        said = str(caught.value)
        assert said.startswith(f"no {what} model prepared (whisper-tiny.en)")
        assert "`mcp-media models prepare`" in said and str(tmp_path) not in said
        assert caught.value.outcome is Outcome.MODEL_MISSING
        assert isinstance(caught.value, ConfigError)  # still a setting to fix, never retried
        assert str(folder) in caplog.text
        caplog.clear()


def test_asking_about_a_model_not_prepared_logs_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert engine_or_default("auto", tmp_path / "absent", "stt") == "native"
        assert is_multilingual(tmp_path / "absent") is False
    assert caplog.text == ""


def test_the_agent_reads_what_is_missing_and_how_to_fix_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(home)})
    gateway = InlineGateway(settings)
    try:
        rendered = ingest(
            result(audio_block(wav_bytes(), "audio/wav")), cache=settings.media_cache()
        )
        with caplog.at_level(logging.WARNING):
            handles = gateway.wait(gateway.submit(rendered.jobs), 60)
    finally:
        gateway.close(finish_jobs=True)
    (handle,) = handles
    envelope = handle.envelope
    assert envelope is not None and envelope.status is Status.FAILED
    assert envelope.outcome is Outcome.MODEL_MISSING
    (note,) = job_notes(handles, MCP_FETCH, ADVICE)[rendered.media[0].sha256]
    assert note.startswith("[audio transcript unavailable: ModelMissing: no speech-to-text")
    assert "`mcp-media models prepare`" in note and ADVICE[Outcome.MODEL_MISSING] in note
    assert str(home) not in note and "folder" not in note
    assert str(home / "models") in caplog.text  # where it was looked for: in the log
