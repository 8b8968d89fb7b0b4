"""Text normalisation for speech: what an agent writes -> words a phonemizer reads well.

Markdown and emoji go, URLs and e-mail addresses become readable, numbers, money, dates and
times become words. Slash dates are read the US way (12/02/2026 is December second) unless
the first part cannot be a month (25/12/2026 is December twenty-fifth). American English
throughout ("one hundred one", no "and").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from pipelines.errors import PermanentError
from pipelines.outcomes import Outcome
from pipelines.speech.numbers import (
    MONTHS,
    ONES,
    TENS,
    cardinal,
    decimal_to_words,
    digits_to_words,
    integer_words,
    number_to_words,
    ordinal_digits,
    ordinal_to_words,
    word_table,
    year_to_words,
)

DEFAULT_MAX_CHARS = 20_000
DEFAULT_SENTENCE_CHARS = 300
RAW_FACTOR = 2  # the text as given may be this many times the limit on what is spoken


class TextError(PermanentError):
    """The text cannot be spoken as given."""


class TextTooLongError(TextError):
    outcome = Outcome.TEXT_TOO_LONG


class EmptyTextError(TextError):
    outcome = Outcome.EMPTY_TEXT


# Markdown, HTML, emoji ---------------------------------------------------------------------
#
# Every rule runs in linear time on any input (tests/unit/test_hostile_text.py feeds each one
# 20,000-character repetitions of every character class): no `\s*` that can cross lines at a
# `^`, no two adjacent quantifiers over the same characters, no open-ended scan that every
# position of a run restarts. Where a regex cannot say a rule that way, a line-by-line or
# index-based function does.

_H = r"[^\S\n]"  # horizontal white space: a rule anchored at ^ stays on its line
_Repl = str | Callable[[re.Match[str]], str]


def _md(pattern: str, repl: _Repl, flags: int = re.M) -> Callable[[str], str]:
    compiled = re.compile(pattern, flags)
    return lambda text: compiled.sub(repl, text)


def _heading(m: re.Match[str]) -> str:
    return m.group(1).rstrip().rstrip("#").rstrip() + "\n"


_EMOJI_KEEP = {"©": " copyright ", "®": " registered ", "™": " trademark ", "°": "°"}


def _strip_comments(text: str) -> str:
    """`<!-- ... -->` on one line, like `<!--.*?-->` without its quadratic failure."""
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("<!--", pos)
        if start < 0:
            break
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        close = text.find("-->", start + 4, line_end)
        if close < 0:  # no later opener on this line can close either
            out.append(text[pos:line_end])
            pos = line_end
            continue
        out.append(text[pos:start])
        pos = close + 3
    out.append(text[pos:])
    return "".join(out)


def _is_table_rule(line: str) -> bool:
    """`| --- | :-: |`: cells of three or more dashes, optional colons, optional outer bars."""
    body = line.strip()
    if "-" not in body or not set(body) <= set("|:- \t"):
        return False
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    for cell in body.split("|"):
        cell = cell.strip(" \t")
        core = cell.removeprefix(":").removesuffix(":")
        if len(core) < 3 or core.strip("-"):
            return False
    return True


def _strip_pairs(text: str, delims: tuple[str, ...], *, flanking: bool) -> str:
    r"""`**bold**` / `__bold__` / `~~strike~~` -> their text, on one line.

    What `(D)(?=\S)(.+?)(?<=\S)D` would do (an opener followed by a non-space, the nearest
    closer preceded by a non-space, at least one character between), found with a table of
    the next closer instead of a scan that restarts at every opener.
    """
    if not any(d in text for d in delims):
        return text
    return "\n".join(_strip_pairs_line(line, delims, flanking) for line in text.split("\n"))


def _strip_pairs_line(line: str, delims: tuple[str, ...], flanking: bool) -> str:
    delims = tuple(d for d in delims if d in line)
    if not delims:
        return line
    n = len(line)
    next_closer: dict[str, list[int]] = {}
    for d in delims:
        table = [-1] * (n + 2)
        for j in range(n - 1, -1, -1):
            closes = line.startswith(d, j) and j > 0 and not (flanking and line[j - 1].isspace())
            table[j] = j if closes else table[j + 1]
        next_closer[d] = table
    out: list[str] = []
    pos = i = 0
    while i < n - 1:
        d = next((x for x in delims if line.startswith(x, i)), "")
        if not d or i + len(d) >= n or (flanking and line[i + len(d)].isspace()):
            i += 1
            continue
        body_start = i + len(d)
        close = next_closer[d][min(body_start + 1, n)]
        if close < 0:
            i += 1
            continue
        out += [line[pos:i], line[body_start:close]]
        pos = i = close + len(d)
    out.append(line[pos:])
    return "".join(out)


_MD_STEPS: tuple[Callable[[str], str], ...] = (
    _md(rf"^{_H}*(?:```|~~~)[^\n]*$", ""),  # code fence lines; their content stays
    _strip_comments,  # <!-- ... -->
    _md(r"</?[A-Za-z][^<>\n]*>", " "),  # html tags
    _md(r"!\[([^\[\]]*)\]\([^()]*\)", r"\1"),  # images -> alt text
    _md(r"\[([^\[\]]+)\]\([^()]*\)", r"\1"),  # links -> their text
    _md(r"\[([^\[\]]+)\]\[[^\[\]]*\]", r"\1"),  # reference links
    _md(rf"^{_H}*\[[^\[\]\n]+\]:{_H}*\S[^\n]*$", ""),  # link definitions
    _md(r"^[ \t]{0,3}(?:[-*_][ \t]*){3,}$", ""),  # horizontal rules
    lambda text: "\n".join("" if _is_table_rule(ln) else ln for ln in text.split("\n")),
    _md(rf"^{_H}{{0,3}}#{{1,6}}{_H}+([^\n]*)$", _heading),  # headings, closing #s dropped
    _md(r"^[ \t]{0,3}>[ \t]?", ""),  # block quotes
    _md(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?", "\n"),  # list markers
    lambda text: _strip_pairs(text, ("**", "__"), flanking=True),  # bold
    _md(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])", r"\1", 0),  # *italic*
    _md(r"(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)", r"\1", 0),  # _italic_
    lambda text: _strip_pairs(text, ("~~",), flanking=False),  # ~~strike~~
    _md(r"`([^`\n]*)`", r"\1", 0),  # inline code
    _md(r"(?:(?<![ \t])[ \t]+)?\|[ \t]*", ", ", 0),  # table cells
)


def strip_markdown(text: str) -> str:
    for step in _MD_STEPS:
        text = step(text)
    return text


def strip_emoji(text: str) -> str:
    out: list[str] = []
    for ch in text:
        if ch in _EMOJI_KEEP:
            out.append(_EMOJI_KEEP[ch])
            continue
        cat = unicodedata.category(ch)
        code = ord(ch)
        if cat in ("So", "Cs", "Co", "Cn") or 0x1F3FB <= code <= 0x1F3FF:
            continue
        if code in (0x200D, 0x20E3) or 0xFE00 <= code <= 0xFE0F or 0xE0020 <= code <= 0xE007F:
            continue
        out.append(ch)
    return "".join(out)


# URLs and e-mail ---------------------------------------------------------------------------

# Parts are bounded as DNS and mail bound them (a label of 63, a local part of 64, at most
# 10 labels): a run of "a.a.a..." or "a-a-a..." without an @ or a known domain costs each
# start a bounded scan instead of one to the end of the run.
_LABEL = r"[A-Za-z0-9-]{1,63}"
_EMAIL = re.compile(rf"\b[\w.+-]{{1,64}}@{_LABEL}(?:\.{_LABEL}){{1,10}}\b")
_URL = re.compile(r"\b(?:(?:https?|ftp)://|www\.)[^\s<>\"'()\[\]]*[^\s<>\"'()\[\].,;:!?]")
_DOMAIN = re.compile(
    rf"\b{_LABEL}(?:\.{_LABEL}){{0,10}}\.(?:com|org|net|io|dev|ai|app|edu|gov|co|uk|de|fr)\b"
    r"(?:/[^\s<>\"'()\[\]]*[^\s<>\"'()\[\].,;:!?])?",
    re.IGNORECASE,
)
_URL_SYMBOLS = {".": " dot ", "/": " slash ", "@": " at ", "-": " dash ", "_": " underscore "}
_URL_SYMBOLS |= {":": " colon ", "?": " question mark ", "=": " equals ", "&": " and "}
_URL_SYMBOLS |= {"#": " hash ", "+": " plus ", "%": " percent ", "~": " tilde "}


def _spell_address(text: str) -> str:
    out = "".join(_URL_SYMBOLS.get(ch, ch) for ch in text)
    # digits inside addresses are read one by one, like a phone number
    out = re.sub(r"\d+", lambda m: f" {digits_to_words(m.group())} ", out)
    return " ".join(out.split())


def _url(match: re.Match[str]) -> str:
    url = re.sub(r"^(?:https?|ftp)://", "", match.group())
    url = re.sub(r"^www\.", "", url).rstrip("/")
    return _spell_address(url)


# Numbers in context ------------------------------------------------------------------------

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_MONTH_RE = "|".join(MONTHS)
# symbol: one, many, one hundredth, many hundredths
_CURRENCIES = {
    symbol: tuple(names.split(","))
    for symbol, names in word_table(
        "$=dollar,dollars,cent,cents;€=euro,euros,cent,cents;£=pound,pounds,penny,pence;"
        "¥=yen,yen,,;₹=rupee,rupees,paisa,paise"
    ).items()
}
_CODES = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹"}
_MAGNITUDES = {"k": "thousand", "m": "million", "bn": "billion", "b": "billion", "t": "trillion"}
_MAGNITUDES |= {w: w for w in ("thousand", "million", "billion", "trillion")}
_UNITS = word_table(
    "km/h=kilometers per hour;mph=miles per hour;km=kilometers;kg=kilograms;"
    "cm=centimeters;mm=millimeters;mg=milligrams;ml=milliliters;lbs=pounds;"
    "ms=milliseconds;GB=gigabytes;MB=megabytes;KB=kilobytes;TB=terabytes;GHz=gigahertz;"
    "MHz=megahertz;kHz=kilohertz;Hz=hertz;°C=degrees Celsius;°F=degrees Fahrenheit;°=degrees"
)


def _money(match: re.Match[str]) -> str:
    sign, symbol, amount, magnitude = match.group("sign", "sym", "amt", "mag")
    one, many, cent, cents = _CURRENCIES[_CODES.get(symbol, symbol)]
    minus = "minus " if sign else ""
    if magnitude:
        return f"{minus}{decimal_to_words(amount)} {_MAGNITUDES[magnitude.lower()]} {many}"
    whole, _, frac = amount.replace(",", "").partition(".")
    units = whole.lstrip("0") or "0"
    words = f"{cardinal(units)} {one if units == '1' else many}"
    if frac and len(frac) == 2 and cent:
        sub = int(frac)
        if sub:
            sub_words = f"{number_to_words(sub)} {cent if sub == 1 else cents}"
            words = f"{words} and {sub_words}" if units != "0" else sub_words
    elif frac:
        words = f"{decimal_to_words(amount)} {many}"
    return minus + words


def _date(month: int, day: int, year: str | None) -> str:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        raise ValueError("not a date")
    said = f"{MONTHS[month - 1]} {ordinal_to_words(day)}"
    return f"{said}, {year_to_words(int(year))}" if year else said


def _iso_date(m: re.Match[str]) -> str:
    try:
        return _date(int(m.group(2)), int(m.group(3)), m.group(1))
    except ValueError:
        return m.group()


def _slash_date(m: re.Match[str]) -> str:
    first, second, year = int(m.group(1)), int(m.group(2)), m.group(3)
    if len(year) == 2:
        year = f"20{year}"
    month, day = (second, first) if first > 12 else (first, second)
    try:
        return _date(month, day, year)
    except ValueError:
        return m.group()


def _clock(m: re.Match[str]) -> str:
    hour, minute, second, ampm, dot = m.group("h", "m", "s", "ampm", "dot")
    h = int(hour)
    words = number_to_words(h)
    if minute:
        mins = int(minute)
        if mins == 0:
            words += "" if ampm else " hundred" if h > 12 or hour.startswith("0") else " o'clock"
        elif mins < 10:
            words += f" oh {ONES[mins]}"
        else:
            words += f" {number_to_words(mins)}"
    if second and int(second):
        words += f" and {number_to_words(int(second))} seconds"
    if ampm:
        words += " " + " ".join(ch.upper() for ch in ampm if ch.isalpha())
    return words + ("." if dot else "")


def _plural(words: str) -> str:
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def _fraction(m: re.Match[str]) -> str:
    top, bottom = int(m.group(1)), int(m.group(2))
    if bottom == 2:
        name = "half" if top == 1 else "halves"
    elif bottom == 4:
        name = "quarter" if top == 1 else "quarters"
    else:
        name = ordinal_to_words(bottom) + ("" if top == 1 else "s")
    return f"{number_to_words(top)} {name}"


def _number(m: re.Match[str]) -> str:
    return number_text(m.group())


def number_text(text: str) -> str:
    """'1,234' / '3.14' / '007' in words."""
    if "." in text:
        return decimal_to_words(text)
    return integer_words(text.replace(",", ""))


_Rule = tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]


def _rules(*pairs: tuple[str, str | Callable[[re.Match[str]], str]], flags: int = 0) -> list[_Rule]:
    return [(re.compile(p, flags), r) for p, r in pairs]


# Expanded wherever they appear with their dot.
_ABBR = word_table(
    "Mr=Mister;Mrs=Missus;Ms=Miz;Prof=Professor;Jr=Junior;Sr=Senior;approx=approximately;"
    "Inc=Incorporated.;Ltd=Limited.;Ave=Avenue;Dept=Department;etc=et cetera.;vs=versus"
)
_ABBREVIATIONS = _rules(
    (rf"\b({'|'.join(_ABBR)})\.", lambda m: _ABBR[m.group(1)]),
    (r"\bvs\b", "versus"),
    (r"\bDr\.(?=\s+[A-Z])", "Doctor"),
    (r"\bSt\.(?=\s+[A-Z])", "Saint"),
    (r"\bMt\.(?=\s+[A-Z])", "Mount"),
    (r"\bNo\.(?=\s*\d)", "number"),
    (r"\be\.g\.,?", "for example,"),
    (r"\bi\.e\.,?", "that is,"),
    (r"\bU\.S\.A?\.?", "U S"),
    (r"\b(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.(?=\s+\d)", r"\1"),
)
_MONTH_ABBR = {m[:3]: m for m in MONTHS} | {"Sept": "September"}

_NUMERIC = _rules(
    (r"\b(\d{4})-(\d{2})-(\d{2})\b", _iso_date),
    (r"\b(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})\b", _slash_date),
    (
        rf"\b({_MONTH_RE}|{'|'.join(_MONTH_ABBR)})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(,?\s+(\d{{4}}))?",
        lambda m: (
            f"{_MONTH_ABBR.get(m.group(1), m.group(1))} {ordinal_to_words(int(m.group(2)))}"
            + (f", {year_to_words(int(m.group(4)))}" if m.group(4) else "")
        ),
    ),
    (
        rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_RE})\b(,?\s+(\d{{4}}))?",
        lambda m: (
            f"the {ordinal_to_words(int(m.group(1)))} of {m.group(2)}"
            + (f", {year_to_words(int(m.group(4)))}" if m.group(4) else "")
        ),
    ),
    (
        r"\b(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?"
        r"(?:\s*(?P<ampm>[aApP]\.?[mM])(?P<dot>\.)?(?!\w))?",
        _clock,
    ),
    (
        r"\b(?P<h>1[0-2]|0?[1-9])(?P<m>)(?P<s>)\s*(?P<ampm>[aApP]\.?[mM])(?P<dot>\.)?(?!\w)",
        _clock,
    ),
    (
        rf"(?P<sign>[-−])?(?P<sym>[$€£¥₹])\s?(?P<amt>{_NUM})(?:\s?(?P<mag>[kKmMbBtT]|bn|thousand|million|billion|trillion)\b)?",
        _money,
    ),
    (
        rf"(?P<sign>[-−])?\b(?P<sym>USD|EUR|GBP|JPY|INR)\s?(?P<amt>{_NUM})(?P<mag>)",
        _money,
    ),
    (rf"(?P<sign>)(?<!\d)(?P<amt>{_NUM})\s?(?P<sym>[€£]|EUR|GBP|USD)(?!\w)(?P<mag>)", _money),
    (rf"(?<!\d)({_NUM})\s?%", lambda m: f"{number_text(m.group(1))} percent"),
    (
        r"\b(\d+(?:\.\d+)?)(k|K|M|B|bn)\b",
        lambda m: f"{number_text(m.group(1))} {_MAGNITUDES[m.group(2).lower()]}",
    ),
    (r"\b(\d+)(?:st|nd|rd|th)\b", lambda m: ordinal_digits(m.group(1))),
    (r"\b(1\d|20)(\d0)s\b", lambda m: _plural(year_to_words(int(m.group(1) + m.group(2))))),
    (r"'(\d)0s\b", lambda m: TENS[int(m.group(1))][:-1] + "ies"),
    (
        r"(?<=\d)\s?(" + "|".join(re.escape(u) for u in _UNITS) + r")(?![\w°])",
        lambda m: " " + _UNITS[m.group(1)],
    ),
    (r"\b(\d{1,2})/(2|3|4|5|6|8|10|16)\b", _fraction),
    (r"\b24/7\b", "twenty-four seven"),
    (r"\b\d+(?:\.\d+){2,}\b", lambda m: " point ".join(map(integer_words, m.group().split(".")))),
    (r"(?<=\d)\s*[-–]\s*(?=\d)", " to "),
    (r"(?<=\d)\s*[×*]\s*(?=\d)", " times "),
    (r"(?<=\d)\s*x\s*(?=\d)", " by "),
    (r"(?<=\d)\s*/\s*(?=\d)", " over "),
    (r"(?<![\w.])[-−](?=\d)", "minus "),
    (r"#(?=\d)", "number "),
    (
        r"\b(in|since|by|until|from|of|year|before|after|during|circa|around)\s+(1[1-9]\d\d|20\d\d)\b",
        lambda m: f"{m.group(1)} {year_to_words(int(m.group(2)))}",
    ),
    (_NUM, _number),
)

_SYMBOLS = _rules(
    (r"\b([CcFf])\+\+", r"\1 plus plus"),
    (r"(?:(?<!\s)\s+)?&\s*", " and "),
    (r"(?<!\s)\s+\+\s+|(?<=\w)\+(?=\w)", " plus "),
    (r"(?:(?<!\s)\s+)?=\s*", " equals "),
    (r"(?:(?<!\s)\s+)?≈\s*", " approximately "),
    (r"(?:(?<!\s)\s+)?[<≤]\s*(?=\w)", " less than "),
    (r"(?:(?<!\s)\s+)?[>≥]\s*(?=\w)", " greater than "),
    (r"(?:(?<!\s)\s+)?±\s*", " plus or minus "),
    (r"(?:(?<!\s)\s+)?→\s*", " to "),
    (r"\s@\s?|(?<=\w)@(?=\w)", " at "),
    (r"(?<!\w)#(?=\w)", "hashtag "),
    (r"(?<=\w)/(?=\w)", " "),
    (r"(?:(?<!\s)\s+)?[—–]\s*", ", "),
    (r"…", "..."),
    (r"[\"“”«»*_~^`|\\]+", " "),
    (r"[‘’]", "'"),
    (r"[{}\[\]<>#@=+$€£¥₹]+", " "),
)


def _apply(rules: list[_Rule], text: str, cap: int) -> str:
    for pattern, repl in rules:
        text = _capped(pattern.sub(repl, text), cap)
    return text


def _capped(text: str, cap: int) -> str:
    """Each expanding step is checked at once, so no later step runs on a runaway text."""
    check_length(text, cap, " once numbers and symbols are spelled out")
    return text


def check_length(text: str, max_chars: int = DEFAULT_MAX_CHARS, when: str = "") -> None:
    if len(text) > max_chars:
        raise TextTooLongError(
            f"text is {len(text)} characters long{when}, over the {max_chars} character limit"
        )


def normalize(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Speakable text; raises `TextTooLongError` past `max_chars`.

    The limit applies to what will be spoken, after numbers and symbols are spelled out
    (4,000 digits are about 20,000 characters of words); the raw text may be up to
    `RAW_FACTOR` times longer (markup that disappears), so the work done before the final
    check stays bounded too.
    """
    cap = max_chars * RAW_FACTOR
    check_length(text, cap)
    text = _capped(strip_emoji(text.replace("\r\n", "\n")), cap)  # © -> copyright
    text = _capped(unicodedata.normalize("NFKC", text).replace("⁄", "/"), cap)
    text = strip_markdown(text)
    text = _capped(_EMAIL.sub(lambda m: _spell_address(m.group()), text), cap)
    text = _capped(_URL.sub(_url, text), cap)
    text = _capped(_DOMAIN.sub(lambda m: _spell_address(m.group()), text), cap)
    text = _apply(_ABBREVIATIONS, text, cap)
    text = _apply(_NUMERIC, text, cap)
    text = _apply(_SYMBOLS, text, cap)
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"(?<! ) +([,.;:!?])", r"\1", text)
    text = re.sub(r"([,;:])\1+|,(?=[.!?])", r"\1", text)
    text = re.sub(r"\n\s*\n+", "\n\n", text)
    text = "\n".join(line.strip(" ,;:") for line in text.split("\n")).strip()
    check_length(text, max_chars, " once numbers and symbols are spelled out")
    return text


_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])|\n+")


def split_sentences(text: str, max_chars: int = DEFAULT_SENTENCE_CHARS) -> list[str]:
    """Sentences (and lines) of normalised text; overlong ones are cut at , ; : or spaces."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        if not any(ch.isalnum() for ch in piece):
            continue
        out.extend(_cut(piece, max_chars))
    return out


def _cut(sentence: str, max_chars: int) -> list[str]:
    parts: list[str] = []
    while len(sentence) > max_chars:
        window = sentence[:max_chars]
        cut = max(window.rfind(", "), window.rfind("; "), window.rfind(": "))
        if cut < max_chars // 3:
            cut = window.rfind(" ")
        if cut <= 0:
            cut = max_chars - 1
        parts.append(sentence[: cut + 1].strip())
        sentence = sentence[cut + 1 :].strip()
    if sentence:
        parts.append(sentence)
    return parts


def prepare(
    text: str, max_chars: int = DEFAULT_MAX_CHARS, sentence_chars: int = DEFAULT_SENTENCE_CHARS
) -> list[str]:
    """Normalise and split; raises `EmptyTextError` when nothing speakable is left."""
    sentences = split_sentences(normalize(text, max_chars), sentence_chars)
    if not sentences:
        raise EmptyTextError("text has nothing to speak after removing markup and symbols")
    return sentences
