"""Live work first: the order in which a worker's consumer asks Redis for its queues.

Each capability has a live lane (its queue, `vision`) and a batch lane (`vision.batch`,
`workers.core.capabilities.Lane`). kombu's Redis transport fetches with one BRPOP over every
queue the worker consumes, and BRPOP pops from the first non-empty key in the order given;
that order comes from the channel's queue cycle (`queue_order_strategy`, a dotted path
kombu resolves with `symbol_by_name`). `LaneCycle` puts every live lane before every batch
lane, so a slot that frees takes live work whenever there is some. While both lanes have
work, one fetch in `batch_every` (`MCP_MEDIA_JOBS__BATCH_EVERY`) puts batch first: a
steady live stream leaves the batch lanes at least that share of the slots (their floor).
Within a lane, queues take turns (kombu's round robin), as before.

A slot frees only when its job ends: late acks and a prefetch multiplier of 1 give a worker
at most as many messages as it has slots, so it never holds batch messages it cannot run
(reserved == running, but for a message between its delivery and its start or its job's end
and its ack: the bench's `lanes_messages_held`). A live job therefore waits for the first
of the worker's running jobs to end - at most one batch job's length, `mean / slots` on
average - and starts next.

The mechanism was chosen by measurement: `python -m bench lanes` (bench/lanes.py) runs one
worker with a batch backlog and live jobs sent one at a time, with no batch, in the old
single-queue FIFO order, with kombu's priority steps, with kombu's round robin over the two
lanes and with this order, side by side; its figures are the `lanes_*` entries of
bench/results.json.

Kombu's priority steps on one queue pop live first too, but strictly: nothing reserves a
share for batch, which starves under a steady live stream; and priorities would hide the
lanes from admission, which counts each lane's own waiting jobs. Separate queues in the
transport's default round robin serve the lanes alternately: a live job waits about as
long, but a steady live stream waits behind batch half the time.
"""

from __future__ import annotations

from collections.abc import Iterable

from workers.core.capabilities import Lane, lane_of

DEFAULT_BATCH_EVERY = 10


def is_batch(queue: str) -> bool:
    try:
        return lane_of(queue)[1] is Lane.BATCH
    except KeyError:
        return False  # not a lane of ours: consumed like a live one


class LaneCycle:
    """A kombu queue cycle (`kombu.utils.scheduling`): live lanes first, batch lanes after,
    but batch lanes first once `every - 1` fetches in a row took live work."""

    every = DEFAULT_BATCH_EVERY  # the channel sets its transport option's

    def __init__(self, it: Iterable[str] | None = None) -> None:
        self.items: list[str] = list(it) if it is not None else []
        self.since_batch = 0  # fetches since the last one that took batch work

    def update(self, it: Iterable[str]) -> None:
        self.items[:] = it

    def consume(self, n: int) -> list[str]:
        """The queues to BRPOP, in the order they are to be popped."""
        items = self.items[:n]
        live = [q for q in items if not is_batch(q)]
        batch = [q for q in items if is_batch(q)]
        return batch + live if self.since_batch + 1 >= self.every else live + batch

    def rotate(self, last_used: str) -> str:
        """A message came from `last_used`: it goes to the end of its lane's turn."""
        items = self.items
        if last_used in items:
            items.append(items.pop(items.index(last_used)))
        self.since_batch = 0 if is_batch(last_used) else self.since_batch + 1
        return last_used


LANE_ORDER = f"{__name__}:LaneCycle"
