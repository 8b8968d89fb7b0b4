"""What a reprocess run submits, and where a killed run stopped.

The plan is a merge-join of the store's index (`workers.files.store_index`): the inputs of
a kind and the results of its current version, both listed in sha256 order, so planning a
million items holds one of each at a time, and a bucket answers about 1,000 names a
request instead of a HEAD per blob. Selection reads the store, not Redis, so it works after
Redis was flushed.

A run records the last sha256 it submitted of each kind (`Checkpoint`, in Redis); a run of
the same selection and versions started after one that died lists again after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.cache import OUTPUTS
from pipelines.ingest import JOB_FOR_KIND
from pipelines.media import Capability, MediaKind
from workers.core import keys
from workers.core.capabilities import CAPABILITIES
from workers.core.operations import Selection
from workers.core.settings import Settings
from workers.files.blobs import Listed
from workers.files.shared_files import SharedFiles, open_shared_files
from workers.files.sorted_join import with_settled

if TYPE_CHECKING:
    from workers.state.coordination import Coordination

# The job a reprocess run gives each kind: documents get their digest again.
REPROCESSED: Mapping[MediaKind, Capability] = {
    **JOB_FOR_KIND,
    MediaKind.DOCUMENT: Capability.DOCUMENT_DIGEST,
}
SIDECARS_READ = ".from-sidecars"  # in cache/outputs: earlier spoken replies are marked
CHECKPOINT_TTL = 7 * 24 * 3600  # seconds a killed run can be resumed after


@dataclass
class Tally:
    total: int = 0  # what this run plans to submit (after the point it resumed from)
    resumed: int = 0  # submitted by the earlier run this one resumed
    selected: int = 0
    enqueued: int = 0
    skipped: int = 0
    done: int = 0
    degraded: int = 0
    failed: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, int]:
        return {
            "total": self.total,
            "resumed": self.resumed,
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


@dataclass(frozen=True, slots=True)
class Plan:
    """One kind's part of a run: its version now and where its listing starts."""

    kind: MediaKind
    version: str
    after: str = ""  # the last sha256 an earlier run of this selection submitted
    submitted: int = 0  # how many that run submitted


def plans(
    settings: Settings,
    selection: Selection,
    version: Callable[[Capability], str] | None,
    checkpoint: Checkpoint | None,
) -> list[Plan]:
    made = []
    for kind in selection.kinds:
        capability = REPROCESSED[kind]
        now = version(capability) if version else CAPABILITIES[capability].version(settings)
        plan = Plan(kind, now)
        made.append(checkpoint.resume(plan) if checkpoint else plan)
    return made


def select(
    settings: Settings,
    selection: Selection,
    tally: Tally,
    version: Callable[[Capability], str] | None = None,
    files: SharedFiles | None = None,
    kinds: list[Plan] | None = None,
) -> Iterator[Listed]:
    """Media needing work under the current versions, from the store's index (what the
    whole cluster holds, not Redis), each kind in sha256 order from where its plan starts.

    `version` gives the version a job would get (a gateway's, from what the workers
    announce); without it, this process's own settings decide."""
    files = files or open_shared_files(settings)
    kinds = kinds if kinds is not None else plans(settings, selection, version, None)
    if MediaKind.AUDIO in selection.kinds and not files.shared_nothing:
        mark_earlier_outputs(settings)  # a bucket marks outputs as they are stored
    since = selection.since.timestamp() if selection.since else None
    index = files.index
    limit = selection.limit
    for plan in kinds:
        capability = REPROCESSED[plan.kind]
        items = index.inputs(plan.kind, plan.after)  # never our own outputs (spoken replies)
        if selection.mode == "missing":
            results = index.results(capability, plan.version, plan.after)
            redo = index.unsettled(capability, plan.version, plan.after)
            joined = with_settled(items, results, redo if selection.include_degraded else ())
        else:
            joined = ((item, False) for item in items)
        for item, settled in joined:
            if limit is not None and tally.resumed + tally.selected >= limit:
                return
            listed = index.listed(plan.kind, item) if since is not None else None
            if since is not None and (listed is None or listed.modified < since):
                continue
            if settled:
                tally.skipped += 1
                continue
            listed = listed or index.listed(plan.kind, item)
            if listed is None:
                continue  # gone since it was listed
            tally.selected += 1
            tally.by_kind[plan.kind.value] = tally.by_kind.get(plan.kind.value, 0) + 1
            yield listed


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


class Checkpoint:
    """The last sha256 submitted of each kind, in Redis (one small report per kind), written
    after each submission: a run that dies resubmits at most the one item it was submitting.

    It counts only for a run of the same selection under the same versions; a run that
    ended (or ran out of items) marks it complete, so the next run starts afresh."""

    def __init__(self, coordination: Coordination, selection: Selection) -> None:
        self.coordination = coordination
        self.selection = selection
        self._seen: dict[MediaKind, dict[str, Any]] = {}

    def _signature(self, plan: Plan) -> dict[str, Any]:
        s = self.selection
        since = s.since.isoformat() if s.since else None
        return {
            "mode": s.mode,
            "include_degraded": s.include_degraded,
            "since": since,
            "limit": s.limit,
            "kinds": [kind.value for kind in s.kinds],
            "version": plan.version,
        }

    def resume(self, plan: Plan) -> Plan:
        found = self.coordination.report(keys.reprocess_checkpoint(plan.kind.value))
        if not found or found.get("complete") or found.get("of") != self._signature(plan):
            return plan
        return Plan(
            plan.kind,
            plan.version,
            str(found.get("after", "")),
            int(found.get("submitted", 0)),
        )

    def submitted(self, plan: Plan, sha256: str, count: int) -> None:
        """`count` items of this kind are submitted, the last one `sha256` (in order)."""
        self._put(plan, after=sha256, submitted=count)

    def complete(self, plan: Plan) -> None:
        self._put(plan, after="", submitted=0, complete=True)

    def _put(self, plan: Plan, **body: Any) -> None:
        body |= {"of": self._signature(plan), "at": time.time()}
        name = keys.reprocess_checkpoint(plan.kind.value)
        self.coordination.put_report(name, body, CHECKPOINT_TTL)
