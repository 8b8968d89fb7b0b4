"""The back-off of `mcp-media up`'s restarts and how its line names an ending."""

from __future__ import annotations

import pytest
import redis

from workers.broker.transport import BrokerUnwritable, refuses_writes
from workers.cli.restarts import Backoff, how_it_ended

pytestmark = pytest.mark.unit


def test_a_process_that_keeps_dying_waits_longer_each_time_up_to_the_cap() -> None:
    backoff = Backoff(first=1.0, cap=30.0, stable=60.0)
    waits = [backoff.next(ran_for=2.0) for _ in range(7)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_process_that_ran_stably_is_restarted_quickly_again() -> None:
    backoff = Backoff(first=1.0, cap=30.0, stable=60.0)
    for _ in range(5):
        backoff.next(ran_for=1.0)
    assert backoff.next(ran_for=61.0) == 1.0
    assert backoff.next(ran_for=1.0) == 2.0


def test_the_line_names_the_signal_or_the_exit_code() -> None:
    assert how_it_ended(-9) == "was killed by SIGKILL"
    assert how_it_ended(1) == "exited with 1"
    assert how_it_ended(0) == "exited with 0"


def test_a_brokerrefuses_writes_is_a_connection_loss_for_the_consumer() -> None:
    refused = redis.ResponseError("MISCONF Errors writing to the AOF file: No space left")
    scripted = redis.ResponseError("Error running script (call to f_1): -MISCONF Errors ...")
    assert refuses_writes(refused) and refuses_writes(scripted)
    assert not refuses_writes(redis.ResponseError("WRONGTYPE Operation against a key"))
    assert issubclass(BrokerUnwritable, redis.ConnectionError)
