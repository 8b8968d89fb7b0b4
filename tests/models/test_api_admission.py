"""Admission under load on a real stt worker: a burst of concurrent openai-client requests
against a short MCP_MEDIA_API__WAIT is answered (some 429 with a Retry-After, before they
would wait past it), none hangs, none is lost, the accepted ones complete, and content
already answered is never refused."""

from __future__ import annotations

import io
import threading
import time
import wave
from pathlib import Path

import numpy as np
import openai
import pytest
from openai import OpenAI

from pipelines.engines.registry import load_tts
from pipelines.speech.config import TtsConfig
from tests.models.test_api_audio import heard
from tests.support.cluster import Cluster
from tests.support.serve import serve

pytestmark = pytest.mark.models

WAIT = 4.0  # MCP_MEDIA_API__WAIT: the server's bound on a request's wait
MARGIN = 60.0  # the clients' own timeout past it: a request that hangs fails the test
BURST = 24
TEXT = (
    "The invoice was paid on Monday. The parcel left the warehouse on Tuesday morning. "
    "Our meeting moved to Thursday afternoon, after the quarterly review."
)


def _clips(models_home: Path, count: int) -> list[bytes]:
    """One spoken paragraph, made distinct per clip by trailing silence (no dedup hit)."""
    voice = load_tts(TtsConfig(models_home / "models" / "piper-en_US-joe-medium"))
    speech = voice.synthesize(TEXT)
    assert speech.samples is not None
    clips = []
    for n in range(count):
        data = np.concatenate([speech.samples, np.zeros(160 * (n + 1), np.float32)])
        out = io.BytesIO()
        with wave.open(out, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(speech.sample_rate)
            w.writeframes((np.clip(data, -1, 1) * 32767).astype("<i2").tobytes())
        clips.append(out.getvalue())
    return clips


def test_a_burst_past_the_wait_is_refused_with_retry_after_and_nothing_is_lost(
    speech_cluster: Cluster, models_home: Path
) -> None:
    warm, clips = (lambda c: (c[:4], c[4:]))(_clips(models_home, 4 + BURST))
    speech_cluster.start_worker("stt", 2, MCP_MEDIA_STT__THREADS="1")
    with serve(speech_cluster, MCP_MEDIA_API__WAIT=str(WAIT)) as served:
        api = OpenAI(
            base_url=f"{served.url}/v1", api_key=served.key, max_retries=0, timeout=WAIT + MARGIN
        )

        def send(data: bytes) -> str:
            return api.audio.transcriptions.create(model="whisper-1", file=("c.wav", data)).text

        for data in warm:  # one at a time: the mean service time is measured
            assert heard(TEXT, send(data)) >= 0.8
        # The burst: new clips, and the warm-up clips again (answered: never refused).
        sent = [*clips, *warm]
        answers: dict[int, object] = {}
        barrier = threading.Barrier(len(sent))

        def client(n: int) -> None:
            barrier.wait()
            try:
                answers[n] = send(sent[n])
            except openai.APIError as exc:
                answers[n] = exc

        threads = [threading.Thread(target=client, args=(n,)) for n in range(len(sent))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=WAIT + MARGIN + 60)
        assert len(answers) == len(sent)
        refused = {n: a for n, a in answers.items() if isinstance(a, openai.RateLimitError)}
        timed_out = {
            n: a
            for n, a in answers.items()
            if isinstance(a, openai.APIStatusError) and a.status_code == 504
        }
        done = {n: a for n, a in answers.items() if isinstance(a, str)}
        # every request was answered: a transcript, a 429, or a 504 naming its job
        assert len(refused) + len(timed_out) + len(done) == len(sent), answers
        assert refused, "a burst past the wait bound must be refused in part"
        for refusal in refused.values():
            assert refusal.code == "rate_limit_exceeded"
            assert refusal.body is not None and "retry in" in str(refusal.message)
            assert int(refusal.response.headers["retry-after"]) >= 1
        assert all(n in done for n in range(BURST, len(sent)))  # answered content: never refused
        assert done and all(heard(TEXT, text) >= 0.8 for text in done.values())
        # a 504 is not a lost job: its result arrives under the id it names
        gateway = speech_cluster.client()
        try:
            for late in timed_out.values():
                job_id = late.response.headers["x-job-id"]
                deadline = time.monotonic() + 120  # a condition to wait for, not a timing
                while time.monotonic() < deadline and gateway.result(job_id)[2] is None:
                    time.sleep(0.5)
                assert gateway.result(job_id)[2] is not None
        finally:
            gateway.close()
        # a refused request retried once the burst has drained is served
        first = min(refused)
        assert heard(TEXT, send(sent[first])) >= 0.8
