"""Admission under load on a real stt worker: a burst of concurrent openai-client requests
against a short MCP_MEDIA_API__WAIT is answered (some 429 with a Retry-After, before they
would wait past it), none hangs, none is lost, the accepted ones complete, and content
already answered is never refused. A burst admitted against a mean measured on quick jobs is
refused late (429 while its jobs still wait), never a 504 for a job no worker has started,
and every refused clip's retry is answered by its job."""

from __future__ import annotations

import io
import threading
import time
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np
import openai
import pytest

from pipelines.engines.registry import load_tts
from pipelines.media import Capability
from pipelines.speech.config import TtsConfig
from tests.models.test_api_audio import heard
from tests.support.cluster import Cluster
from tests.support.serve import serve
from workers.core import keys
from workers.core.capabilities import CAPABILITIES

pytestmark = pytest.mark.models

WAIT = 4.0  # MCP_MEDIA_API__WAIT: the server's bound on a request's wait
MARGIN = 60.0  # the clients' own timeout past it: a request that hangs fails the test
BURST = 24
TEXT = (
    "The invoice was paid on Monday. The parcel left the warehouse on Tuesday morning. "
    "Our meeting moved to Thursday afternoon, after the quarterly review."
)
LONG = " ".join([TEXT] * 5)  # past whisper's 30 s window: several times a quick job's work
QUICK = "Yes."
LATE_BURST = 16


def _clips(models_home: Path, count: int, text: str = TEXT) -> list[bytes]:
    """One spoken paragraph, made distinct per clip by trailing silence (no dedup hit)."""
    voice = load_tts(TtsConfig(models_home / "models" / "piper-en_US-joe-medium"))
    speech = voice.synthesize(text)
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
    # long clips: the burst is past the wait however fast the machine is that day
    warm, clips = (lambda c: (c[:4], c[4:]))(_clips(models_home, 4 + BURST, LONG))
    speech_cluster.start_worker("stt", 2, MCP_MEDIA_STT__THREADS="1")
    with serve(speech_cluster, MCP_MEDIA_API__WAIT=str(WAIT)) as served:
        api = served.openai(timeout=WAIT + MARGIN)

        def send(data: bytes) -> str:
            return api.audio.transcriptions.create(model="whisper-1", file=("c.wav", data)).text

        for data in warm:  # one at a time: the mean service time is measured
            assert heard(LONG, send(data)) >= 0.8
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
        assert done and all(heard(LONG, text) >= 0.8 for text in done.values())
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
        # every refused request retried after its Retry-After is served (a late refusal's
        # job stays queued: the retry joins it)
        for n in refused:
            assert heard(LONG, _retried(send, sent[n])) >= 0.8


def _retried(send: Callable[[bytes], str], data: bytes) -> str:
    """`send`, again after each 429's Retry-After until it is answered."""
    deadline = time.monotonic() + 300  # a hang fails the test; not a timing
    while True:
        try:
            return send(data)
        except openai.RateLimitError as exc:
            if time.monotonic() > deadline:
                raise
            time.sleep(int(exc.response.headers["retry-after"]))


def test_a_burst_admitted_against_an_idle_mean_is_refused_late_not_timed_out(
    speech_cluster: Cluster, models_home: Path
) -> None:
    quick = _clips(models_home, 4, QUICK)
    clips = _clips(models_home, LATE_BURST, LONG)
    speech_cluster.start_worker("stt", 2, MCP_MEDIA_STT__THREADS="1")
    queue = CAPABILITIES[Capability.AUDIO_TRANSCRIBE].queue
    gateway = speech_cluster.client()
    with serve(speech_cluster, MCP_MEDIA_API__WAIT=str(WAIT)) as served:
        api = served.openai(timeout=WAIT + MARGIN)

        def send(data: bytes) -> str:
            return api.audio.transcriptions.create(model="whisper-1", file=("c.wav", data)).text

        for data in quick:  # the mean is measured on quick jobs: the burst's take longer
            send(data)
        sent = [*clips, *quick]  # the quick clips again: answered, never refused
        codes: dict[int, list[int]] = {n: [] for n in range(len(sent))}
        texts: dict[int, str] = {}
        queued_at_504: list[str] = []
        barrier = threading.Barrier(len(sent))

        def client(n: int) -> None:
            barrier.wait()
            deadline = time.monotonic() + 600  # a hang fails the test; not a timing
            while n not in texts and time.monotonic() < deadline:
                try:
                    texts[n] = send(sent[n])
                    codes[n].append(200)
                except openai.APIStatusError as exc:
                    codes[n].append(exc.status_code)
                    if exc.status_code == 504:  # its job must have started: not still queued
                        job_id = exc.response.headers["x-job-id"]
                        if gateway.redis.zscore(keys.admitted(queue), job_id) is not None:
                            queued_at_504.append(job_id)
                    elif exc.status_code == 429:
                        assert exc.code == "rate_limit_exceeded"
                        assert "retry in" in str(exc.message)
                        time.sleep(int(exc.response.headers["retry-after"]))
                    else:
                        return

        threads = [threading.Thread(target=client, args=(n,)) for n in range(len(sent))]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=700)
        finally:
            gateway.close()
    assert not queued_at_504, f"504s for jobs no worker had started: {codes}"
    assert set(texts) == set(range(len(sent))), codes  # every clip's retry was served
    assert all(heard(LONG, texts[n]) >= 0.8 for n in range(LATE_BURST))
    assert all(codes[n] == [200] for n in range(LATE_BURST, len(sent)))  # dedup: never refused
    assert any(429 in codes[n] for n in range(LATE_BURST)), codes  # a burst past the wait
