"""`MessageKeys` names the lists and the hash kombu's Redis transport keeps messages in, as
kombu's own channel names them: a kombu release that moves them fails here, not on a
dashboard that quietly reads zero."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kombu.transport.redis import Channel as KombuChannel
from kombu.transport.redis import PrefixedStrictRedis

from workers.broker.message_keys import MessageKeys
from workers.broker.transport import Channel

pytestmark = pytest.mark.unit


def kombu_channel(**options: object) -> Channel:
    """A channel as kombu sets it up from transport options, without connecting (kombu's
    `__init__` pings the server): its class defaults, then the options laid over them."""
    channel = Channel.__new__(Channel)
    for name, value in options.items():
        setattr(channel, name, value)
    return channel


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"priority_steps": list(range(10))},
        {"priority_steps": [0, 5], "sep": ":"},
    ],
)
def test_every_list_a_priority_lands_in_is_counted(options: dict[str, object]) -> None:
    channel = kombu_channel(**options)
    keys = MessageKeys.of(options)
    name_for: Callable[[str, int], str] = channel._q_for_pri
    landed = {name_for("stt.batch", priority) for priority in range(256)}
    assert set(keys.lists("stt.batch")) == landed
    assert keys.lists("stt.batch")[0] == "stt.batch"  # the lowest step: the queue's own name


def test_the_defaults_are_kombus_own() -> None:
    keys = MessageKeys()
    assert keys.priority_steps == tuple(KombuChannel.priority_steps)
    assert keys.sep == KombuChannel.sep and keys.unacked == KombuChannel.unacked_key
    assert keys.prefix == KombuChannel.global_keyprefix == ""
    # kombu's step separator is the control characters \x06\x16 (no queue name has them)
    assert keys.lists("vision")[1] == f"vision{KombuChannel.sep}3"


def test_a_global_key_prefix_is_on_every_key_kombu_prefixes() -> None:
    keys = MessageKeys.of({"global_keyprefix": "media:", "unacked_key": "held"})
    assert all(name.startswith("media:") for name in keys.lists("tts"))
    assert keys.unacked == "media:held"
    # kombu's prefixed client prefixes the keys it writes messages with (we name them whole)
    prefixed = PrefixedStrictRedis.PREFIXED_SIMPLE_COMMANDS
    assert {"LPUSH", "HSET"} <= set(prefixed)
