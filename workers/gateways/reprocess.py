"""`mcp-media reprocess`: plan from the store's index what needs (re)doing and enqueue it.

The plan (`workers.gateways.reprocess_plan`) streams from the index in sha256 order, once to
count it and once to submit it. Enqueueing holds back while a queue has more than a
high-water mark of waiting jobs, a lock refuses a second concurrent run for the same kind, a
checkpoint lets a run that died resume where it stopped, and the run waits for its jobs,
showing progress (done / total, rate, time left) from the completion events.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, TextIO

from pipelines.media import MediaKind
from pipelines.results import Envelope, ResultKey, Status
from workers.core import keys
from workers.core.capabilities import Lane
from workers.core.gateway import JobHandle, QueueFull
from workers.core.operations import AlreadyRunning, Selection
from workers.gateways.reprocess_plan import (
    REPROCESSED,
    Checkpoint,
    Plan,
    Tally,
    mark_earlier_outputs,
    plans,
    select,
)

if TYPE_CHECKING:
    from workers.gateways.cluster import MediaClient
    from workers.state.coordination import Coordination

__all__ = ["Tally", "mark_earlier_outputs", "run", "select"]

LOCK_TTL = 30  # seconds; renewed while the run lives, so a crashed run frees it quickly
POLL = 0.2
REPORT_EVERY = 0.25  # seconds between two writes of a run's tally to Redis
REPORT_TTL = 3600  # a finished run's tally stays readable (the jobs page) this long


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


@dataclass(frozen=True, slots=True)
class Pace:
    """How far a run is: its tally with the rate of results and the time left at it."""

    tally: Tally
    seconds: float  # since the run began submitting

    @property
    def rate(self) -> float:
        return self.tally.finished / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta(self) -> float | None:
        left = self.tally.total - self.tally.finished
        return left / self.rate if self.rate > 0 and left > 0 else None

    def figures(self) -> dict[str, Any]:
        eta = self.eta
        return {
            **self.tally.summary(),
            "rate": round(self.rate, 3),
            "eta_seconds": round(eta, 1) if eta is not None else None,
            "seconds": round(self.seconds, 1),
        }

    def line(self) -> str:
        t = self.tally
        eta = f"{self.eta:.0f}s" if self.eta is not None else "-"
        resumed = f" (resumed after {t.resumed})" if t.resumed else ""
        return (
            f"enqueued {t.enqueued}/{t.total} done {t.finished}/{t.total}{resumed} "
            f"degraded {t.degraded} failed {t.failed} rate {self.rate:.1f}/s eta {eta}"
        )


class Progress:
    """Progress on `out`: a bar on a terminal, a line every `interval` seconds otherwise,
    or one JSON object a line (`as_json`)."""

    def __init__(
        self, tally: Tally, out: TextIO, interval: float = 5.0, *, as_json: bool = False
    ) -> None:
        self.tally = tally
        self.out = out
        self.as_json = as_json
        self.tty = out.isatty() and not as_json
        self.interval = 0.2 if self.tty else interval
        self.started = time.monotonic()
        self._last = 0.0

    def pace(self) -> Pace:
        return Pace(self.tally, time.monotonic() - self.started)

    def show(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        pace = self.pace()
        t = self.tally
        if self.as_json:
            self.out.write(json.dumps({"reprocess": pace.figures()}) + "\n")
        elif self.tty:
            width = 24
            filled = int(width * t.finished / t.total) if t.total else width
            self.out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {pace.line()}\x1b[K")
            if force:
                self.out.write("\n")
        else:
            self.out.write(f"reprocess: {pace.line()}\n")
        self.out.flush()


class Report:
    """The run's progress in Redis, one key per media kind, for the jobs page, `/metrics`
    and any reader.

    Whether a run is still going is the lock's business (`running` here only says how this
    run last reported): a run that died leaves `running: true` and no lock.
    """

    def __init__(self, coordination: Coordination, selection: Selection, progress: Progress):
        self.coordination = coordination
        self.selection = selection
        self.progress = progress
        self.started_at = time.time()
        self._last = 0.0

    def write(self, *, done: bool = False) -> None:
        now = time.monotonic()
        if not done and now - self._last < REPORT_EVERY:
            return
        self._last = now
        body = {
            **self.progress.pace().figures(),
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


def _prepare(
    client: MediaClient, selection: Selection, kinds: list[Plan], *, again: bool, out: TextIO
) -> None:
    """Index what was stored before the store kept an index (once, or `again`)."""
    versions = [(REPROCESSED[plan.kind], plan.version) for plan in kinds]
    unsettled = selection.mode == "missing" and selection.include_degraded

    def say(line: str) -> None:
        out.write(f"reprocess: {line}\n")

    done = client.files.index.prepare(versions, unsettled=unsettled, again=again, progress=say)
    if done.blobs_marked or done.results_read:
        out.write(
            f"reprocess: indexed {done.blobs_marked} blobs, read {done.results_read} results "
            f"({done.unsettled_marked} not done)\n"
        )


def run(
    client: MediaClient,
    selection: Selection,
    *,
    dry_run: bool = False,
    wait: bool = True,
    out: TextIO = sys.stderr,
    as_json: bool = False,
    restart: bool = False,
    backfill: bool = False,
) -> Tally:
    """One run. Unless `restart`, a run of the same selection and versions that stopped
    before its end is resumed after the last item it submitted; `backfill` indexes the
    store's blobs and results again (for blobs stored by nodes that kept no index)."""
    tally = Tally()
    settings, files = client.settings, client.files
    if dry_run:  # what a run would enqueue now: resuming a stopped one too, unless `restart`
        stopped = None if restart else Checkpoint(client.state.coordination, selection)
        kinds = plans(settings, selection, client.version, stopped)
        _prepare(client, selection, kinds, again=backfill, out=out)
        tally.resumed = sum(plan.submitted for plan in kinds)
        for _ in select(settings, selection, tally, client.version, files, kinds):
            pass
        tally.total = tally.selected
        return tally
    with _Lock(client.state.coordination, selection.kinds):
        checkpoint = Checkpoint(client.state.coordination, selection)
        kinds = plans(settings, selection, client.version, None if restart else checkpoint)
        _prepare(client, selection, kinds, again=backfill, out=out)
        tally.resumed = sum(plan.submitted for plan in kinds)
        if tally.resumed:
            out.write(
                f"reprocess: resuming after the {tally.resumed} items a stopped run submitted "
                "(--restart starts over)\n"
            )
        counted = Tally(resumed=tally.resumed)
        for _ in select(settings, selection, counted, client.version, files, kinds):
            pass  # a first pass counts the plan: the total progress is measured against
        tally.total = counted.selected
        events: SimpleQueue[Envelope] = SimpleQueue()
        stop_following = client.events.watch_all(events.put)
        pending: dict[ResultKey, JobHandle] = {}
        progress = Progress(tally, out, as_json=as_json)
        report = Report(client.state.coordination, selection, progress)
        report.write()
        by_kind = {plan.kind: plan for plan in kinds}
        sent = {plan.kind: plan.submitted for plan in kinds}
        try:
            try:
                for item in select(settings, selection, tally, client.version, files, kinds):
                    capability = REPROCESSED[item.kind]
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
                    sent[item.kind] += 1
                    checkpoint.submitted(by_kind[item.kind], item.sha256, sent[item.kind])
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
                    "those already enqueued will still run (run again to resume)\n"
                )
                raise
            while wait and pending:
                _drain(events, pending, tally, timeout=1.0)
                _recheck(client, pending, tally)
                progress.show()
                report.write()
            for plan in kinds:
                checkpoint.complete(plan)
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
