"""Character error rate for Chinese transcripts.

Only what is not an error is folded: digits where the reference has number words (both texts
go through the Chinese TTS text rules first). The script is not folded: a transcript in
Traditional characters where the user wrote Simplified is scored as the errors users see."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from pipelines.speech.text_zh import normalize_zh


def chars(text: str) -> list[str]:
    return [ch for ch in normalize_zh(unicodedata.normalize("NFKC", text)) if ch.isalnum()]


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        diagonal, row[0] = row[0], i
        for j, h in enumerate(hyp, start=1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (r != h))
    return row[-1]


def cer(reference: str, hypothesis: str) -> float:
    """(substitutions + deletions + insertions) / reference characters, punctuation ignored."""
    ref = chars(reference)
    return edit_distance(ref, chars(hypothesis)) / max(len(ref), 1)
