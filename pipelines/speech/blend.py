"""Kokoro voice blends as Kokoro-FastAPI spells them: ``af_bella+af_sky`` (equal weights),
``af_bella(2)+af_sky(1)`` (weighted), ``-`` to take a voice away. The blend's style vector is
the sum of each voice's vector times its weight over the sum of all weights, so weights
(2, 1) and (4, 2) are one blend. Spaces are ignored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# A name of a voice inside a Kokoro folder (af_bella, zf_xiaobei): never a `-` or a `+`.
_PART = re.compile(r"([A-Za-z0-9_.]+)(?:\(([0-9]+(?:\.[0-9]+)?)\))?")
MAX_PARTS = 8

# (speaker id, coefficient) per voice of a blend: the style is sum(coefficient * style[id]).
Mix = tuple[tuple[int, float], ...]


class BlendError(ValueError):
    """A voice blend that cannot be read; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    weight: float
    sign: int  # +1, or -1 for a voice taken away


def is_blend(voice: str) -> bool:
    """Whether `voice` may be a blend; check the voice names first (a piper folder's name
    has `-` in it too)."""
    return any(mark in voice for mark in "+-(")


def parse_blend(spec: str) -> tuple[Part, ...]:
    text = spec.replace(" ", "")
    if not text or text[0] in "+-" or text[-1] in "+-" or re.search(r"[+-]{2,}", text):
        raise BlendError(f"voice blend {spec!r} has an empty part: spell it like af_bella+af_sky")
    pieces = re.split(r"([+-])", text)
    if len(pieces) // 2 + 1 > MAX_PARTS:
        raise BlendError(f"voice blend {spec!r} has more than {MAX_PARTS} voices")
    parts = []
    for index in range(0, len(pieces), 2):
        match = _PART.fullmatch(pieces[index])
        if match is None:
            raise BlendError(
                f"{pieces[index]!r} in voice blend {spec!r} is not a voice name with an"
                " optional weight, such as af_bella or af_bella(2)"
            )
        weight = float(match.group(2) or 1)
        if weight <= 0:
            raise BlendError(f"voice {match.group(1)!r} in {spec!r} has weight 0")
        sign = -1 if index and pieces[index - 1] == "-" else 1
        parts.append(Part(match.group(1), weight, sign))
    return tuple(parts)


def canonical(parts: tuple[Part, ...]) -> str:
    """One spelling per blend as written (`af_bella(1)` is `af_bella`); one voice alone is
    its own name."""
    if len(parts) == 1:
        return parts[0].name
    out = []
    for index, part in enumerate(parts):
        weight = "" if part.weight == 1 else f"({part.weight:g})"
        joint = "" if index == 0 else ("+" if part.sign > 0 else "-")
        out.append(f"{joint}{part.name}{weight}")
    return "".join(out)


def mix(parts: tuple[Part, ...], speaker_ids: Mapping[str, int]) -> Mix:
    """Each voice's coefficient: its signed weight over the sum of the weights."""
    total = sum(part.weight for part in parts)
    return tuple((speaker_ids[part.name], part.sign * part.weight / total) for part in parts)
