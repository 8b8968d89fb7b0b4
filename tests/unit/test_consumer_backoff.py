"""The worker's way back to a broker: tries from 0.1 s apart, doubling, never more than 1 s
apart (kombu's own: 2 s, then 4, 6 ... 30 s)."""

from __future__ import annotations

import pytest
from kombu.connection import Connection
from kombu.exceptions import OperationalError

from tests.support.net import free_port
from workers.runtime.consumer import _backing_off

pytestmark = pytest.mark.unit


def test_reconnect_tries_back_off_from_a_tenth_of_a_second_to_one_second() -> None:
    conn = Connection(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=1)  # type: ignore[no-untyped-call]
    waits: list[float] = []
    checks: list[int] = []
    try:
        with pytest.raises(OperationalError):
            _backing_off(conn)(
                lambda _exc, delay: waits.append(delay), 6, callback=lambda: checks.append(1)
            )
    finally:
        conn.release()  # type: ignore[no-untyped-call]
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert len(checks) == 6  # Celery's shutdown check ran before every wait
