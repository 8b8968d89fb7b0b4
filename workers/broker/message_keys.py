"""Where kombu's Redis transport keeps a queue's messages, so that they can be counted.

A message waiting in a queue sits in one of the queue's lists: the queue's own name for the
lowest priority step, `<queue><sep><step>` for each other step of `priority_steps` (a sent
message goes to the list of the step its priority falls in). A message a worker took and has
not acknowledged sits in the `unacked` hash (delivery tag -> `[message, exchange, routing
key]`) until it is acknowledged or restored to its list. Every one of these keys carries
`global_keyprefix`. Each is a transport option (`MCP_MEDIA_REDIS_TRANSPORT_OPTIONS`); unset,
kombu's own defaults, read from its channel class so that they follow kombu.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.broker.transport import Channel

_KOMBU = Channel  # ours (kombu's, subclassed): its class attributes are the options' defaults


@dataclass(frozen=True, slots=True)
class MessageKeys:
    prefix: str = _KOMBU.global_keyprefix
    sep: str = _KOMBU.sep
    priority_steps: tuple[int, ...] = tuple(_KOMBU.priority_steps)
    unacked_name: str = _KOMBU.unacked_key

    @classmethod
    def of(cls, options: Mapping[str, Any] | None) -> MessageKeys:
        """The layout the transport options give (the rest: kombu's defaults)."""
        given = dict(options or {})
        return cls(
            prefix=str(given.get("global_keyprefix", _KOMBU.global_keyprefix)),
            sep=str(given.get("sep", _KOMBU.sep)),
            priority_steps=tuple(
                int(s) for s in given.get("priority_steps", _KOMBU.priority_steps)
            ),
            unacked_name=str(given.get("unacked_key", _KOMBU.unacked_key)),
        )

    def lists(self, queue: str) -> tuple[str, ...]:
        """Every list a waiting message of `queue` can be in, one per priority step, named as
        kombu names them (`Channel._q_for_pri`: step 0 is the queue's own name)."""
        names = (f"{queue}{self.sep}{step}" if step else queue for step in self.priority_steps)
        return tuple(dict.fromkeys(self.prefix + name for name in names))

    @property
    def unacked(self) -> str:
        """The hash of the messages workers hold: delivery tag -> [message, exchange, routing
        key], the routing key being the queue's name (Celery routes by queue)."""
        return self.prefix + self.unacked_name
