"""DOCX, PPTX and XLSX text with the standard library: zipfile and a streaming expat parser.

Office files are zip archives of XML, and both layers can be bombs. So the archive may hold
at most `MAX_MEMBERS` members, every byte decompressed is counted against `MAX_UNZIPPED`
(whatever the sizes the archive declares), and the XML is parsed as it is decompressed, in
chunks, with no tree built: a document type declaration (where entities, and so entity
expansion, would be declared) is refused outright. Text collected stops at `max_chars`.
Runs inside the reader child (`reader_child`), under its memory, CPU and write caps.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from xml.parsers import expat

MAX_MEMBERS = 10_000
MAX_UNZIPPED = 256 * 1024 * 1024  # bytes decompressed per document, over all members read
_CHUNK = 64 * 1024
_NS = "}"  # expat with namespaces joins "uri}local"; only the local name is looked at


class TooLarge(Exception):
    """The archive holds more than the bounds allow (a zip bomb ends here)."""


class Refused(Exception):
    """The XML declares a document type (an XML bomb ends here) or is not XML."""


@dataclass(slots=True)
class _Budget:
    left: int = MAX_UNZIPPED

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise TooLarge(f"more than {MAX_UNZIPPED // (1024 * 1024)} MiB once unzipped")


@dataclass(slots=True)
class _Text:
    """Text gathered from the parts read, up to `max_chars` in all."""

    max_chars: int
    max_pages: int
    parts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    total: int = 0
    truncated: bool = False

    def add(self, label: str, text: str) -> None:
        text = re.sub(r"[ \t]+\n", "\n", re.sub(r"\n{3,}", "\n\n", text)).strip()
        if self.total + len(text) > self.max_chars:
            text, self.truncated = text[: self.max_chars - self.total], True
        self.parts.append(text)
        self.labels.append(label)
        self.total += len(text)

    @property
    def full(self) -> bool:
        return self.total >= self.max_chars


def _parse(
    archive: zipfile.ZipFile,
    name: str,
    budget: _Budget,
    start: Callable[[str, dict[str, str]], None],
    end: Callable[[str], None],
    chars: Callable[[str], None],
) -> None:
    parser = expat.ParserCreate(namespace_separator=_NS)

    def refuse(*_: object) -> None:
        raise Refused(f"{name} declares a document type (entities are refused)")

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.StartElementHandler = lambda tag, attrs: start(tag.rpartition(_NS)[2], attrs)
    parser.EndElementHandler = lambda tag: end(tag.rpartition(_NS)[2])
    parser.CharacterDataHandler = chars
    try:
        with archive.open(name) as member:
            while chunk := member.read(_CHUNK):
                budget.spend(len(chunk))
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
    except expat.ExpatError as exc:
        raise Refused(f"{name} is not well-formed XML: {exc}") from None


class _Runs:
    """Text of the elements named `texts`, a newline after each of `breaks`: `w:t` and
    `w:p` in Word, `a:t` and `a:p` in slides, `t` and `si` in shared strings."""

    def __init__(self, texts: frozenset[str], breaks: frozenset[str], limit: int) -> None:
        self.texts, self.breaks, self.limit = texts, breaks, limit
        self.depth = 0
        self.out: list[str] = []
        self.size = 0

    def start(self, tag: str, _attrs: dict[str, str]) -> None:
        if tag in self.texts:
            self.depth += 1
        elif tag == "tab":
            self.out.append("\t")
        elif tag in ("br", "cr"):
            self.out.append("\n")

    def end(self, tag: str) -> None:
        if tag in self.texts:
            self.depth -= 1
        elif tag in self.breaks:
            self.out.append("\n")

    def chars(self, data: str) -> None:
        if self.depth > 0 and self.size < self.limit:
            self.out.append(data)
            self.size += len(data)

    def text(self) -> str:
        return "".join(self.out)


def _runs(
    archive: zipfile.ZipFile, name: str, budget: _Budget, tags: tuple[str, str], limit: int
) -> str:
    runs = _Runs(frozenset({tags[0]}), frozenset({tags[1]}), limit)
    _parse(archive, name, budget, runs.start, runs.end, runs.chars)
    return runs.text()


def _numbered(names: list[str], pattern: str) -> list[str]:
    found = [(int(m.group(1)), n) for n in names if (m := re.fullmatch(pattern, n))]
    return [name for _, name in sorted(found)]


def _title(archive: zipfile.ZipFile, names: set[str], budget: _Budget) -> str:
    if "docProps/core.xml" not in names:
        return ""
    return _runs(archive, "docProps/core.xml", budget, ("title", "\0"), 300).strip()


def _docx(archive: zipfile.ZipFile, names: list[str], budget: _Budget, text: _Text) -> int:
    text.add("Document", _runs(archive, "word/document.xml", budget, ("t", "p"), text.max_chars))
    return 1


def _pptx(archive: zipfile.ZipFile, names: list[str], budget: _Budget, text: _Text) -> int:
    slides = _numbered(names, r"ppt/slides/slide(\d+)\.xml")
    for number, name in enumerate(slides[: text.max_pages], start=1):
        if text.full:
            text.truncated = True
            break
        text.add(f"Slide {number}", _runs(archive, name, budget, ("t", "p"), text.max_chars))
    return len(slides)


def _sheet_names(archive: zipfile.ZipFile, names: set[str], budget: _Budget) -> list[str]:
    found: list[str] = []
    if "xl/workbook.xml" in names:
        _parse(
            archive,
            "xl/workbook.xml",
            budget,
            lambda tag, attrs: found.append(attrs.get("name", "")) if tag == "sheet" else None,
            lambda tag: None,
            lambda data: None,
        )
    return found


class _Cells:
    """Rows of one worksheet as tab-separated lines; shared strings looked up by index."""

    def __init__(self, shared: list[str], limit: int) -> None:
        self.shared, self.limit = shared, limit
        self.rows: list[str] = []
        self.row: list[str] = []
        self.kind = ""
        self.value: list[str] | None = None
        self.size = 0

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if tag == "c":
            self.kind = attrs.get("t", "n")
        elif tag in ("v", "t"):
            self.value = []

    def end(self, tag: str) -> None:
        if tag in ("v", "t") and self.value is not None:
            value = "".join(self.value)
            if self.kind == "s":
                index = int(value) if value.isdigit() else -1
                value = self.shared[index] if 0 <= index < len(self.shared) else ""
            self.row.append(value)
            self.value = None
        elif tag == "row":
            line = "\t".join(cell for cell in self.row).rstrip("\t")
            if line and self.size < self.limit:
                self.rows.append(line)
                self.size += len(line) + 1
            self.row = []

    def chars(self, data: str) -> None:
        if self.value is not None:
            self.value.append(data)


def _shared_strings(
    archive: zipfile.ZipFile, names: set[str], budget: _Budget, limit: int
) -> list[str]:
    if "xl/sharedStrings.xml" not in names:
        return []
    strings: list[str] = []
    current: list[str] = []
    inside = [0, 0]  # depth in <t>, characters kept

    def start(tag: str, _attrs: dict[str, str]) -> None:
        if tag == "t":
            inside[0] += 1

    def end(tag: str) -> None:
        if tag == "t":
            inside[0] -= 1
        elif tag == "si":
            strings.append("".join(current))
            current.clear()

    def chars(data: str) -> None:
        if inside[0] and inside[1] < limit:
            current.append(data)
            inside[1] += len(data)

    _parse(archive, "xl/sharedStrings.xml", budget, start, end, chars)
    return strings


def _xlsx(archive: zipfile.ZipFile, names: list[str], budget: _Budget, text: _Text) -> int:
    present = set(names)
    shared = _shared_strings(archive, present, budget, text.max_chars)
    sheets = _numbered(names, r"xl/worksheets/sheet(\d+)\.xml")
    titles = _sheet_names(archive, present, budget)
    for number, name in enumerate(sheets[: text.max_pages], start=1):
        if text.full:
            text.truncated = True
            break
        cells = _Cells(shared, text.max_chars)
        _parse(archive, name, budget, cells.start, cells.end, cells.chars)
        label = titles[number - 1] if number <= len(titles) else f"Sheet {number}"
        text.add(f"Sheet: {label}", "\n".join(cells.rows))
    return len(sheets)


_READERS: dict[str, Callable[[zipfile.ZipFile, list[str], _Budget, _Text], int]] = {
    "docx": _docx,
    "pptx": _pptx,
    "xlsx": _xlsx,
}


def read(kind: str, path: str, max_pages: int, max_chars: int) -> dict[str, object]:
    """The reply of the reader child for one Office file (`kind`: docx, pptx or xlsx)."""
    budget, text = _Budget(), _Text(max_chars, max_pages)
    with zipfile.ZipFile(path) as archive:
        names = [info.filename for info in _members(archive)]
        title = _title(archive, set(names), budget)
        pages = _READERS[kind](archive, names, budget, text)
    return {
        "title": " ".join(title.split())[:300],
        "pages": pages,
        "texts": text.parts,
        "labels": text.labels,
        "truncated": text.truncated or pages > max_pages,
    }


def _members(archive: zipfile.ZipFile) -> Iterator[zipfile.ZipInfo]:
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise TooLarge(f"{len(members)} members in the archive (at most {MAX_MEMBERS})")
    return iter(members)
