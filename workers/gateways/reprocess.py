"""`mcp-media reprocess`: walk the cache on disk and enqueue what needs (re)doing.

Selection reads the sidecar files, not Redis, so it works after Redis was flushed.
Enqueueing holds back while a queue has more than a high-water mark of waiting jobs, a
lock refuses a second concurrent run for the same kind, and the run waits for its jobs,
showing progress from the completion events.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, TextIO

from pipelines.cache import OUTPUTS
from pipelines.ingest import JOB_FOR_KIND
from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey, Status
from workers.core import keys
from workers.core.capabilities import CAPABILITIES, Lane
from workers.core.gateway import JobHandle, QueueFull
from workers.core.operations import AlreadyRunning, Selection
from workers.core.settings import Settings
from workers.files.blobs import Listed
from workers.files.shared_files import SharedFiles, open_shared_files

if TYPE_CHECKING:
    from workers.gateways.cluster import MediaClient
    from workers.state.coordination import Coordination

SIDECARS_READ = ".from-sidecars"  # in cache/outputs: earlier spoken replies are marked
LOCK_TTL = 30  # seconds; renewed while the run lives, so a crashed run frees it quickly
POLL = 0.2
REPORT_EVERY = 0.25  # seconds between two writes of a run's tally to Redis
REPORT_TTL = 3600  # a finished run's tally stays readable (the jobs page) this long


@dataclass
class Tally:
    selected: int = 0
    enqueued: int = 0
    skipped: int = 0
    done: int = 0
    degraded: int = 0
    failed: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, int]:
        return {
            "selected": self.selected,
            "enqueued": self.enqueued,
            "skipped": self.skipped,
            "done": self.done,
            "degraded": self.degraded,
            "failed": self.failed,
        }

    @property
    def finished(self) -> int:
        return self.done + self.degraded + self.failed


def select(
    settings: Settings,
    selection: Selection,
    tally: Tally,
    version: Callable[[Capability], str] | None = None,
    files: SharedFiles | None = None,
) -> Iterator[Listed]:
    """Media needing work under the current processor versions, from the blob store and
    the result sidecars alone (what the whole cluster holds, not Redis).

    `version` gives the version a job would get (a gateway's, from what the workers
    announce); without it, this process's own settings decide."""
    files = files or open_shared_files(settings)
    sidecars = files.sidecars
    if MediaKind.AUDIO in selection.kinds and not files.shared_nothing:
        mark_earlier_outputs(settings)  # a bucket marks outputs as they are stored
    since = selection.since.timestamp() if selection.since else None
    for kind in selection.kinds:
        capability = JOB_FOR_KIND[kind]
        version_now = version(capability) if version else CAPABILITIES[capability].version(settings)
        for item in files.blobs.inputs(kind):  # never our own outputs (spoken replies)
            if selection.limit is not None and tally.selected >= selection.limit:
                return
            if since is not None and item.modified < since:
                continue
            if selection.mode == "missing":
                envelope = sidecars.read(ResultKey(capability, version_now, item.sha256))
                if envelope is not None and (
                    envelope.status is Status.DONE or not selection.include_degraded
                ):
                    tally.skipped += 1
                    continue
            tally.selected += 1
            tally.by_kind[kind.value] = tally.by_kind.get(kind.value, 0) + 1
            yield item


def mark_earlier_outputs(settings: Settings) -> int:
    """Mark the spoken replies stored before the cache marked its outputs (their synthesis
    results name them), once per cache; how many were marked."""
    cache = settings.media_cache()
    done = cache.root / OUTPUTS / SIDECARS_READ
    if done.exists():
        return 0
    marked = 0
    for envelope in settings.sidecars().scan_capability(Capability.AUDIO_SYNTHESIZE):
        sha256 = envelope.output.get("audio_sha256")
        if isinstance(sha256, str) and len(sha256) == 64 and not cache.is_output(sha256):
            cache.mark_output(sha256)
            marked += 1
    (cache.root / OUTPUTS).mkdir(mode=0o700, parents=True, exist_ok=True)
    done.touch(mode=0o600)
    return marked


class _Lock:
    """One reprocess run per media kind across the cluster: a lock per kind (coordination),
    renewed while the run lives, so a crashed run frees it within `LOCK_TTL`."""

    def __init__(self, coordination: Coordination, kinds: tuple[MediaKind, ...]) -> None:
        self.coordination = coordination
        self.names = [keys.reprocess_lock(kind.value) for kind in kinds]
        self.token = secrets.token_hex(8)
        self._stop = threading.Event()

    def __enter__(self) -> _Lock:
        taken: list[str] = []
        for name in self.names:
            if not self.coordination.take_lock(name, self.token, LOCK_TTL):
                for held in taken:
                    self.coordination.release_lock(held, self.token)
                kind = name.rsplit(":", 1)[1]
                raise AlreadyRunning(
                    f"another reprocess run for {kind} is in progress; wait for it or stop it "
                    f"(its lock expires {LOCK_TTL} s after that run dies)"
                )
            taken.append(name)
        threading.Thread(target=self._renew, daemon=True).start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(LOCK_TTL / 3):
            for name in self.names:
                self.coordination.renew_lock(name, self.token, LOCK_TTL)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for name in self.names:
            self.coordination.release_lock(name, self.token)


class Progress:
    def __init__(self, tally: Tally, out: TextIO, interval: float = 5.0) -> None:
        self.tally = tally
        self.out = out
        self.tty = out.isatty()
        self.interval = 0.2 if self.tty else interval
        self.started = time.monotonic()
        self._last = 0.0

    def show(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        t = self.tally
        elapsed = max(now - self.started, 1e-6)
        rate = t.finished / elapsed
        left = t.enqueued - t.finished
        eta = f"{left / rate:.0f}s" if rate > 0 and left > 0 else "-"
        line = (
            f"enqueued {t.enqueued}/{t.selected} done {t.done} degraded {t.degraded} "
            f"failed {t.failed} rate {rate:.1f}/s eta {eta}"
        )
        if self.tty:
            width = 24
            filled = int(width * t.finished / t.selected) if t.selected else width
            self.out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {line}\x1b[K")
            if force:
                self.out.write("\n")
        else:
            self.out.write(f"reprocess: {line}\n")
        self.out.flush()


class Report:
    """The run's tally in Redis, one key per media kind, for the jobs page and any reader.

    Whether a run is still going is the lock's business (`running` here only says how this
    run last reported): a run that died leaves `running: true` and no lock.
    """

    def __init__(self, coordination: Coordination, selection: Selection, tally: Tally) -> None:
        self.coordination = coordination
        self.selection = selection
        self.tally = tally
        self.started_at = time.time()
        self._last = 0.0

    def write(self, *, done: bool = False) -> None:
        now = time.monotonic()
        if not done and now - self._last < REPORT_EVERY:
            return
        self._last = now
        body = {
            **self.tally.summary(),
            "kinds": [k.value for k in self.selection.kinds],
            "mode": self.selection.mode,
            "include_degraded": self.selection.include_degraded,
            "running": not done,
            "started_at": self.started_at,
            "finished_at": time.time() if done else None,
        }
        for kind in self.selection.kinds:
            self.coordination.put_report(keys.reprocess_progress(kind.value), body, REPORT_TTL)


def _count(tally: Tally, status: str) -> None:
    if status == Status.DONE.value:
        tally.done += 1
    elif status == Status.DEGRADED.value:
        tally.degraded += 1
    else:
        tally.failed += 1


def run(
    client: MediaClient,
    selection: Selection,
    *,
    dry_run: bool = False,
    wait: bool = True,
    out: TextIO = sys.stderr,
) -> Tally:
    tally = Tally()
    if dry_run:
        for _ in select(client.settings, selection, tally, client.version, client.files):
            pass
        return tally
    with _Lock(client.state.coordination, selection.kinds):
        events: SimpleQueue[Envelope] = SimpleQueue()
        stop_following = client.events.watch_all(events.put)
        pending: dict[ResultKey, JobHandle] = {}
        progress = Progress(tally, out)
        report = Report(client.state.coordination, selection, tally)
        report.write()
        try:
            try:
                chosen = select(client.settings, selection, tally, client.version, client.files)
                for item in chosen:
                    capability = JOB_FOR_KIND[item.kind]
                    while True:  # admission refuses over the high water: wait our turn
                        try:
                            handle = client.submit_one(
                                capability,
                                item.sha256,
                                item.path or Path(item.ref.key),
                                ref=item.ref,
                                params={"force": True} if selection.mode == "all" else None,
                                force=selection.mode == "all",
                                limit=True,
                                lane=Lane.BATCH,
                            )
                            break
                        except QueueFull:
                            _drain(events, pending, tally)
                            progress.show()
                            report.write()
                            time.sleep(POLL)
                    tally.enqueued += 1
                    if handle.envelope is not None:
                        _count(tally, handle.status.value)
                    else:
                        pending[handle.key] = handle
                    _drain(events, pending, tally)
                    progress.show()
                    report.write()
            except KeyboardInterrupt:
                out.write(
                    "\nreprocess: interrupted: no more jobs are enqueued; "
                    "those already enqueued will still run\n"
                )
                raise
            while wait and pending:
                _drain(events, pending, tally, timeout=1.0)
                _recheck(client, pending, tally)
                progress.show()
                report.write()
        finally:
            progress.show(force=True)
            report.write(done=True)
            stop_following()
    return tally


def _drain(
    events: SimpleQueue[Envelope],
    pending: dict[ResultKey, JobHandle],
    tally: Tally,
    timeout: float = 0.0,
) -> None:
    """Count the stored results that answer pending jobs, waiting up to `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            envelope = events.get(timeout=max(0.0, deadline - time.monotonic()))
        except Empty:
            return
        handle = pending.get(envelope.key)
        if handle is not None and handle.answered_by(envelope):
            del pending[envelope.key]
            _count(tally, envelope.status.value)


def _recheck(client: MediaClient, pending: dict[ResultKey, JobHandle], tally: Tally) -> None:
    """Events are fire-and-forget: also look results up, in case one was missed."""
    found = client.state.results.get_many(list(pending))
    for key, envelope in found.items():
        if pending[key].answered_by(envelope):
            pending.pop(key)
            _count(tally, envelope.status.value)
