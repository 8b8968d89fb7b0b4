# mypy: disable-error-code="no-untyped-call"
# (kombu has no type hints)
"""The workers' kombu transport against a real redis-server that refuses writes (MISCONF)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import redis
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.message import Message
from kombu.messaging import Consumer, Producer

from tests.support.misconf import refuse_writes, take_writes
from workers.broker import transport as broker_transport
from workers.broker.embedded import ensure_embedded, stop_embedded

pytestmark = pytest.mark.integration

DRAIN_TIMEOUT = 30.0  # a bound so that a consumer that takes nothing fails, not a timing claim


def test_an_ack_the_broker_refuses_frees_the_prefetch_slot(tmp_path: Path) -> None:
    """A job that ends while Redis refuses writes cannot be acked. Its prefetch slot must
    still be freed: before, the consumer held it and asked for nothing more, so it took no
    message after writes came back until the stall watchdog reconnected it (30 s)."""
    home = tmp_path / "home"
    url = ensure_embedded(home).url
    admin = redis.Redis.from_url(url, socket_timeout=5)
    try:
        with Connection(url, transport=broker_transport.REDIS) as conn:
            channel = conn.channel()
            channel.basic_qos(0, 1, False)  # one message at a time, as a worker's slot
            queue = Queue("jobs", Exchange("jobs"), "jobs")
            producer = Producer(channel, exchange=queue.exchange, routing_key="jobs")
            producer.publish({"n": 1}, declare=[queue])
            got: list[Message] = []
            consumer = Consumer(channel, queues=[queue], on_message=got.append)
            consumer.consume()
            conn.drain_events(timeout=DRAIN_TIMEOUT)
            (first,) = got
            assert not channel.qos.can_consume()  # the slot is taken

            folder = refuse_writes(admin)
            try:
                # What Celery does when a job ends: a refused ack is logged, and it goes on.
                first.ack_log_error(logging.getLogger(__name__), conn.connection_errors)
                assert first.delivery_tag.encode() in admin.hkeys("unacked")  # still in Redis
                assert channel.qos.can_consume()  # before: False, it asked for nothing more
            finally:
                take_writes(admin, folder)
            producer.publish({"n": 2}, declare=[queue])
            try:
                conn.drain_events(timeout=DRAIN_TIMEOUT)
            except TimeoutError:
                pytest.fail("the consumer took nothing after writes came back")
            assert [message.payload for message in got] == [{"n": 1}, {"n": 2}]
            got[1].ack()
    finally:
        admin.close()
        stop_embedded(home)
