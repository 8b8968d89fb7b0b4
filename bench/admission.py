"""Latency under load, kept by admission: 32 concurrent transcription clients on 2 stt
worker processes (1 thread each), each client sending its clips in turn with a 30 s timeout
and no retry of a timeout (hermes-agent's client), retrying a 429 after its Retry-After.

Two bursts of the same shape (new bytes each: no dedup hit) in one run: with
MCP_MEDIA_API__WAIT below the client's timeout (admission refuses what would wait past it)
and with the default wait (300 s: nothing refused at this load), the baseline. A third burst
sends clips three times as long after a warm-up on quick ones, so the mean admission starts
from is too optimistic for the burst (as an idle mean is when a burst arrives on a busy
machine): what late refusal is for (429 while a job still waits, never a 504 for one no
worker has started). Reported:
p50/p99 of every HTTP answer's time (what the client's timeout sees), 429s, client
timeouts, and each clip's time to its transcript including retries.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
import openai

from bench.api import CLIP_S, _pct, _serve, _wav
from bench.cluster import BenchCluster
from bench.results import record
from bench.speech import ENV, Voice
from pipelines.engines.registry import load_tts
from workers.core.stage_configs import tts_config

CLIENTS = 32
PER_CLIENT = 2
CLIENT_TIMEOUT = 30.0  # hermes-agent's request timeout, without retry
WAIT = 25.0  # MCP_MEDIA_API__WAIT for the admission burst: the client's timeout less 5 s
DEFAULT_WAIT = 300.0  # the setting's default: no refusal at this load


@dataclass
class Burst:
    answers: list[float] = field(default_factory=list)  # seconds to each HTTP answer
    clips: list[float] = field(default_factory=list)  # seconds to each clip's transcript
    refused: int = 0  # 429s
    refused_late: int = 0  # of them, while the job waited (late refusal: names the job)
    late: int = 0  # 504: the server's wait ran out (the job named, still running)
    timeouts: int = 0  # the client gave up (30 s)
    lost: int = 0  # a clip never transcribed (any other error)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _burst(
    cluster: BenchCluster, wait: float, clips: list[bytes], warm: list[bytes] | None = None
) -> Burst:
    found = Burst()
    lock = threading.Lock()
    with _serve(cluster, MCP_MEDIA_API__WAIT=str(wait)) as api:
        api = api.with_options(timeout=CLIENT_TIMEOUT, max_retries=0)
        for data in warm or clips[:4]:  # warm both processes; the mean service is measured
            api.audio.transcriptions.create(model="whisper-1", file=("w.wav", data))
        barrier = threading.Barrier(CLIENTS)

        def client(n: int) -> None:
            barrier.wait()
            for k in range(PER_CLIENT):
                data = clips[4 + n * PER_CLIENT + k]
                began = time.perf_counter()
                while True:
                    start = time.perf_counter()
                    try:
                        api.audio.transcriptions.create(model="whisper-1", file=("c.wav", data))
                        outcome, pause = "done", 0.0
                    except openai.RateLimitError as exc:
                        outcome = (
                            "refused" if "x-job-id" not in exc.response.headers else "refused late"
                        )
                        pause = float(exc.response.headers.get("retry-after", "1"))
                    except openai.APITimeoutError:
                        outcome, pause = "timeout", 0.0
                    except openai.APIStatusError as exc:
                        outcome, pause = ("late" if exc.status_code == 504 else "lost"), 0.0
                        found.errors.append(f"{exc.status_code} {exc.message}"[:120])
                    except openai.OpenAIError as exc:
                        outcome, pause = "lost", 0.0
                        found.errors.append(repr(exc)[:120])
                    took = time.perf_counter() - start
                    with lock:
                        if outcome != "timeout":
                            found.answers.append(took)
                        if outcome in ("refused", "refused late"):
                            found.refused += 1
                            found.refused_late += outcome == "refused late"
                        elif outcome == "timeout":
                            found.timeouts += 1
                        elif outcome == "late":
                            found.late += 1
                        elif outcome == "lost":
                            found.lost += 1
                        else:
                            found.clips.append(time.perf_counter() - began)
                    if outcome not in ("refused", "refused late"):
                        break
                    time.sleep(pause)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        found.seconds = time.perf_counter() - started
    return found


def run() -> None:
    with BenchCluster(ENV, models=True) as cluster:
        voice = Voice(load_tts(tts_config(cluster.settings())))
        count = 4 + CLIENTS * PER_CLIENT
        spoken = [voice.speech(i, *CLIP_S)[0] for i in range(count)]
        worker = cluster.start_worker("stt", 2, MCP_MEDIA_STT__THREADS="1")
        runs: dict[str, Burst] = {}
        for r, (name, wait) in enumerate((("admission", WAIT), ("default", DEFAULT_WAIT))):
            clips = [_wav(s, voice.rate, 1000 * (r + 1) + i) for i, s in enumerate(spoken)]
            runs[name] = _burst(cluster, wait, clips)
        # clips three times as long (about 31 s: past whisper's 30 s window), after a warm-up
        # on quick ones: admission starts from a mean the burst does not keep
        quick = [_wav(voice.speech(i, 1.0, 3.0)[0], voice.rate, 3000 + i) for i in range(4)]
        long = [
            _wav(
                np.concatenate([spoken[i], spoken[(i + 1) % count], spoken[(i + 2) % count]]),
                voice.rate,
                4000 + i,
            )
            for i in range(count)
        ]
        runs["late"] = _burst(cluster, WAIT, long, warm=quick)
        cluster.stop_worker(worker)
    audio_s = float(np.mean([len(s) for s in spoken])) / voice.rate
    for name, burst in runs.items():
        print(
            f"  {name} (API__WAIT {DEFAULT_WAIT if name == 'default' else WAIT:g} s): "
            f"{CLIENTS} clients x {PER_CLIENT} clips "
            f"({3 * audio_s if name == 'late' else audio_s:.1f} s each) in "
            f"{burst.seconds:.1f} s; answers p50 {_pct(burst.answers, 50):.2f} s, "
            f"p99 {_pct(burst.answers, 99):.2f} s; {burst.refused} x 429 "
            f"({burst.refused_late} late), "
            f"{burst.late} x 504, {burst.timeouts} client timeouts, {burst.lost} lost; clip to "
            f"transcript p99 {_pct(burst.clips, 99):.2f} s"
        )
        for error in sorted(set(burst.errors))[:5]:
            print(f"    {error}")
    ours, base = runs["admission"], runs["default"]
    of = (
        f"the same 32-client burst with MCP_MEDIA_API__WAIT={DEFAULT_WAIT:g} (the default: "
        "nothing refused), same run"
    )
    for q in (50, 99):
        record(
            f"api_stt_32_clients_answer_p{q}",
            {
                "value": round(_pct(ours.answers, q), 3),
                "unit": f"s (API__WAIT {WAIT:g} s, 2 stt processes x 1 thread)",
                "baseline": round(_pct(base.answers, q), 3),
                "baseline_of": of,
                "ratio": round(_pct(base.answers, q) / _pct(ours.answers, q), 3),
                "target": f"value < {CLIENT_TIMEOUT:g}" if q == 99 else "report",
                "better": "lower",
            },
        )
    record(
        "api_stt_32_clients_refused_429",
        {
            "value": ours.refused,
            "unit": f"429s, each retried after its Retry-After ({CLIENTS * PER_CLIENT} clips)",
            "baseline": base.refused,
            "baseline_of": of,
            "ratio": None,
            "target": "report",
            "better": "lower",
        },
    )
    record(
        "api_stt_32_clients_timeouts_or_lost",
        {
            "value": ours.timeouts + ours.lost,
            "unit": f"requests the {CLIENT_TIMEOUT:g} s client gave up on, or lost",
            "baseline": base.timeouts + base.lost,
            "baseline_of": of,
            "ratio": None,
            "target": "value == 0",
            "better": "lower",
        },
    )
    record(
        "api_stt_32_clients_504",
        {
            "value": ours.late,
            "unit": "504s (the server's wait ran out; the job named, its result kept)",
            "baseline": base.late,
            "baseline_of": of,
            "ratio": None,
            "target": "report",
            "better": "lower",
        },
    )
    late = runs["late"]
    record(
        "api_stt_32_clients_long_after_quick_warmup_504",
        {
            "value": late.late,
            "unit": (
                f"504s in a burst of {CLIENTS * PER_CLIENT} clips of {3 * audio_s:.0f} s after a "
                f"warm-up on quick ones (API__WAIT {WAIT:g} s; p99 answer "
                f"{_pct(late.answers, 99):.2f} s, {late.refused} x 429 ({late.refused_late} "
                f"late), {late.timeouts} client "
                f"timeouts, {late.lost} lost): a 504 only for a job that runs"
            ),
            "baseline": None,
            "ratio": None,
            "target": "report",
            "better": "lower",
        },
    )
    record(
        "api_stt_32_clients_clip_to_transcript_p99",
        {
            "value": round(_pct(ours.clips, 99), 3),
            "unit": "s, retries after 429 included",
            "baseline": round(_pct(base.clips, 99), 3) if base.clips else None,
            "baseline_of": of,
            "ratio": None,
            "target": "report",
            "better": "lower",
        },
    )
