"""Chinese text for speech: numbers, dates, times, percentages as Chinese words; sentences
cut at Chinese punctuation.

Markup and emoji go the way they go for English (`text.strip_markdown`, `text.strip_emoji`).
Every rule is a regex with bounded or single quantifiers over disjoint classes, or an
index-based loop: linear time on any input, like the English rules.
"""

from __future__ import annotations

import re
import unicodedata

from pipelines.speech.text import (
    DEFAULT_MAX_CHARS,
    DEFAULT_SENTENCE_CHARS,
    RAW_FACTOR,
    EmptyTextError,
    check_length,
    strip_emoji,
    strip_markdown,
)

_DIGITS = "零一二三四五六七八九"
_UNITS = ("", "十", "百", "千")
_GROUPS = ("", "万", "亿", "万亿")
MAX_CARDINAL_DIGITS = 16  # beyond 万亿 numbers are read digit by digit
_READ_AS_DIGITS = 8  # a longer bare run of digits is a phone or account number


def digits_zh(digits: str) -> str:
    """Digit by digit, the way years and phone numbers are read: 2026 -> 二〇二六."""
    return "".join("〇" if d == "0" else _DIGITS[int(d)] for d in digits if d.isdigit())


def _group(n: int) -> str:
    """0 < n < 10000 in words, with the inner zeros Chinese reads (1005 -> 一千零五)."""
    out: list[str] = []
    pending_zero = False
    for power in range(3, -1, -1):
        digit = n // 10**power % 10
        if digit == 0:
            pending_zero = bool(out)
            continue
        if pending_zero:
            out.append("零")
            pending_zero = False
        out.append(_DIGITS[digit] + _UNITS[power])
    return "".join(out)


def cardinal_zh(digits: str) -> str:
    """An integer given as digits in Chinese words: 12345 -> 一万二千三百四十五."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > MAX_CARDINAL_DIGITS:
        return digits_zh(digits)
    n = int(digits)
    if n == 0:
        return "零"
    parts: list[str] = []
    group_index = 0
    need_zero = False
    while n:
        n, group = divmod(n, 10_000)
        if group:
            words = _group(group) + _GROUPS[group_index]
            if need_zero:
                words += "零"
            parts.append(words)
            need_zero = group < 1000 and n > 0
        elif parts:
            need_zero = True
        group_index += 1
    text = "".join(reversed(parts)).replace("零零", "零")
    # 10-19 read 十, 十一 ... rather than 一十, 一十一 at the start.
    return text[1:] if text.startswith("一十") else text


def decimal_zh(whole: str, fraction: str) -> str:
    return cardinal_zh(whole) + "点" + digits_zh(fraction).replace("〇", "零")


def _date(m: re.Match[str]) -> str:
    year, month, day = m.group("y"), m.group("m"), m.group("d")
    out = digits_zh(year) + "年" if year else ""
    if month:
        out += cardinal_zh(month) + "月"
    if day:
        out += cardinal_zh(day) + (m.group("suffix") or "日")
    return out


def _clock(m: re.Match[str]) -> str:
    hour, minute = int(m.group(1)), int(m.group(2))
    return cardinal_zh(str(hour)) + "点" + (cardinal_zh(str(minute)) + "分" if minute else "整")


def _percent(m: re.Match[str]) -> str:
    whole, fraction = m.group(1), m.group(2)
    return "百分之" + (decimal_zh(whole, fraction) if fraction else cardinal_zh(whole))


def _number(m: re.Match[str]) -> str:
    sign = "负" if m.group(1) else ""
    whole, fraction = m.group(2).replace(",", ""), m.group(3)
    if "," not in m.group(2) and len(whole) > _READ_AS_DIGITS and not fraction:
        return sign + digits_zh(whole)  # phone and account numbers: digit by digit
    return sign + (decimal_zh(whole, fraction) if fraction else cardinal_zh(whole))


_RULES: tuple[tuple[re.Pattern[str], object], ...] = (
    # 2026年12月2日, 12月2号, 2026年
    (
        re.compile(
            r"(?:(?P<y>\d{4})\s?年\s?)?(?P<m>\d{1,2})\s?月(?:\s?(?P<d>\d{1,2})\s?(?P<suffix>[日号]))?"
        ),
        _date,
    ),
    (re.compile(r"(?P<y>\d{4})年(?P<m>)(?P<d>)(?P<suffix>)"), _date),
    # ISO dates 2026-12-02 and 2026/12/02
    (
        re.compile(r"(?<!\d)(?P<y>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})(?!\d)(?P<suffix>)"),
        _date,
    ),
    # \b would not do: a Chinese character is a word character, so 午3 has no boundary.
    (re.compile(r"(?<!\d)([01]?\d|2[0-3])[:：]([0-5]\d)(?!\d)"), _clock),
    (re.compile(r"(\d{1,18})(?:\.(\d{1,12}))?\s?[%％]"), _percent),
    (re.compile(r"(?<![\d.])(-)?(\d{1,3}(?:,\d{3}){1,6}|\d+)(?:\.(\d{1,12}))?"), _number),
)
_SYMBOLS = str.maketrans(
    {"¥": "元", "￥": "元", "$": "美元", "€": "欧元", "&": "和", "+": "加", "=": "等于"}
)


def normalize_zh(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Speakable Chinese; raises `TextTooLongError` past `max_chars` (after expansion)."""
    cap = max_chars * RAW_FACTOR
    check_length(text, cap)
    text = strip_emoji(text.replace("\r\n", "\n"))
    # NFKC folds full-width digits and letters; keep the full-width punctuation that
    # separates Chinese clauses (NFKC would turn ， into ,).
    text = "".join(
        unicodedata.normalize("NFKC", ch) if ch.isalnum() and "\uff10" <= ch <= "\uff5a" else ch
        for ch in text
    )
    text = strip_markdown(text)
    # Money written before the amount moves after it: ¥100 -> 100元.
    text = re.sub(
        r"([¥￥$€])\s?(\d{1,3}(?:,\d{3}){1,6}(?:\.\d{1,12})?|\d{1,18}(?:\.\d{1,12})?)",
        r"\2\1",
        text,
    )
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)  # type: ignore[call-overload]
        check_length(text, cap)
    text = text.translate(_SYMBOLS)
    text = re.sub(r"[ \t]+", " ", text)
    text = "\n".join(line.strip() for line in text.split("\n")).strip()
    check_length(text, max_chars, " once numbers and symbols are spelled out")
    return text


_ENDS = frozenset("。！？；!?;…\n")
_SOFT = frozenset("，、,：:")


def split_sentences_zh(text: str, max_chars: int = DEFAULT_SENTENCE_CHARS) -> list[str]:
    """Sentences ending at 。！？； (and . ! ? ;) or a line end; long ones cut at ，、 then
    anywhere (Chinese has no spaces). One pass over the text."""
    out: list[str] = []
    start = 0
    soft = -1
    for index, ch in enumerate(text):
        if ch in _SOFT:
            soft = index
        end = None
        if ch in _ENDS or (ch == "." and not text[index + 1 : index + 2].isdigit()):
            end = index + 1
        elif index + 1 - start >= max_chars:
            end = soft + 1 if soft >= start + max_chars // 3 else index + 1
        if end is not None:
            piece = text[start:end].strip()
            if any(c.isalnum() for c in piece):
                out.append(piece)
            start, soft = end, -1
    piece = text[start:].strip()
    if any(c.isalnum() for c in piece):
        out.append(piece)
    return out


def prepare_zh(
    text: str, max_chars: int = DEFAULT_MAX_CHARS, sentence_chars: int = DEFAULT_SENTENCE_CHARS
) -> list[str]:
    sentences = split_sentences_zh(normalize_zh(text, max_chars), sentence_chars)
    if not sentences:
        raise EmptyTextError("text has nothing to speak after removing markup and symbols")
    return sentences
