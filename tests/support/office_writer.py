"""Minimal DOCX, PPTX and XLSX files written with zipfile, and the hostile kinds built from
the same parts (a zip bomb member, an XML entity bomb, too many members): no binary fixture.

Only the parts a reader needs are written (no content types a word processor would want),
plus docProps/core.xml for the title.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from xml.sax.saxutils import escape

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
A = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
P = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
CORE = (
    '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/'
    'core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{}</dc:title>'
    "</cp:coreProperties>"
)
BOMB = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i else "&lol;" * 10}">' for i in range(9))
    + "]><w:document {W}><w:body><w:p><w:r><w:t>&lol8;</w:t></w:r></w:p></w:body></w:document>"
)


def _zip(parts: dict[str, str | bytes], title: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if title is not None:
            archive.writestr("docProps/core.xml", CORE.format(escape(title)))
        for name, body in parts.items():
            archive.writestr(name, body)
    return buffer.getvalue()


def _paragraphs(lines: Sequence[str], ns: str) -> str:
    return "".join(
        f"<{ns}:p><{ns}:r><{ns}:t>{escape(line)}</{ns}:t></{ns}:r></{ns}:p>" for line in lines
    )


def docx(paragraphs: Sequence[str], title: str | None = None) -> bytes:
    body = f"<w:document {W}><w:body>{_paragraphs(paragraphs, 'w')}</w:body></w:document>"
    return _zip({"word/document.xml": body}, title)


def pptx(slides: Sequence[Sequence[str]], title: str | None = None) -> bytes:
    parts: dict[str, str | bytes] = {"ppt/presentation.xml": f"<p:presentation {P}/>"}
    for number, lines in enumerate(slides, start=1):
        shape = f"<p:sp><p:txBody>{_paragraphs(lines, 'a')}</p:txBody></p:sp>"
        parts[f"ppt/slides/slide{number}.xml"] = (
            f"<p:sld {P} {A}><p:cSld><p:spTree>{shape}</p:spTree></p:cSld></p:sld>"
        )
    return _zip(parts, title)


def xlsx(sheets: dict[str, Sequence[Sequence[str | int]]], title: str | None = None) -> bytes:
    """Text cells go through the shared strings, numbers stay in the cell."""
    shared: list[str] = []
    names = "".join(
        f'<sheet name="{escape(name)}" sheetId="{n}"/>' for n, name in enumerate(sheets, start=1)
    )
    parts: dict[str, str | bytes] = {
        "xl/workbook.xml": f"<workbook {S}><sheets>{names}</sheets></workbook>"
    }
    for number, rows in enumerate(sheets.values(), start=1):
        xml_rows = []
        for r, row in enumerate(rows, start=1):
            cells = []
            for value in row:
                if isinstance(value, int):
                    cells.append(f"<c><v>{value}</v></c>")
                else:
                    shared.append(value)
                    cells.append(f'<c t="s"><v>{len(shared) - 1}</v></c>')
            xml_rows.append(f'<row r="{r}">{"".join(cells)}</row>')
        parts[f"xl/worksheets/sheet{number}.xml"] = (
            f"<worksheet {S}><sheetData>{''.join(xml_rows)}</sheetData></worksheet>"
        )
    strings = "".join(f"<si><t>{escape(text)}</t></si>" for text in shared)
    parts["xl/sharedStrings.xml"] = f"<sst {S}>{strings}</sst>"
    return _zip(parts, title)


def zip_bomb_docx(unzipped_mib: int) -> bytes:
    """A DOCX whose body is `unzipped_mib` MiB of spaces inside one element: it deflates to
    about a thousandth of that, and holds no text at all."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open("word/document.xml", "w", force_zip64=True) as member,
    ):
        member.write(f"<w:document {W}><w:body><w:p><w:r><w:t>".encode())
        block = b" " * (1024 * 1024)
        for _ in range(unzipped_mib):
            member.write(block)
        member.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return buffer.getvalue()


def entity_bomb_docx() -> bytes:
    return _zip({"word/document.xml": BOMB.replace("{W}", W)})


def crowded_docx(members: int) -> bytes:
    """A DOCX with `members` empty members beside its body."""
    parts: dict[str, str | bytes] = {"word/document.xml": f"<w:document {W}><w:body/></w:document>"}
    parts.update({f"junk/{n}.xml": b"" for n in range(members)})
    return _zip(parts)
