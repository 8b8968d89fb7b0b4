"""kombu's Redis and Sentinel transports, with one fix for a broker that goes away.

After a connection loss Celery closes the broker connection twice (`collect`, then `close`).
A channel whose first close failed half-way still holds the messages it delivered and not
yet acked (the jobs running and waiting in this worker); its second close tries to restore
them through a transport that was already let go (`client` is None). kombu then raises
AttributeError where Celery only expects connection errors, and the worker stops
("Unrecoverable error") - measured on kombu 5.7.0 with a job running while redis-server was
SIGKILLed, or while a sentinel promoted a replica. A connection error is what that clean-up
ignores: the messages stay in Redis' unacked set, the running jobs finish and record their
results, and a job that no longer runs comes back by its lease or the journal sweep
(workers.runtime.recovery), or at last after the visibility timeout.

A broker that refuses writes (`MISCONF`: its append-only file could not be written, a full
disk) refuses BRPOP too. kombu raises that ResponseError in Celery's event loop, which
Celery does not count as a connection error: "Unrecoverable error", and the worker stopped
(measured: an idle worker gone the moment a 20 MB tmpfs holding the AOF filled). Here it is
a connection error: the consumer reconnects with Celery's back-off until Redis writes again
(Redis retries the AOF write every second and takes writes the moment space is back).

A job that ends while the broker refuses writes cannot be acked (kombu removes it from the
unacked set first, and that write is refused). Celery logs the failed ack and goes on, but
kombu's QoS still counts the message as delivered: with every prefetch slot held that way
the consumer asks for no more messages, so it never meets the refusal that would make it
reconnect, and it took nothing new after the space came back until the heartbeat's stall
watchdog made it reconnect (measured: 31-33 s after a 5 s full disk). Here a refused ack
frees its slot: the consumer polls again, reconnects while Redis refuses writes, and takes
the next message the moment it writes again. The message stays in Redis' unacked set: its
job comes back by its lease (workers.runtime.recovery) or the visibility timeout, and finds
its result if it stored one.

Both channels take `batch_every` from the transport options: the floor of the batch lanes
in `workers.broker.lanes.LaneCycle`, the queue order the settings name.
"""

from __future__ import annotations

from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from redis.sentinel import SentinelManagedConnection

from workers.broker.lanes import DEFAULT_BATCH_EVERY, LANE_ORDER, LaneCycle
from workers.broker.replies import BrokerUnwritable as BrokerUnwritable
from workers.broker.replies import refuses_writes as refuses_writes


def _connparams(channel: Any, base: Any, asynchronous: bool) -> Any:
    if channel.connection.client is None:
        raise redis.ConnectionError("the broker connection was closed")
    return base._connparams(channel, asynchronous)


class _WritesRefusedAsConnectionLoss:
    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.ResponseError as exc:
            if refuses_writes(exc):
                self.disconnect()  # type: ignore[attr-defined]
                raise BrokerUnwritable(str(exc)) from exc
            raise


class _Connection(_WritesRefusedAsConnectionLoss, redis.Connection):
    pass


class _SSLConnection(_WritesRefusedAsConnectionLoss, redis.SSLConnection):
    pass


class _SentinelConnection(_WritesRefusedAsConnectionLoss, SentinelManagedConnection):
    pass


class _SentinelSSLConnection(
    _WritesRefusedAsConnectionLoss, kombu_redis.SentinelManagedSSLConnection
):
    pass


class QoS(kombu_redis.QoS):
    def ack(self, delivery_tag: str) -> None:
        self._settle(super().ack, delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self._settle(super().reject, delivery_tag, requeue)

    def _settle(self, settle: Any, delivery_tag: str, *args: Any) -> None:
        try:
            settle(delivery_tag, *args)
        except BrokerUnwritable:
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]  # the slot
            raise  # Celery logs "Couldn't ack" and goes on


class _LaneFloor:
    queue_order_strategy = LANE_ORDER  # a transport option may name another
    batch_every = DEFAULT_BATCH_EVERY

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cycle = self._queue_cycle  # type: ignore[attr-defined]
        if isinstance(cycle, LaneCycle):
            cycle.every = int(self.batch_every)


class Channel(_LaneFloor, kombu_redis.Channel):
    from_transport_options = (  # type: ignore[assignment]
        *kombu_redis.Channel.from_transport_options,
        "batch_every",
    )
    QoS = QoS
    connection_class = _Connection
    connection_class_ssl = _SSLConnection

    def _connparams(self, asynchronous: bool = False) -> Any:
        return _connparams(self, kombu_redis.Channel, asynchronous)


class SentinelChannel(_LaneFloor, kombu_redis.SentinelChannel):
    from_transport_options = (  # type: ignore[assignment]
        *kombu_redis.SentinelChannel.from_transport_options,
        "batch_every",
    )
    QoS = QoS
    connection_class = _SentinelConnection
    connection_class_ssl = _SentinelSSLConnection

    def _connparams(self, asynchronous: bool = False) -> Any:
        return _connparams(self, kombu_redis.SentinelChannel, asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel


REDIS = f"{__name__}:Transport"
SENTINEL = f"{__name__}:SentinelTransport"
