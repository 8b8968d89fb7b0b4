"""The plan's join: inputs against results, each list in sha256 order, read once in step
(a merge-join), so planning holds one item of each list whatever their length."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar


class _Named(Protocol):
    @property
    def sha256(self) -> str: ...


T = TypeVar("T", bound=_Named)


def with_settled(
    inputs: Iterable[T], results: Iterable[str], unsettled: Iterable[str] = ()
) -> Iterator[tuple[T, bool]]:
    """Each input with True when a result of it is stored and is not in `unsettled` (the
    results that are degraded or failed). Every list is in sha256 order."""
    found = Cursor(results)
    redo = Cursor(unsettled)
    for item in inputs:
        has = found.reaches(item.sha256)
        yield item, has and not redo.reaches(item.sha256)


class Cursor:
    """A sorted list read forward only: does it hold this name (names asked in order)?"""

    __slots__ = ("head", "rest")

    def __init__(self, names: Iterable[str]) -> None:
        self.rest = iter(names)
        self.head = next(self.rest, None)

    def reaches(self, name: str) -> bool:
        while self.head is not None and self.head < name:
            self.head = next(self.rest, None)
        return self.head == name
