"""HTML, Markdown and plain text: the standard library's HTML parser and a UTF-8 decode.

At most `4 * max_chars` bytes of the file are read (a character is at most four UTF-8
bytes; markup around it is dropped). HTML loses its scripts, styles and tags, and keeps a
line break where a block ends; its `<title>` is the title. A Markdown file's first `# `
heading is its title. Runs inside the reader child, under its caps.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_HIDDEN = frozenset({"script", "style", "template", "noscript", "head"})
_BLOCKS = frozenset(
    {"p", "div", "br", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "pre"}
    | {"section", "article", "header", "footer", "blockquote", "table", "ul", "ol", "hr"}
)


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title: list[str] = []
        self.hidden = 0
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        elif tag in _HIDDEN:
            self.hidden += 1
        if tag in _BLOCKS:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag in _HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        if tag in _BLOCKS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.hidden:
            self.out.append(data)


def _tidy(text: str) -> str:
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    return re.sub(r"\s*\n\s*(\n\s*)*", lambda m: "\n\n" if m.group(1) else "\n", text).strip()


def read(kind: str, path: str, max_chars: int) -> dict[str, object]:
    """The reader child's reply for one text file (`kind`: html or text)."""
    with open(path, "rb") as fh:
        data = fh.read(4 * max_chars + 1)
    cut = len(data) > 4 * max_chars
    text = data[: 4 * max_chars].decode("utf-8", errors="replace").replace("\x00", "")
    title = ""
    if kind == "html":
        parser = _Html()
        parser.feed(text)
        parser.close()
        text, title = _tidy("".join(parser.out)), " ".join("".join(parser.title).split())
    else:
        text = text.replace("\r\n", "\n").strip()
        heading = re.match(r"#\s+(.+)", text)
        title = heading.group(1).strip() if heading else ""
    truncated = cut or len(text) > max_chars
    return {
        "title": title[:300],
        "pages": 1,
        "texts": [text[:max_chars]],
        "labels": ["Text"],
        "truncated": truncated,
    }
