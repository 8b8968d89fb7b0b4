"""Admission by expected wait: a door that answers at once refuses a new job its caller would
wait for longer than it will (`MCP_MEDIA_API__WAIT`), so the caller hears "retry in N s"
instead of timing out.

The wait is estimated from the work ahead of the job in its queue (admitted jobs no worker
has started, plus the jobs running, at most one per slot), the slots of the live workers
serving the queue, and the measured mean service time of the queue's jobs (a moving average of
the time each done job held its slot, from its start to its result, kept beside the queue's
admission state). This module holds the arithmetic; the admission port
(`workers.state.admission`) applies it: its Redis adapter computes the same in its scripts,
so that a burst of submitters cannot all pass one estimate, and its in-memory twin calls
these functions.

The mean measured while the queue was idle is too optimistic when a burst arrives, so the
first wave can all be admitted against it. Late refusal corrects that: while an admitted job
still waits in its queue, its caller re-estimates from the job's position among the jobs
admitted before it and the current mean (which rises as the burst's jobs finish), and is told
to retry (429) as soon as the job can no longer finish within the caller's wait. The job stays
queued: the retry joins it (dedup) and gets its result. A job a worker has started is waited
for to the end.

Each capability has a live and a batch lane (`workers.core.capabilities.Lane`): "its queue"
above is the job's lane queue, so a batch backlog is never ahead of a live job (workers take
live work first, `workers.broker.lanes`); the running jobs and the mean are the
capability's, shared by both lanes (a running batch job holds a slot a live job waits for).
"""

from __future__ import annotations

import math

SERVICE_WEIGHT = 0.2  # weight of the newest job in the mean service time (the first 5 average)
RUNNING_TTL = 3600  # a started job whose worker died leaves the running set after this


def expected_wait(waiting: int, running: int, slots: int, mean: float) -> float | None:
    """Seconds until a job admitted now finishes; None when it would start at once or nothing
    is measured yet. A job that starts at once is never refused: refusing it would not make it
    sooner, however long it runs. With every slot busy, one job finishes every `mean / slots`
    seconds on average, so the job starts after `ahead - slots + 1` of them finish."""
    if mean <= 0 or slots <= 0:
        return None
    ahead = waiting + min(running, slots)
    if ahead < slots:
        return None
    return (ahead - slots + 1) * mean / slots + mean


def expected_finish(position: int, running: int, slots: int, mean: float) -> float:
    """Seconds until an admitted job that still waits finishes, with `position` admitted jobs
    ahead of it (admitted before it, not started): as `expected_wait`, and at least its own
    mean service time when it would start at once (it has not started yet)."""
    found = expected_wait(position, running, slots, mean)
    return found if found is not None else max(mean, 0.0)


def refuse_late(expected: float | None, left: float) -> bool:
    """Is a caller still waiting for its admitted job told to retry now? Only while the job
    waits in its queue (`expected` is not None), once it is expected to finish past the
    `left` seconds of the caller's wait, or that wait is over (a 429 with a time to retry
    instead of a 504)."""
    return expected is not None and (left <= 0 or expected > left)


def next_mean(mean: float, samples: int, seconds: float) -> float:
    """The mean service time after one more job took `seconds` (`samples` before it)."""
    weight = max(1.0 / (samples + 1), SERVICE_WEIGHT)
    return mean + weight * (seconds - mean)


def retry_after(expected: float, bound: float) -> int:
    """Seconds after which the work ahead should have drained enough to fit the bound."""
    return max(1, math.ceil(expected - bound))
