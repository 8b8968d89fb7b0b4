"""What every route of the API shares: the settings and the key."""

from __future__ import annotations

from dataclasses import dataclass

from workers.settings import Settings


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    key: str
