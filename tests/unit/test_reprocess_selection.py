"""Reprocess selects inputs only (what tools returned or users uploaded), never our outputs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey, Status
from pipelines.sniff import Format
from tests.support.factories import wav_bytes
from workers.core.operations import Selection
from workers.core.settings import Settings
from workers.gateways.reprocess import Tally, mark_earlier_outputs, select

pytestmark = pytest.mark.unit


def test_spoken_replies_are_never_selected_for_transcription(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path / "home")})
    cache = settings.media_cache()
    uploaded = cache.store_bytes(wav_bytes(0.25), MediaKind.AUDIO, mime="audio/wav")
    spoken = cache.store_bytes(wav_bytes(0.5), MediaKind.AUDIO, mime="audio/wav")
    pcm = Format("pcm", ".pcm", "audio/pcm")  # how a `pcm` reply is stored: no header at all
    headerless = cache.store_bytes(b"\x00\x01" * 4000, MediaKind.AUDIO, validate=lambda _p, _h: pcm)
    for reply in (spoken, headerless):
        cache.mark_output(reply.sha256)
    tally = Tally()
    chosen = list(select(settings, Selection(kinds=(MediaKind.AUDIO,)), tally))
    assert [item.sha256 for item in chosen] == [uploaded.sha256]
    assert tally.selected == 1
    assert cache.is_output(spoken.sha256) and not cache.is_output(uploaded.sha256)
    marker = cache.root / "outputs" / spoken.sha256
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600
    assert stat.S_IMODE(marker.parent.stat().st_mode) == 0o700
    cache.mark_output(spoken.sha256)  # marking twice is harmless
    assert cache.is_output(spoken.sha256)


def test_replies_spoken_before_outputs_were_marked_are_found_by_their_results(
    tmp_path: Path,
) -> None:
    """A cache from before the output markers: the synthesis results name the replies."""
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path / "home")})
    cache = settings.media_cache()
    uploaded = cache.store_bytes(wav_bytes(0.25), MediaKind.AUDIO, mime="audio/wav")
    spoken = cache.store_bytes(wav_bytes(0.5), MediaKind.AUDIO, mime="audio/wav")
    request = ResultKey(Capability.AUDIO_SYNTHESIZE, "0123456789ab", "e" * 64)
    settings.sidecars().write(
        Envelope(Status.DONE, request, {"path": str(spoken.path), "audio_sha256": spoken.sha256})
    )
    chosen = list(select(settings, Selection(kinds=(MediaKind.AUDIO,)), Tally()))
    assert [item.sha256 for item in chosen] == [uploaded.sha256]
    assert cache.is_output(spoken.sha256)
    assert mark_earlier_outputs(settings) == 0  # once per cache: the results are read once
