"""Events of a known type read into the `wyoming` package's classes, checked: a field
missing or of the wrong JSON type is a refusal naming the event (`invalid_input`), never an
error deep inside the door."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from wyoming.event import Event

from pipelines.outcomes import Outcome
from workers.doors.wyoming.outcomes import Refused


class _Parses(Protocol):
    @staticmethod
    def from_event(event: Event) -> Any: ...


T = TypeVar("T")

# The fields the door reads, by event type, and the JSON types each may hold.
_TEXT = (str, type(None))
_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "transcribe": {"name": _TEXT, "language": _TEXT},
    "synthesize": {"text": (str,), "voice": (dict, type(None))},
    "synthesize-start": {"voice": (dict, type(None))},
    "synthesize-chunk": {"text": (str,)},
    "ping": {"text": _TEXT},
    "select-program": {"name": (str,)},
}
_VOICE = {"name": _TEXT, "language": _TEXT, "speaker": _TEXT}


def _check(kind: str, data: Mapping[str, Any], fields: Mapping[str, tuple[type, ...]]) -> None:
    for name, types in fields.items():
        if not isinstance(data.get(name), types):
            raise Refused(Outcome.INVALID_INPUT, f"a {kind!r} event's `{name}` is malformed")


def parsed(cls: type[T], event: Event) -> T:
    """`cls.from_event(event)`, its fields checked first."""
    data = event.data
    _check(event.type, data, _FIELDS.get(event.type, {}))
    voice = data.get("voice")
    if isinstance(voice, dict):
        _check(event.type, voice, _VOICE)
    reader: _Parses = cls  # type: ignore[assignment]
    try:
        found: T = reader.from_event(event)
    except (KeyError, TypeError, ValueError) as exc:
        raise Refused(
            Outcome.INVALID_INPUT, f"a malformed {event.type!r} event ({type(exc).__name__})"
        ) from None
    return found
