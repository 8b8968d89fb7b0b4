"""A live job beside a batch backlog on one Celery worker: `python -m bench lanes`.

Our transport, late acks and prefetch 1 as the workers run; a threads worker of 4 slots; a
task that sleeps JOB_S and notes when it started and ended. Five runs, one after the other
on the same broker, side by side:

- `alone`: live jobs only, no batch (the live job's time alone);
- `fifo`: one queue, live and batch messages in the order sent (before lanes);
- `priority`: one queue, kombu's priority steps (live 0, batch 9: two Redis lists, BRPOP'd
  in priority order);
- `round_robin`: a queue per lane, kombu's default queue order;
- `lanes`: a queue per lane, `workers.broker.lanes.LaneCycle` (live first, one fetch in
  EVERY batch first while both wait).

Each: BATCH jobs queued (none when alone), then LIVE jobs sent one at a time GAP_S apart (a
live job's wait, from its send to its start; the worker's messages held, sampled); a burst
of live jobs at once; then a steady live stream (at least STREAM_DEPTH live jobs always
waiting, for STREAM_S) beside the batch: the batch lane's share of the jobs started
meanwhile (its floor).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import redis
from celery import Celery

from bench.cluster import BenchCluster
from bench.jobs import percentile
from bench.results import record
from workers.broker.celery_config import base_app
from workers.core.settings import Settings

JOB_S = 0.2
SLOTS = 4
BATCH = 200
LIVE = 12
GAP_S = 0.5
BURST = 8  # live jobs sent at once, twice the slots
STREAM_S = 6.0
STREAM_DEPTH = 8
EVERY = 10
LIVE_Q, BATCH_Q = "vision", "vision.batch"
DONE = "bench:lanes:done"  # list: JSON {id, lane, start, end} per job
STARTED = "bench:lanes:started"  # hash: lane -> jobs started
RUNNING = "bench:lanes:running"  # counter: jobs running now
MECHANISMS = {
    "alone": ("workers.broker.lanes:LaneCycle", True, False),  # no batch is sent
    "fifo": ("round_robin", False, False),  # (queue order, a queue per lane, priorities)
    "priority": ("round_robin", False, True),
    "round_robin": ("round_robin", True, False),
    "lanes": ("workers.broker.lanes:LaneCycle", True, False),
}
TASK = "bench.lanes.job"


def make_app(url: str, order: str, home: str) -> Celery:
    app = base_app(Settings.from_env({"MCP_MEDIA_HOME": home}), url)
    options = dict(app.conf.broker_transport_options)
    options.update(queue_order_strategy=order, batch_every=EVERY)
    app.conf.broker_transport_options = options
    client = redis.Redis.from_url(url)

    @app.task(name=TASK, bind=True, acks_late=True)  # type: ignore[untyped-decorator]
    def job(self: Any, lane: str, seconds: float) -> None:
        started = time.time()
        pipe = client.pipeline()
        pipe.incr(RUNNING)
        pipe.hincrby(STARTED, lane, 1)
        pipe.execute()
        try:
            time.sleep(seconds)
        finally:
            client.decr(RUNNING)
        done = {"id": self.request.id, "lane": lane, "start": started, "end": time.time()}
        client.rpush(DONE, json.dumps(done))

    return app


def _worker(url: str, order: str, home: str, queues: str) -> int:
    """The worker process: `python -m bench.lanes URL ORDER HOME QUEUES`."""
    app = make_app(url, order, home)
    argv = ["worker", "-P", "threads", "-c", str(SLOTS), "-Q", queues, "--loglevel", "WARNING"]
    app.worker_main([*argv, "--without-mingle", "--without-gossip", "--without-heartbeat"])
    return 0


class Sender:
    def __init__(self, app: Celery, lanes: bool, priorities: bool) -> None:
        self.app, self.lanes, self.priorities = app, lanes, priorities
        self.sent: dict[str, tuple[str, float]] = {}  # job id -> (lane, sent at)

    def send(self, lane: str) -> str:
        job_id = str(uuid.uuid4())
        queue = BATCH_Q if self.lanes and lane == "batch" else LIVE_Q
        options: dict[str, Any] = {"queue": queue, "task_id": job_id}
        if self.priorities:
            options["priority"] = 9 if lane == "batch" else 0
        self.sent[job_id] = (lane, time.time())
        self.app.send_task(TASK, args=[lane, JOB_S], **options)
        return job_id

    def count(self, lane: str) -> int:
        return sum(1 for sent_lane, _ in self.sent.values() if sent_lane == lane)


def _started(r: redis.Redis[bytes], lane: str) -> int:
    return int(r.hget(STARTED, lane) or 0)


def _measure(cluster: BenchCluster, name: str) -> dict[str, Any]:
    order, lanes, priorities = MECHANISMS[name]
    r = cluster.redis()
    r.flushdb()
    home = str(cluster.home)
    queues = f"{LIVE_Q},{BATCH_Q}" if lanes else LIVE_Q
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.lanes", cluster.url, order, home, queues],
        env=cluster.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    app = make_app(cluster.url, order, home)
    sender = Sender(app, lanes, priorities)
    try:
        sender.send("live")  # the worker consumes before anything is measured
        while r.llen(DONE) < 1:
            time.sleep(0.05)
        for _ in range(0 if name == "alone" else BATCH):
            sender.send("batch")
        probes, hoarded, held = [], 0, 0
        for _ in range(LIVE):
            probes.append(sender.send("live"))
            until = time.monotonic() + GAP_S
            while time.monotonic() < until:
                pipe = r.pipeline()
                pipe.hlen("unacked")  # kombu's: delivered to a worker, not acked
                pipe.get(RUNNING)
                unacked, running = pipe.execute()
                hoarded = max(hoarded, int(unacked) - int(running or 0))
                held = max(held, int(unacked))
                time.sleep(0.02)
        burst = [sender.send("live") for _ in range(BURST)]
        while _started(r, "live") < 1 + LIVE + BURST:
            time.sleep(0.02)
        stream_from = time.time()  # a steady live stream beside the rest of the batch
        while name != "alone" and time.time() - stream_from < STREAM_S:
            while sender.count("live") - _started(r, "live") < STREAM_DEPTH:
                sender.send("live")
            time.sleep(0.02)
        stream_to = time.time()
        while r.llen(DONE) < len(sender.sent):
            time.sleep(0.1)
        done = {d["id"]: d for d in (json.loads(raw) for raw in r.lrange(DONE, 0, -1))}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        app.close()
        r.close()
    waits = [done[i]["start"] - sender.sent[i][1] for i in probes]
    times = [done[i]["end"] - sender.sent[i][1] for i in probes]
    window = [d for d in done.values() if stream_from <= d["start"] < stream_to]
    return {
        "live_wait_p50": percentile(waits, 50),
        "live_wait_max": max(waits),
        "live_time_p50": percentile(times, 50),
        "burst_wait_max": max(done[i]["start"] - sender.sent[i][1] for i in burst),
        "batch_share": sum(d["lane"] == "batch" for d in window) / max(len(window), 1),
        "hoarded": hoarded,
        "held_max": held,
    }


def _line(name: str, m: dict[str, Any]) -> str:
    line = (
        f"  {name:12} live wait p50 {m['live_wait_p50']:.3f} s, max {m['live_wait_max']:.3f} s;"
        f" send to end p50 {m['live_time_p50']:.3f} s; {BURST} live at once: the last waited"
        f" {m['burst_wait_max']:.3f} s; messages held at most {m['held_max']} ({SLOTS} slots)"
    )
    return (
        line
        if name == "alone"
        else f"{line}; batch share under a live stream {m['batch_share']:.0%}"
    )


def run() -> None:
    with BenchCluster() as cluster:
        found = {name: _measure(cluster, name) for name in MECHANISMS}
    print(f"a live job's wait, {BATCH} batch jobs of {JOB_S} s queued first (none: alone):")
    for name, m in found.items():
        print(_line(name, m))
    alone = found["alone"]
    for name, m in found.items():
        behind = "no batch" if name == "alone" else f"{BATCH} batch jobs of {JOB_S} s"
        record(
            f"lanes_live_wait_p50_{name}",
            {
                "value": round(m["live_wait_p50"], 3),
                "unit": (
                    f"s from send to start of a live job, {behind} queued first ({SLOTS} slots;"
                    f" max {m['live_wait_max']:.3f} s; {BURST} live at once: the last waited "
                    f"{m['burst_wait_max']:.3f} s)"
                ),
                "baseline": None if name == "alone" else round(alone["live_wait_p50"], 3),
                "baseline_of": "the same live jobs with no batch queued",
                "ratio": None,
                "target": "report",
                "better": "lower",
            },
        )
    lanes = found["lanes"]
    # Within about one batch job of its time alone: the baseline is that time plus one job.
    within = alone["live_time_p50"] + JOB_S
    record(
        "lanes_live_time_p50",
        {
            "value": round(lanes["live_time_p50"], 3),
            "unit": f"s from send to end of a live job behind {BATCH} batch jobs, with lanes",
            "baseline": round(within, 3),
            "baseline_of": f"no batch (p50 {alone['live_time_p50']:.3f} s) + one job ({JOB_S} s)",
            "ratio": round(lanes["live_time_p50"] / alone["live_time_p50"], 3),
            "target": "value <= baseline",
            "better": "lower",
        },
    )
    record(
        "lanes_live_wait_max",
        {
            "value": round(lanes["live_wait_max"], 3),
            "unit": f"s, the longest a live job waited with lanes (one batch job: {JOB_S} s)",
            "baseline": None,
            "ratio": None,
            "target": f"value <= {2 * JOB_S}",
            "better": "lower",
        },
    )
    record(
        "lanes_batch_floor_share",
        {
            "value": round(lanes["batch_share"], 3),
            "unit": (
                f"of the jobs started under a steady live stream with lanes (one fetch in "
                f"{EVERY}; priority "
                f"{found['priority']['batch_share']:.0%}, round robin "
                f"{found['round_robin']['batch_share']:.0%})"
            ),
            "baseline": None,
            "ratio": None,
            "target": f"value >= {0.5 / EVERY}",
            "better": "higher",
        },
    )
    record(
        "lanes_messages_held",
        {
            "value": lanes["held_max"],
            "unit": (
                f"messages a worker of {SLOTS} slots held at most (kombu's unacked, sampled "
                f"every 20 ms; beyond those running at a sample: {lanes['hoarded']}, a job "
                "between its delivery and its start or its end and its ack)"
            ),
            "baseline": None,
            "ratio": None,
            "target": f"value <= {SLOTS}",
            "better": "lower",
        },
    )


if __name__ == "__main__":
    sys.exit(_worker(*sys.argv[1:5]))
