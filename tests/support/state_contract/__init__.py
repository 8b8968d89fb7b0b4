"""The contract of each port of the shared state, written once and run against both
implementations: the in-memory twins (tests/unit/test_memory_state.py) and the Redis
adapters with their Lua scripts on a real redis-server
(tests/integration/test_redis_state.py)."""

from __future__ import annotations

from tests.support.state_contract import (
    admission,
    chunks,
    claims,
    coordination,
    dead_letters,
    records,
    results,
    status,
    view,
)
from tests.support.state_contract.common import Check, Harness

__all__ = ["CHECKS", "Check", "Harness"]

_PORTS = (results, admission, records, claims, dead_letters, coordination, chunks, status, view)
# (port, check) for every check of every port.
CHECKS: list[tuple[str, Check]] = [
    (module.__name__.rsplit(".", 1)[1], check) for module in _PORTS for check in module.CHECKS
]
