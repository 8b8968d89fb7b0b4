"""Every Redis key and channel mcp-media uses, in one place."""

from __future__ import annotations

from pipelines.results import ResultKey

PREFIX = "mcp-media"
EVENTS = f"{PREFIX}:events"
DEAD_LETTERS = f"{PREFIX}:dead"
DEAD_LETTERS_READ = 10_000  # the newest dead letters counted, searched and dropped
WORKERS = f"{PREFIX}:workers"  # hash: node name -> JSON description, refreshed by heartbeat


def claim(key: ResultKey) -> str:
    return f"{PREFIX}:claim:{key}"


def result(key: ResultKey) -> str:
    return f"{PREFIX}:result:{key}"


def inflight(key: ResultKey) -> str:
    return f"{PREFIX}:inflight:{key}"


def admitted(queue: str) -> str:
    """Sorted set: the jobs admitted to `queue` that no worker has started, by expiry."""
    return f"{PREFIX}:admitted:{queue}"


def queued(queue: str) -> str:
    """Sorted set: the same jobs as `admitted`, by admission time (the order workers take
    them), so a waiting job knows how many are ahead of it."""
    return f"{PREFIX}:queued:{queue}"


def running(queue: str) -> str:
    """Sorted set: the jobs of `queue` a worker started and has not finished, by expiry."""
    return f"{PREFIX}:running:{queue}"


def service(queue: str) -> str:
    """Hash: the mean seconds a done job of `queue` took (`mean`) over `n` jobs."""
    return f"{PREFIX}:service:{queue}"


def job(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}"


def deliveries(job_id: str) -> str:
    return f"{PREFIX}:deliveries:{job_id}"


def latest(capability: str, sha256: str) -> str:
    """The newest result key for a sha256, whatever the processor version."""
    return f"{PREFIX}:latest:{capability}:{sha256}"


def semaphore(name: str) -> str:
    return f"{PREFIX}:semaphore:{name}"


def counts(capability: str) -> str:
    """Hash: status -> how many result keys of `capability` stand at it."""
    return f"{PREFIX}:counts:{capability}"


def counted(capability: str) -> str:
    """Hash: result key -> the status it is counted at in `counts`, one field per key, as
    the previous version kept it without bound. Read and taken field by field as each key
    is stored again (workers.state.status_index); nothing adds to it any more."""
    return f"{PREFIX}:counted:{capability}"


LEASES = f"{PREFIX}:leases"  # sorted set: job id -> lease expiry (unix time)
# "<run_id>:<master_replid> <server time first seen>": which Redis serves us, since when.
BROKER_IDENTITY = f"{PREFIX}:broker-identity"


def job_record(job_id: str) -> str:
    """What is needed to re-send a job whose worker died: task, arguments, queue, limits."""
    return f"{PREFIX}:jobrec:{job_id}"


CHUNKS_PREFIX = f"{PREFIX}:chunks:"


def chunks(key: ResultKey) -> str:
    """The stream a worker writes a job's output to as it comes (see workers.state.chunks)."""
    return f"{CHUNKS_PREFIX}{key}"


SWEEP_LOCK = f"{PREFIX}:sweep"  # held by the one worker sweeping the job journal right now

RECENT = f"{PREFIX}:recent"  # list: result keys, newest first, trimmed (the jobs page)
PAUSED = f"{PREFIX}:paused"  # set: queues no worker may consume (pause/resume on the page)


def lock(name: str) -> str:
    """A named lock with a token (`reprocess:<kind>`: one reprocess run per media kind)."""
    return f"{PREFIX}:{name}"


def report(name: str) -> str:
    """A named report (`reprocess-progress:<kind>`: the tally of that kind's reprocess run,
    while it runs and a while after)."""
    return f"{PREFIX}:{name}"


def reprocess_lock(kind: str) -> str:
    """The lock name of the reprocess run of one media kind."""
    return f"reprocess:{kind}"


def reprocess_progress(kind: str) -> str:
    """The report name of the reprocess run of one media kind."""
    return f"reprocess-progress:{kind}"


def reprocess_checkpoint(kind: str) -> str:
    """The report name of where the reprocess run of one media kind stopped: the last
    sha256 it submitted, so a run that died resumes after it."""
    return f"reprocess-checkpoint:{kind}"


def job_cancel(job_id: str) -> str:
    """The report name that asks a job to stop (`tasks/cancel`): its worker checks it before
    it starts and at every checkpoint of the stage."""
    return f"job-cancel:{job_id}"


def job_progress(job_id: str) -> str:
    """The report name of a running job's progress (seconds of input done so far)."""
    return f"job-progress:{job_id}"
