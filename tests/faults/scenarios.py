"""Fault scenarios as plain functions, shared by the pytest suite (tests/faults/test_faults.py)
and the soak (`python -m tests.faults.soak`).

Each scenario works on a `Cluster` that may be fresh (pytest: one node per test) or may have
lived through earlier scenarios (the soak: one node, every scenario, N rounds). It starts
the workers it needs only when no live one serves its queue, uses inputs no earlier round
used (`tag`), injects its fault, waits for conditions (never a fixed sleep) and returns an
`Outcome` whose every figure is measured:

- completed: jobs whose result is `done`;
- dead_lettered: jobs failed by the redelivery cap (`dead-lettered` reason), never counted
  as completed;
- failed: other visible failures (a finished `failed`/`degraded` result);
- lost: submitted jobs with none of the above when the wait ends;
- duplicated: extra stored results, from the workers' own `stored … result for <key>` lines
  (one per stage run that stored a result) and from the dead-letter list (one entry per
  dead-lettered job id), for this scenario's keys only.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipelines.engines.registry import load_tts
from pipelines.media import Capability, JobRequest, MediaKind
from pipelines.results import ResultKey, Status
from pipelines.speech.audio import write_wav
from pipelines.speech.config import TtsConfig
from tests.support.cluster import Cluster, Worker
from tests.support.fault_worker import POISON_TASK, POISON_VERSION
from tests.support.up import wait_for
from workers.broker.embedded import Broker, ensure_embedded, stop_embedded
from workers.core import keys
from workers.files.node_cache import input_ref
from workers.gateways.cluster import JobHandle, MediaClient

Spoken = tuple[list[np.ndarray], int]
FAULT_WORKER = ("tests.support.fault_worker",)
STT_PROCESSES = 2
VISION_THREADS = 4
_STORED = re.compile(r"stored \w+ result for (\S+) \(job ")
_LOST_BROKER = "Connection to broker lost"
SENTENCES = [
    "The quarterly report is attached to this message.",
    "Please check the numbers in the second table before Friday.",
    "We moved the team meeting to the large room on the third floor.",
    "Remember to renew the parking permits at the front desk.",
]


@dataclass
class Outcome:
    scenario: str
    submitted: int
    completed: int
    dead_lettered: int
    failed: int
    duplicated: int
    max_latency: float
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def lost(self) -> int:
        return self.submitted - self.completed - self.dead_lettered - self.failed

    def line(self) -> str:
        return (
            f"scenario={self.scenario} submitted={self.submitted} completed={self.completed} "
            f"dead_lettered={self.dead_lettered} failed={self.failed} lost={self.lost} "
            f"duplicated={self.duplicated} max_latency={self.max_latency:.1f}s"
            + "".join(f" {k}={v}" for k, v in self.extra.items())
        )

    def to_json(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "submitted": self.submitted,
            "completed": self.completed,
            "dead_lettered": self.dead_lettered,
            "failed": self.failed,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "max_latency_s": round(self.max_latency, 1),
            **self.extra,
        }


# inputs


def long_clip(spoken: Spoken, index: int, path: Path, repeats: int = 3, salt: int = 0) -> Path:
    """A distinct clip of `repeats` x the four sentences, gaps varying with `index`; `salt`
    trailing zero samples make a clip of another round a different input."""
    parts, rate = spoken
    gap = np.zeros(int(rate * (0.3 + 0.05 * index)), dtype=np.float32)
    order = parts[index % 4 :] + parts[: index % 4]
    pieces = [piece for _ in range(repeats) for sentence in order for piece in (sentence, gap)]
    pieces.append(np.zeros(salt, dtype=np.float32))
    return write_wav(path, np.concatenate(pieces), rate)


def audio_jobs(
    cluster: Cluster, spoken: Spoken, workdir: Path, count: int, repeats: int = 3, tag: int = 0
) -> list[JobRequest]:
    cache = cluster.settings().media_cache()
    jobs = []
    for i in range(count):
        clip = long_clip(spoken, i, workdir / f"clip{tag}-{i}.wav", repeats, salt=tag * 64 + i)
        stored = cache.store_file(clip, MediaKind.AUDIO)
        jobs.append(JobRequest(Capability.AUDIO_TRANSCRIBE, stored.sha256, stored.path))
    return jobs


def image_jobs(
    cluster: Cluster, workdir: Path, seeds: range, size: tuple[int, int] = (64, 48)
) -> list[JobRequest]:
    from tests.integration.test_vision_jobs import noisy_png

    cache = cluster.settings().media_cache()
    jobs = []
    for seed in seeds:
        png = noisy_png(workdir / f"i{seed}.png", seed, size)
        stored = cache.store_file(png, MediaKind.IMAGE)
        jobs.append(JobRequest(Capability.VISION_SUMMARIZE, stored.sha256, stored.path))
    return jobs


def spoken_sentences(models_home: Path) -> Spoken:
    """The four sentences spoken by the default voice, without sampling noise."""
    voice = load_tts(
        TtsConfig(
            models_home / "models" / "piper-en_US-joe-medium", noise_scale=0.0, noise_scale_w=0.0
        )
    )
    parts = []
    for sentence in SENTENCES:
        speech = voice.synthesize(sentence)
        assert speech.samples is not None
        parts.append(speech.samples)
    return parts, voice.sample_rate


# waiting and measuring


def finish(
    client: MediaClient, handles: list[JobHandle], timeout: float, since: float
) -> tuple[list[JobHandle], float]:
    """Wait for every handle; returns them and the latest completion time after `since`."""
    deadline = time.monotonic() + timeout
    latest = 0.0
    pending = list(handles)
    done: list[JobHandle] = []
    while pending and time.monotonic() < deadline:
        waited = client.wait(pending, timeout=1.0)
        for handle in waited:
            if handle.envelope is not None:
                done.append(handle)
                latest = time.monotonic() - since
        pending = [h for h in waited if h.envelope is None]
    return done + pending, latest


def stored_counts(workers: Sequence[Worker]) -> Counter[str]:
    """How many times each result key was computed and stored, from every worker's log."""
    counts: Counter[str] = Counter()
    for worker in workers:
        counts.update(_STORED.findall(worker.text()))
    return counts


def duplicated(cluster: Cluster, handles: Sequence[JobHandle]) -> int:
    """Stored results beyond one per key, for these handles' keys only."""
    wanted = {str(h.key) for h in handles}
    counts = stored_counts(cluster.workers)
    return sum(n - 1 for key, n in counts.items() if key in wanted and n > 1)


def outcome(
    name: str,
    cluster: Cluster,
    handles: Sequence[JobHandle],
    latency: float,
    dead: Sequence[dict[str, object]] = (),
    **extra: object,
) -> Outcome:
    done = sum(1 for h in handles if h.status is Status.DONE)
    lettered = sum(
        1
        for h in handles
        if h.envelope is not None
        and h.status is Status.FAILED
        and (h.envelope.reason or "").startswith("dead-lettered")
    )
    failed = sum(1 for h in handles if h.envelope is not None and h.status is not Status.DONE)
    ids = {h.id for h in handles}
    letters = Counter(str(d["job_id"]) for d in dead if d["job_id"] in ids)
    extra_letters = sum(n - 1 for n in letters.values() if n > 1)
    return Outcome(
        scenario=name,
        submitted=len(handles),
        completed=done,
        dead_lettered=lettered,
        failed=failed - lettered,
        duplicated=duplicated(cluster, handles) + extra_letters,
        max_latency=latency,
        extra=dict(extra),
    )


def claimed(client: MediaClient, jobs: Sequence[JobRequest]) -> int:
    return sum(client.state.claims.claimed(client.key(j.capability, j.sha256)) for j in jobs)


def claim_owner(client: MediaClient, job: JobRequest) -> int | None:
    """The pid named by the claim on a job's key (tokens are `pid:random`)."""
    raw = client.redis.get(keys.claim(client.key(job.capability, job.sha256)))
    if raw is None:
        return None
    pid = raw.decode().split(":")[0]
    return int(pid) if pid.isdigit() else None


# the cluster's processes


def live_worker(cluster: Cluster, queues: str) -> Worker | None:
    for worker in reversed(cluster.workers):
        if worker.name == queues and worker.proc.poll() is None:
            return worker
    return None


def stt_worker(cluster: Cluster) -> Worker:
    """The STT worker: production code plus the self-killing poison task (fault_worker)."""
    return live_worker(cluster, "stt") or cluster.start_worker(
        "stt", STT_PROCESSES, entry=FAULT_WORKER
    )


def vision_worker(cluster: Cluster) -> Worker:
    return live_worker(cluster, "vision") or cluster.start_worker("vision", VISION_THREADS)


def log_sizes(workers: Sequence[Worker]) -> dict[Path, int]:
    return {w.log: w.log.stat().st_size for w in workers}


def logged_since(worker: Worker, sizes: dict[Path, int], text: str) -> bool:
    with worker.log.open("rb") as handle:
        handle.seek(sizes.get(worker.log, 0))
        return text.encode() in handle.read()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # redis-server daemonizes: its parent is init, which reaps it; a zombie counts as gone
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    return False


def broker_down(cluster: Cluster, *, hard: bool) -> float | None:
    """SIGKILL the embedded redis-server (hard) or shut it down cleanly; wait until it is gone
    and until every live worker has seen the connection drop. Returns how long the workers
    took to notice, None if one did not within 30 s (its consumer was not running)."""
    sizes = log_sizes(cluster.workers)
    down = time.monotonic()
    if hard:
        pid = int((cluster.home / "redis" / "redis.pid").read_text().strip())
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: _gone(pid), timeout=30), f"redis-server {pid} survived SIGKILL"
    else:
        assert stop_embedded(cluster.home), "the embedded redis-server was not running"
    live = [w for w in cluster.workers if w.proc.poll() is None]
    if wait_for(lambda: all(logged_since(w, sizes, _LOST_BROKER) for w in live), timeout=30):
        return time.monotonic() - down
    return None


def broker_up(cluster: Cluster) -> Broker:
    restarted = ensure_embedded(cluster.home)
    assert restarted.url == cluster.broker.url, "the broker came back on another port"
    cluster.broker = restarted
    return restarted


# the scenarios


def node_loss(cluster: Cluster, spoken: Spoken, workdir: Path, tag: int = 0) -> Outcome:
    """SIGKILL of the whole STT worker and of redis-server while jobs run; restart both;
    nobody resubmits."""
    jobs = audio_jobs(cluster, spoken, workdir, 8, tag=tag)
    worker = stt_worker(cluster)
    client = cluster.client()
    try:
        handles = client.submit(jobs)
        assert wait_for(lambda: claimed(client, jobs) >= STT_PROCESSES, timeout=120)
        worker.kill()
        broker_down(cluster, hard=True)
        broker_up(cluster)
        restart = time.monotonic()
        stt_worker(cluster)
        finished, latest = finish(client, handles, timeout=240, since=restart)
    finally:
        client.close()
    return outcome("node_loss", cluster, finished, latest)


def child_sigkill(cluster: Cluster, spoken: Spoken, workdir: Path, tag: int = 0) -> Outcome:
    """SIGKILL of the pool child running an STT job (what the OOM killer does)."""
    jobs = audio_jobs(cluster, spoken, workdir, 1, repeats=6, tag=tag)
    worker = stt_worker(cluster)
    sizes = log_sizes([worker])
    client = cluster.client()
    try:
        started = time.monotonic()
        handles = client.submit(jobs)
        assert wait_for(lambda: claim_owner(client, jobs[0]) is not None, timeout=120)
        owner = claim_owner(client, jobs[0])
        assert owner is not None and owner in worker.children(), (owner, worker.children())
        os.kill(owner, signal.SIGKILL)
        finished, latest = finish(client, handles, timeout=180, since=started)
    finally:
        client.close()
    noticed = logged_since(worker, sizes, "WorkerLostError") or logged_since(
        worker, sizes, "exited with"
    )
    return outcome("child_sigkill", cluster, finished, latest, worker_lost_seen=noticed)


def poison_job(cluster: Cluster, spoken: Spoken, workdir: Path, tag: int = 0) -> Outcome:
    """A job whose stage kills its process at every delivery, among 4 normal STT jobs."""
    jobs = audio_jobs(cluster, spoken, workdir, 4, repeats=1, tag=tag)
    stt_worker(cluster)
    client = cluster.client()
    try:
        started = time.monotonic()
        poison_key = ResultKey(Capability.AUDIO_TRANSCRIBE, POISON_VERSION, jobs[0].sha256)
        poison_id = str(uuid.uuid4())
        # Named by content like every message, its input put in the blob store first.
        ref = input_ref(MediaKind.AUDIO, jobs[0].path, jobs[0].sha256)
        client.node.blobs.put(ref, jobs[0].path)
        kwargs = {
            "key": str(poison_key),
            "blob": ref.to_json(),
            "trace_id": "poison",
            "params": {},
        }
        record = {"task": POISON_TASK, "kwargs": kwargs, "queue": "stt", "soft": 60, "hard": 90}
        client.journal.add(poison_id, {**record, "ttl": 3600})
        client.state.records.record_job(poison_id, record, 3600)
        client.app.send_task(POISON_TASK, kwargs=kwargs, task_id=poison_id, queue="stt")
        handles = client.submit(jobs)
        poison = JobHandle(poison_id, poison_key, jobs[0].path, Status.PENDING)
        finished, latest = finish(client, [*handles, poison], timeout=240, since=started)
        dead = client.state.dead_letters.newest(limit=10_000)
    finally:
        client.close()
    return outcome("poison_job", cluster, finished, latest, dead=dead)


def redis_restart(cluster: Cluster, workdir: Path, tag: int = 0, *, hard: bool) -> Outcome:
    """Redis shut down (or SIGKILLed) and restarted in the middle of a burst of 100 vision
    jobs; restarted once every worker has seen the connection drop."""
    cluster.fake.set(latency=0.05, reply="burst")
    jobs = image_jobs(cluster, workdir, range(100_000 + tag * 1000, 100_100 + tag * 1000))
    vision_worker(cluster)
    client = cluster.client()
    try:
        base = cluster.fake.request_count
        started = time.monotonic()
        handles = client.submit(jobs)
        assert wait_for(lambda: cluster.fake.request_count >= base + 25, timeout=120)
        noticed = broker_down(cluster, hard=hard)
        broker_up(cluster)
        finished, latest = finish(client, handles, timeout=180, since=started)
    finally:
        client.close()
    name = "redis_kill9" if hard else "redis_restart"
    seen = "never" if noticed is None else f"{noticed:.1f}s"
    return outcome(name, cluster, finished, latest, loss_noticed_in=seen)


def first_job_after_restart(
    cluster: Cluster, workdir: Path, tag: int = 0, *, down_for: float = 0.0
) -> Outcome:
    """redis-server SIGKILLed under an idle vision worker, kept down `down_for` seconds
    (`up` restarts it after a second or two), restarted on the same port; one fresh job is
    submitted the moment it answers. `first_job_s` runs from the broker's return to that
    job's result: how long the worker took to reconnect and take it."""
    cluster.fake.set(latency=0.0, reply="back")
    vision_worker(cluster)
    client = cluster.client()
    try:  # a first job warms the worker: what is measured is the way back, not a cold start
        warm = client.submit(image_jobs(cluster, workdir, range(400_000 + tag, 400_001 + tag)))
        finish(client, warm, timeout=120, since=time.monotonic())
    finally:
        client.close()
    noticed = broker_down(cluster, hard=True)
    time.sleep(down_for)  # the outage's length, not a wait for something
    broker_up(cluster)
    back = time.monotonic()
    jobs = image_jobs(cluster, workdir, range(300_000 + tag * 10, 300_001 + tag * 10))
    client = cluster.client()
    try:
        handles = client.submit(jobs)
        finished, latest = finish(client, handles, timeout=120, since=back)
    finally:
        client.close()
    seen = "never" if noticed is None else f"{noticed:.1f}s"
    return outcome(
        "first_job_after_restart",
        cluster,
        finished,
        latest,
        down_for_s=down_for,
        loss_noticed_in=seen,
        first_job_s=round(latest, 2),
    )


def stalled_consumer(cluster: Cluster, workdir: Path, tag: int = 0) -> Outcome:
    """A vision worker that stays alive but stops consuming (SIGUSR2 to the fault worker
    takes its channel's credit away for good); 20 jobs are submitted after the stall."""
    cluster.fake.set(latency=0.05, reply="stall")
    worker = cluster.start_worker("vision", VISION_THREADS, entry=FAULT_WORKER)
    sizes = log_sizes([worker])
    os.kill(worker.proc.pid, signal.SIGUSR2)
    assert wait_for(lambda: logged_since(worker, sizes, "stalled on purpose"), timeout=30)
    jobs = image_jobs(cluster, workdir, range(200_000 + tag * 100, 200_020 + tag * 100))
    client = cluster.client()
    try:
        started = time.monotonic()
        handles = client.submit(jobs)
        finished, latest = finish(client, handles, timeout=180, since=started)
    finally:
        client.close()
    noticed = logged_since(worker, sizes, "consumer stalled:")
    return outcome("stalled_consumer", cluster, finished, latest, watchdog_fired=noticed)


class CpuBurners:
    """One busy-looping process per core, started and stopped by PID."""

    def __init__(self, count: int | None = None) -> None:
        self.count = count if count is not None else (os.cpu_count() or 1)
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def __enter__(self) -> CpuBurners:
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()  # by the PID this object started, nothing else
            proc.wait(timeout=10)
