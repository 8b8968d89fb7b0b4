"""The pieces a reply is spoken in: sentences, except that the first sentence's opening
clause (or first few words) goes alone, so the first audio waits for a few words' work
instead of a whole sentence's (Kokoro on one thread spends about half a second per second
of speech). The pieces concatenate back to the text: no word is dropped or moved.

English is cut at a clause mark (``, ; :``) within the first ``words`` words, else after
them. Chinese, which has no spaces to find a word's end by, only at ``，、：；`` within the
first ``3 * words`` characters: a cut after a number of characters splits words (星|期五),
and the quality bench heard such sentences much worse (CER 0.178 against 0.088 cut at
clause marks only, 0.083 never cut). A sentence too short to leave a tail of a few words
is not cut.
"""

from __future__ import annotations

from dataclasses import dataclass

KOKORO_FIRST_WORDS = 4  # Kokoro's first audio on one thread: about 0.5 s of work, not 2
MIN_HEAD = 2  # words (Chinese: characters) a first piece holds at least
MIN_TAIL = 3  # a shorter rest is not worth its own model run: the sentence stays whole
ZH_CHARS_PER_WORD = 2  # a Chinese word is about two characters
_CLAUSE_EN = frozenset(",;:")
_CLAUSE_ZH = frozenset("，、：；,;:")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece synthesised on its own; `opens` when it starts a sentence (the pause
    between sentences goes before it, except before the very first)."""

    text: str
    sentence: int
    opens: bool = True


def _speakable(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _split(sentence: str, cut: int) -> tuple[str, str]:
    head, tail = sentence[:cut], sentence[cut:]
    if _speakable(head) and _speakable(tail):
        return head, tail
    return sentence, ""


def _head_en(sentence: str, words: int) -> int:
    """Where the first piece of an English sentence ends (0: do not cut)."""
    ends: list[int] = []  # the end of each word
    inside = False
    for index, ch in enumerate(sentence):
        if ch.isspace():
            if inside:
                ends.append(index)
            inside = False
        else:
            inside = True
    if inside:
        ends.append(len(sentence))
    if len(ends) < words + MIN_TAIL:
        return 0
    for n, end in enumerate(ends[:words], start=1):
        if n >= MIN_HEAD and sentence[end - 1] in _CLAUSE_EN:
            return end
    return ends[words - 1]


def _head_zh(sentence: str, words: int) -> int:
    """Where the first piece of a Chinese sentence ends: after a clause mark among its first
    3 x `words` characters (0: do not cut)."""
    limit = words * ZH_CHARS_PER_WORD
    if sum(1 for ch in sentence if ch.isalnum()) < limit + MIN_TAIL:
        return 0
    seen = 0
    for index, ch in enumerate(sentence):
        if ch in _CLAUSE_ZH and seen >= MIN_HEAD:
            return index + 1
        if ch.isalnum():
            seen += 1
        if seen >= limit + limit // 2:
            break
    return 0


def split_head(sentence: str, words: int, chinese: bool = False) -> tuple[str, str]:
    """(first piece, rest) of `sentence`, which concatenate back to it; the rest is ""
    when the sentence stays whole (``words`` 0, or too short to be worth a cut)."""
    if words <= 0:
        return sentence, ""
    cut = _head_zh(sentence, words) if chinese else _head_en(sentence, words)
    return _split(sentence, cut) if cut else (sentence, "")


def plan(sentences: list[str], words: int, chinese: bool = False) -> list[Chunk]:
    """The pieces to synthesise, in order: the first sentence cut by `split_head`, the
    others whole. The pieces' texts are stripped (the cut falls on white space in English)."""
    chunks: list[Chunk] = []
    for index, sentence in enumerate(sentences):
        if index == 0:
            head, tail = split_head(sentence, words, chinese)
            chunks.append(Chunk(head.strip(), 0))
            if tail:
                chunks.append(Chunk(tail.strip(), 0, opens=False))
        else:
            chunks.append(Chunk(sentence, index))
    return chunks
