"""A task-aware client (raw JSON-RPC, MCP 2026-07-28 with io.modelcontextprotocol/tasks) gets
a task for a minute of speech to transcribe, and its transcript through tasks/get; a longer
transcription is stopped mid-way by tasks/cancel and the worker serves on. Real `mcp-media
mcp` on the queues, a real tts+stt worker with the prepared piper voice and whisper."""

from __future__ import annotations

import re
import time
import wave
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster
from tests.support.task_client import RawClient, own_tools

pytestmark = pytest.mark.models

JOB = "mcp-media/job"
VOICE = "piper-en_US-joe-medium"
# A little over a minute when spoken (piper joe, medium).
TEXT = " ".join(
    [
        "The quarterly report for the northern warehouse is ready for review.",
        "Deliveries rose by twelve percent compared with the same period last year,",
        "mostly because the new loading dock opened in early March.",
        "Two of the forklifts were replaced after the safety inspection in April,",
        "and the night shift now starts one hour later to reduce overtime.",
        "The invoice from the roofing company was paid on Monday,",
        "but the repairs to the east wall are still waiting for approval from the landlord.",
        "Stock of packing material ran low twice during the spring sale,",
        "so the team proposes a larger monthly order with a second supplier.",
        "Staff turnover stayed below five percent, and three new drivers finished their training.",
        "Energy costs fell slightly after the lighting was changed to LED panels.",
        "The manager asks everyone to read the attached summary before Thursday's meeting,",
        "where the budget for the next quarter and the holiday schedule will be decided.",
        "Questions about the figures can be sent to the finance office at any time this week.",
        "Please remember that the car park behind the main building will be closed on Friday,",
        "while the painters mark the new bays for the delivery vans and the visitors.",
    ]
)


def _repeated(clip: Path, times: int, out: Path) -> float:
    """`clip` (PCM WAV) `times` over, as one WAV; its seconds."""
    with wave.open(str(clip), "rb") as src:
        params, frames = src.getparams(), src.readframes(src.getnframes())
    with wave.open(str(out), "wb") as dst:
        dst.setparams(params)
        dst.writeframes(frames * times)
    return params.nframes * times / params.framerate


def _progress(task: dict[str, Any]) -> bool:
    return task["status"] != "working" or "of input done" in task.get("statusMessage", "")


def _ended(client: RawClient, job: str) -> dict[str, Any]:
    """media_result of the job, asked until it is no longer pending (at most ~10 minutes)."""
    for _ in range(3000):
        got: dict[str, Any] = client.call("media_result", {"id": job}, tasks=False)[
            "structuredContent"
        ]
        if got["status"] != "pending":
            return got
        time.sleep(0.2)
    raise AssertionError(f"job {job} never finished")


def test_a_minute_of_speech_transcribed_as_a_task_and_a_longer_one_cancelled(
    speech_cluster: Cluster, tmp_path: Path
) -> None:
    speech_cluster.start_worker("tts,stt", concurrency=1)
    client = own_tools(speech_cluster, tmp_path)
    try:
        spoken = client.call("speak", {"text": TEXT, "voice": VOICE, "format": "wav"})
        assert spoken["resultType"] == "task"
        said = client.poll(spoken["taskId"], timeout=300)[-1]
        assert said["status"] == "completed", said
        structured = said["result"]["structuredContent"]
        clip = Path(structured["path"])
        assert structured["duration_s"] >= 60, structured
        print(f"\nspoken clip: {structured['duration_s']:.1f} s")

        # A longer clip, cancelled once the job reports progress: it stops mid-way.
        long = tmp_path / "five-times.wav"
        long_s = _repeated(clip, 5, long)
        began = time.monotonic()
        long_task = client.call("transcribe_audio", {"audio": str(long)})
        assert long_task["resultType"] == "task"
        running = client.poll(long_task["taskId"], timeout=600, until=_progress)[-1]
        assert running["status"] == "working", running
        job = running["_meta"][JOB]
        client.result("tasks/cancel", {"taskId": long_task["taskId"]})
        assert client.result("tasks/get", {"taskId": long_task["taskId"]})["status"] == "cancelled"
        got = _ended(client, job)
        assert got["status"] == "failed", got
        assert got["result"]["meta"]["reason"].startswith("cancelled")
        print(
            f"long clip {long_s:.0f} s: cancelled at '{running['statusMessage']}',"
            f" job ended {time.monotonic() - began:.1f} s after the call"
        )

        # The worker serves on: the one-minute clip, as a task, its transcript inline.
        began = time.monotonic()
        heard = client.call("transcribe_audio", {"audio": clip.stem, "format": "text"})
        created_s = time.monotonic() - began
        assert heard["resultType"] == "task" and heard["status"] == "working"
        polls = client.poll(heard["taskId"], timeout=600)
        final = polls[-1]
        assert final["status"] == "completed", final
        text = final["result"]["content"][0]["text"].lower()
        for words in ("quarterly report", "paid on monday", "finance office"):
            assert words in text, text
        assert final["result"]["structuredContent"]["status"] == "done"
        messages = [p.get("statusMessage") for p in polls if p["status"] == "working"]
        print(
            f"60 s transcription: task in {created_s * 1000:.0f} ms, result after"
            f" {time.monotonic() - began:.1f} s, {len(polls)} polls; progress seen: {messages}"
        )
    finally:
        client.close()


def _speaking(home: Path) -> int:
    """Bytes of the speech file a worker is writing (under its home's tmp), 0 when none."""
    parts = list((home / "tmp").glob(".speech-*.part"))
    return max((part.stat().st_size for part in parts if part.exists()), default=0)


def test_speech_cancelled_while_it_is_spoken_stops_at_the_next_piece(
    speech_cluster: Cluster, tmp_path: Path
) -> None:
    speech_cluster.start_worker("tts", concurrency=1)
    client = own_tools(speech_cluster, tmp_path)
    try:
        long = client.call("speak", {"text": " ".join([TEXT] * 4), "voice": VOICE, "format": "wav"})
        assert long["resultType"] == "task"
        job = client.poll(long["taskId"], timeout=60, until=lambda t: JOB in t.get("_meta", {}))
        job_id = job[-1]["_meta"][JOB]
        for _ in range(6000):  # a few pieces spoken: the job is running
            if _speaking(speech_cluster.home) > 200_000:
                break
            time.sleep(0.05)
        assert _speaking(speech_cluster.home) > 200_000
        client.result("tasks/cancel", {"taskId": long["taskId"]})
        got = _ended(client, job_id)
        assert got["status"] == "failed", got
        reason = got["result"]["meta"]["reason"]
        assert reason.startswith("cancelled"), reason
        stopped = re.search(r"stopped before piece (\d+) of (\d+)", reason)
        assert stopped is not None, reason
        before, pieces = int(stopped[1]), int(stopped[2])
        assert 1 < before <= pieces // 2, reason  # it had spoken some, and stopped early
        assert _speaking(speech_cluster.home) == 0  # no partial file left
        print(f"\nspeech cancelled: {reason}")

        # The worker serves on.
        short = client.call("speak", {"text": "The worker serves on.", "voice": VOICE})
        said = client.poll(short["taskId"], timeout=300)[-1]
        assert said["status"] == "completed", said
    finally:
        client.close()
