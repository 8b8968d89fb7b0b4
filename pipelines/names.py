"""Safe file names for documents, derived from untrusted URIs and names."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote, urlsplit

from pipelines.sniff import extension_for_mime

MAX_NAME_CHARS = 150
_EXT_RE = re.compile(r"\.[A-Za-z0-9]{1,12}$")
# Bidi overrides/isolates and other format characters that make a name read differently
# from how it is stored; zero-width characters too.
_INVISIBLE = frozenset(
    "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2066\u2067\u2068\u2069\u2060\ufeff\u061c"
)
_WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"]
    + [f"COM{i}" for i in range(1, 10)]
    + [f"LPT{i}" for i in range(1, 10)]
)
_WINDOWS_FORBIDDEN = frozenset('<>:"|?*')


_TAGS = re.compile("[\U000e0000-\U000e007f]")


def strip_tag_characters(text: str) -> str:
    """Remove Unicode tag characters (U+E0000-U+E007F), a known hidden-prompt carrier."""
    return _TAGS.sub("", text)


def _is_unsafe_char(ch: str) -> bool:
    if ch in _INVISIBLE or ch in _WINDOWS_FORBIDDEN or 0xE0000 <= ord(ch) <= 0xE007F:
        return True
    # Cc: control characters incl. NUL and newlines; Cs: lone surrogates from bad input.
    return unicodedata.category(ch) in ("Cc", "Cs")


def last_path_segment(uri: str) -> str:
    """The last segment of the URL-decoded path of a URI (or of a plain path)."""
    try:
        path = urlsplit(uri).path if "://" in uri else uri
    except ValueError:
        path = uri
    # Decode twice: `%252f` is a common way of smuggling a `/` through one decode.
    decoded = unquote(unquote(path))
    return re.split(r"[/\\]", decoded)[-1]


def safe_document_name(uri: str | None, name: str | None, mime: str | None) -> str:
    """A file name that cannot leave its folder, cannot hide characters, and fits 150 chars.

    Prefers the URI's last path segment, then the given name, then `resource<ext>`.
    """
    for candidate in (uri, name):
        if candidate:
            cleaned = _clean(last_path_segment(candidate))
            if cleaned:
                return cleaned
    return "resource" + extension_for_mime(mime)


# A stored name is shown to the agent (in the saved-document line): no `[[...]]` directive
# and no `MEDIA：` look-alike may survive in it. Brackets become parentheses; a character
# that folds to a colon goes the way of the colon (Windows forbids it anyway).
_AGENT_SYNTAX = {"[": "(", "]": ")", ":": ""}


def _fold_agent_syntax(ch: str) -> str:
    if ch.isascii():
        return _AGENT_SYNTAX.get(ch, ch)
    folded = unicodedata.normalize("NFKC", ch)
    return _AGENT_SYNTAX.get(folded, ch)


def _clean(raw: str) -> str:
    name = "".join(
        _fold_agent_syntax(ch)
        for ch in unicodedata.normalize("NFC", raw)
        if not _is_unsafe_char(ch)
    )
    name = name.strip().strip(".").strip()
    if name in ("", ".", ".."):
        return ""
    stem, ext = _split_extension(name)
    budget = MAX_NAME_CHARS - len(ext)
    stem = _clamp_utf8_safe(stem, budget).rstrip(". ")
    if not stem:
        stem = "resource"
    if stem.split(".")[0].rstrip(" ").upper() in _WINDOWS_RESERVED:
        stem = _clamp_utf8_safe("_" + stem, budget)
    return stem + ext


def _split_extension(name: str) -> tuple[str, str]:
    match = _EXT_RE.search(name)
    if match is None or match.start() == 0:
        return name, ""
    return name[: match.start()], match.group(0)


def _clamp_utf8_safe(text: str, limit: int) -> str:
    # Keep the limit in characters (what the contract says) and also keep names under the
    # common 255-byte file-system limit for wide scripts.
    text = text[:limit]
    while len(text.encode("utf-8", "surrogatepass")) > 255 - 16:
        text = text[:-1]
    return text
