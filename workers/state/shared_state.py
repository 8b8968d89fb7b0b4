"""What the nodes of a cluster share through Redis, as small ports held side by side: the
composite `SharedState`, built over Redis (`redis_state`) or in memory (`memory_state`).

Each port is one module holding its Protocol, its Redis adapter and its in-memory twin,
checked by one contract (tests/support/state_contract): results, admission, job records,
claims, dead letters, coordination, chunk streams and the status index; and the read-only
cluster view over them (its port is the doors', `workers.core.cluster_view`; its
implementation `workers.state.state_view`). A caller names the port it uses
(`state.claims.claim(...)`): this composite only holds them, builds them over one client,
and closes that client. (What the nodes share as files is `workers.files.shared_files`.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import redis

from pipelines.results import ResultFiles
from workers.broker.message_keys import MessageKeys
from workers.broker.target import RedisTarget, bounded_client, resilient
from workers.core.cluster_view import ClusterView
from workers.core.settings import Settings
from workers.state.admission import QueueAdmission, RedisAdmission
from workers.state.admission_twin import CountedAdmission
from workers.state.chunks import ChunkStreams, MemoryChunks, RedisChunks
from workers.state.claims import Claims, MemoryClaims, RedisClaims
from workers.state.coordination import Coordination, MemoryCoordination, RedisCoordination
from workers.state.dead_letters import DeadLetters, MemoryDeadLetters, RedisDeadLetters
from workers.state.job_records import JobRecords, MemoryJobRecords, RedisJobRecords
from workers.state.results import MemoryResults, RedisResults, Results
from workers.state.roster import MemoryRoster, RedisRoster, Roster
from workers.state.state_view import SharedStateView
from workers.state.status_index import (
    ENTRY_TTL,
    MemoryStatusIndex,
    RedisStatusIndex,
    StatusIndex,
)


@dataclass(frozen=True, slots=True)
class SharedState:
    results: Results
    admission: QueueAdmission
    records: JobRecords
    claims: Claims
    dead_letters: DeadLetters
    coordination: Coordination
    chunks: ChunkStreams
    status: StatusIndex
    view: ClusterView
    closer: Callable[[], None]

    def close(self) -> None:
        self.closer()


def redis_state(
    client: redis.Redis[bytes],
    sidecars: ResultFiles,
    result_ttl: int,
    transport: Mapping[str, Any] | None = None,
) -> SharedState:
    """The ports over Redis `client` (closed with the state), the results' truth in
    `sidecars`, index entries kept `result_ttl` seconds; Celery's messages kept as the
    `transport` options say (`MCP_MEDIA_REDIS_TRANSPORT_OPTIONS`: key prefix, priority
    steps), which the view counts."""
    status = RedisStatusIndex(client)
    admission = RedisAdmission(client, result_ttl)
    roster = RedisRoster(client, MessageKeys.of(transport))
    return _composed(
        RedisResults(client, sidecars, result_ttl, status, admission),
        admission,
        status,
        (RedisJobRecords(client), RedisClaims(client), RedisChunks(client)),
        (RedisDeadLetters(client), RedisCoordination(client), roster),
        client.close,
    )


def memory_state(
    sidecars: ResultFiles,
    clock: Callable[[], float] = time.monotonic,
    result_ttl: float = ENTRY_TTL,
) -> SharedState:
    """The in-memory twins, for one process (`--inline` runs, unit tests), over the same
    sidecars (so results survive the process and dedup across runs), on one `clock`, index
    entries kept `result_ttl` seconds."""
    status = MemoryStatusIndex(clock, result_ttl)
    admission = CountedAdmission(status, clock)
    return _composed(
        MemoryResults(sidecars, status, admission),
        admission,
        status,
        (MemoryJobRecords(clock), MemoryClaims(clock), MemoryChunks()),
        (MemoryDeadLetters(), MemoryCoordination(clock), MemoryRoster(admission, clock)),
        lambda: None,
    )


def _composed(
    results: Results,
    admission: QueueAdmission,
    status: StatusIndex,
    apart: tuple[JobRecords, Claims, ChunkStreams],
    viewed: tuple[DeadLetters, Coordination, Roster],
    closer: Callable[[], None],
) -> SharedState:
    """The state holding these ports, and its view over those it reads (`viewed`, with the
    roster); `apart` are the ports no view reads."""
    records, claims, chunks = apart
    dead_letters, coordination, roster = viewed
    view = SharedStateView(roster, results, status, dead_letters, coordination)
    return SharedState(
        results,
        admission,
        records,
        claims,
        dead_letters,
        coordination,
        chunks,
        status,
        view,
        closer,
    )


def broker_client(
    settings: Settings, url: str | None = None, *, bounded: bool = False
) -> redis.Redis[bytes]:
    """A client of `url` (default MCP_MEDIA_REDIS_URL), reached as the settings say (TLS,
    Sentinel), that rides out a broker restart or failover (`bounded`: one that raises
    within the API's broker timeouts instead, for a door whose caller is waiting)."""
    target = RedisTarget.of(settings, url)
    api = settings.api
    if bounded:
        return bounded_client(target, api.broker_connect_timeout, api.broker_timeout)
    return resilient(target)


def open_redis_state(settings: Settings, url: str | None = None) -> SharedState:
    """The shared state on `url` (default MCP_MEDIA_REDIS_URL), with the sidecars where the
    settings keep them: for a command that reads the cluster and closes it."""
    from workers.files.shared_files import open_shared_files

    sidecars = open_shared_files(settings).sidecars
    return redis_state(
        broker_client(settings, url),
        sidecars,
        settings.jobs.result_ttl,
        settings.redis_transport_options,
    )
