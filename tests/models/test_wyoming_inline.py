"""`mcp-media wyoming --inline`: no broker, no workers; the jobs run in the door's own
process on the same job path, and describe lists what its own folders serve."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from wyoming.asr import Transcript
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from tests.models.test_wyoming import SENTENCE, VOICE, audio_of, heard, transcribe
from tests.support.cluster import ROOT
from tests.support.net import free_port, wait_for_port
from tests.support.serve import DETERMINISTIC_VOICE
from tests.support.wyoming_door import WyomingDoor, run, wyoming_command

pytestmark = pytest.mark.models


def test_inline_door_describes_speaks_and_transcribes(models_home: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "models").symlink_to(models_home / "models")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env.update(MCP_MEDIA_HOME=str(home), **DETERMINISTIC_VOICE)
    port = free_port()
    log = tmp_path / "wyoming.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            wyoming_command("--inline", "--uri", f"tcp://127.0.0.1:{port}"),
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    try:
        wait_for_port(port, proc, log)
        door = WyomingDoor(port, proc, log)
        info = Info.from_event(run(door.client(), [Describe().event()], ["info"])[-1])
        assert info.asr[0].models[0].name == "whisper-tiny.en"
        assert VOICE in {voice.name for voice in info.tts[0].voices}
        request = Synthesize(SENTENCE, SynthesizeVoice(name=VOICE)).event()
        spoken = run(door.client(), [request], ["audio-stop"])
        assert spoken[-1].type == "audio-stop", spoken[-1]
        pcm = audio_of(spoken)
        said = transcribe(door, pcm, 24_000, 2, 1, "en")
        assert heard(SENTENCE, Transcript.from_event(said).text) >= 0.8, said
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
