"""Speech quality per model tier: word error rate (English) and character error rate
(Chinese) of the tier's STT on a fixed set of sentences, spoken by the tier's TTS voices and
by espeak-ng (a second voice no STT model was trained on), plus RTF on one thread.

Scoring normalises only what is not an error: case, punctuation, number style and
abbreviations (English: both texts go through the TTS text rules, so "Dr." is "doctor" and
"1,200" is "one thousand two hundred"), and number style in Chinese. Chinese is scored on the
text users receive, script and all: a Traditional character for a Simplified one is an error.
espeak-ng speaks Chinese from pinyin phonemes: its own reading of characters says tone digits
in English (`bench.espeak_zh`). Needs `espeak-ng` on PATH (`make bench` installs the Debian
package when it is missing) and the quality tier
(`mcp-media models prepare --tier quality`, which this suite runs).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.espeak_zh import espeak_phonemes
from bench.peers import wer
from bench.results import Entry, record
from pipelines.engines.registry import chinese_writer, load_transcriber, load_tts
from pipelines.speech.audio import write_wav
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import transcribe
from pipelines.speech.text import normalize
from pipelines.speech.tts import TextToSpeech
from tests.support.scoring import cer
from workers.core.settings import Settings
from workers.provisioning.models import prepare

ENGLISH = (
    "Please send the quarterly report to the finance team in Rotterdam by Friday.",
    "The meeting with Doctor Alvarez moved to Tuesday afternoon at three.",
    "Our new warehouse near Edinburgh ships 1,200 parcels a day.",
    "She asked whether the invoice had been paid before the deadline.",
    "The weather in Lisbon will be sunny with a light breeze from the west.",
    "Remember to back up the database before you upgrade the server.",
)
CHINESE = (
    "请把季度报告在星期五之前发给财务部。",
    "明天下午三点我们在会议室讨论新项目。",
    "这家餐厅的饺子很好吃，价格也不贵。",
    "北京今天晴天，最高气温二十五度。",
    "请记得在升级服务器之前备份数据库。",
    "我们的新仓库每天发出一千二百个包裹。",
)
TIERS: dict[str, dict[str, Any]] = {
    "default": {"stt": "whisper-tiny.en", "tts": "piper-en_US-joe-medium", "voices": {"": "en"}},
    "quality": {
        "stt": "whisper-base",
        "tts": "kokoro-v1.0",
        "voices": {"af_heart": "en", "bf_emma": "en", "zf_xiaobei": "zh", "zm_yunxi": "zh"},
    },
}
ESPEAK = {"en": "en-us", "zh": "cmn"}
TARGETS = {"en": "value <= 0.05", "zh": "value <= 0.10", "rtf": "value <= 0.3"}


@dataclass(slots=True)
class Tally:
    errors: float = 0.0
    sentences: int = 0
    audio_s: float = 0.0
    stt_s: float = 0.0
    tts_s: float = 0.0
    tts_audio_s: float = 0.0


def _espeak(text: str, language: str, out: Path) -> Path:
    """The sentence in espeak-ng's voice; Chinese as phonemes (see `bench.espeak_zh`)."""
    said = espeak_phonemes(text) if language == "zh" else text
    subprocess.run(
        ["espeak-ng", "-v", ESPEAK[language], "-w", str(out), said], check=True, timeout=60
    )
    return out


def _entry(value: float, unit: str, target: str) -> Entry:
    return Entry(
        value=round(value, 4), unit=unit, baseline=None, ratio=None, target=target, better="lower"
    )


def _tier(name: str, models: Path, work: Path) -> None:
    tier = TIERS[name]
    stt_config = SttConfig(models / tier["stt"], threads=1)
    transcriber = load_transcriber(stt_config)
    chinese = chinese_writer(stt_config.chinese_script)  # what users receive: Simplified
    base = load_tts(TtsConfig(models / tier["tts"], threads=1, noise_scale=0.0, noise_scale_w=0.0))
    tallies: dict[tuple[str, str], Tally] = {}
    for voice, language in tier["voices"].items():
        tts: TextToSpeech = base.for_voice(voice or None)
        for sentence in ENGLISH if language == "en" else CHINESE:
            started = time.perf_counter()
            speech = tts.synthesize(sentence)
            tts_s = time.perf_counter() - started
            assert speech.samples is not None
            wav = write_wav(work / f"{name}-{voice}.wav", speech.samples, speech.sample_rate)
            for source, path in (
                ("tts", wav),
                ("espeak", _espeak(sentence, language, work / f"{name}-espeak.wav")),
            ):
                key = (language, source)
                tally = tallies.setdefault(key, Tally())
                config = replace(stt_config, language=language)
                transcript = transcribe(path, transcriber, config, chinese=chinese)
                score = (
                    wer(normalize(sentence), normalize(transcript.text))
                    if language == "en"
                    else cer(sentence, transcript.text)
                )
                print(f"  {name} {voice or 'piper'} {source} {score:.3f}: {transcript.text}")
                tally.errors += score
                tally.sentences += 1
                tally.audio_s += transcript.duration_s
                tally.stt_s += transcript.processing_s
                if source == "tts":
                    tally.tts_s += tts_s
                    tally.tts_audio_s += speech.duration_s
    stt_audio = sum(t.audio_s for t in tallies.values())
    for (language, source), tally in sorted(tallies.items()):
        metric = "wer" if language == "en" else "cer"
        target = TARGETS[language] if name == "quality" else "report"
        record(
            f"quality_{name}_tier_{language}_{metric}_{source}_voices",
            _entry(tally.errors / tally.sentences, metric, target),
        )
    record(
        f"quality_{name}_tier_stt_rtf_1_thread",
        _entry(
            sum(t.stt_s for t in tallies.values()) / stt_audio,
            "rtf",
            TARGETS["rtf"] if name == "quality" else "report",
        ),
    )
    tts_audio = sum(t.tts_audio_s for t in tallies.values())
    record(
        f"quality_{name}_tier_tts_rtf_1_thread",
        _entry(
            sum(t.tts_s for t in tallies.values()) / tts_audio,
            "rtf",
            TARGETS["rtf"] if name == "quality" else "report",
        ),
    )


def run() -> None:
    if shutil.which("espeak-ng") is None:
        raise RuntimeError("espeak-ng is not on PATH: `make bench` installs it (Debian package)")
    home = Settings().home
    prepare(home, tier="default")
    prepare(home, tier="quality")
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        for name in TIERS:
            _tier(name, home / "models", Path(tmp))
