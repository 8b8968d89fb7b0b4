"""A tiny PDF writer for tests: text pages in Helvetica, a title, and the hostile kinds
(encrypted, truncated, a page bomb) built from the same parts, so no binary fixture is kept.

Objects: 1 catalog, 2 page tree, 3 font, 4 info; then per distinct content stream one
object and per page one object. A page bomb shares one content stream among all its pages,
so thousands of pages cost a few hundred kilobytes.
"""

from __future__ import annotations

from collections.abc import Sequence


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _content(lines: Sequence[str]) -> bytes:
    shown = " T* ".join(f"({_escape(line)}) Tj" for line in lines)
    return f"BT /F1 12 Tf 14 TL 72 740 Td {shown} ET".encode("latin-1")


def build_pdf(
    pages: Sequence[Sequence[str]],
    title: str | None = None,
    encrypt: bool = False,
    shared_pages: int = 0,
) -> bytes:
    """A PDF with one page per entry of `pages` (its lines of text); with `shared_pages`,
    that many further pages all showing the first page's content (a page bomb)."""
    contents = [_content(lines) for lines in pages] or [b""]
    page_contents = list(range(len(pages))) + [0] * shared_pages
    first_content = 5
    first_page = first_content + len(contents)
    kids = " ".join(f"{first_page + i} 0 R" for i in range(len(page_contents)))
    info = f"<< /Title ({_escape(title)}) >>" if title else "<< >>"
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(page_contents)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        info.encode("latin-1"),
    ]
    for data in contents:
        objects.append(b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream")
    for index in page_contents:
        objects.append(
            (
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 3 0 R >> >> /Contents {first_content + index} 0 R >>"
            ).encode()
        )
    trailer_extra = ""
    if encrypt:
        # The standard security handler with a user password nobody knows: the /O and /U
        # entries are fixed bytes no password derives, so no reader can open it.
        objects.append(
            b"<< /Filter /Standard /V 1 /R 2 /P -44 "
            b"/O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> >>"
        )
        trailer_extra = f" /Encrypt {len(objects)} 0 R /ID [<{'ab' * 16}> <{'ab' * 16}>]"
    return _assemble(objects, f" /Info 4 0 R{trailer_extra}")


def _assemble(objects: Sequence[bytes], trailer_extra: str) -> bytes:
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R{trailer_extra} >>"
    out += b"trailer\n" + trailer.encode() + b"\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def text_pages(
    count: int, sentence: str, at: int | None = None, lines_per_page: int = 30
) -> list[list[str]]:
    """`count` pages of numbered filler lines; page `at` (default: the middle one) carries
    `sentence` on its fourth line."""
    pages = []
    for page in range(count):
        lines = [
            f"Page {page + 1} line {n + 1} of the generated report." for n in range(lines_per_page)
        ]
        if page == (count // 2 if at is None else at):
            lines[3] = sentence
        pages.append(lines)
    return pages


def scanned_pdf(text: Sequence[Sequence[str]], scanned: Sequence[Sequence[str]]) -> bytes:
    """Text pages, then image-only pages: each a grey picture of its lines drawn by Pillow
    (no text layer, as a scanner makes them)."""
    import zlib

    from PIL import Image, ImageDraw

    contents: list[tuple[bytes, int | None]] = [(_content(lines), None) for lines in text]
    images: list[bytes] = []
    for lines in scanned:
        picture = Image.new("L", (1224, 1584), 255)
        draw = ImageDraw.Draw(picture)
        for row, line in enumerate(lines):
            draw.text((100, 120 + 60 * row), line, fill=0, font_size=36)
        images.append(
            b"<< /Type /XObject /Subtype /Image /Width 1224 /Height 1584 /ColorSpace "
            b"/DeviceGray /BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n"
            % len(packed := zlib.compress(picture.tobytes()))
            + packed
            + b"\nendstream"
        )
        contents.append((b"q 612 0 0 792 0 0 cm /Im1 Do Q", len(images) - 1))
    first = 4 + len(images)  # catalog, pages, font, then the images, then content/page pairs
    kids = " ".join(f"{first + 2 * i + 1} 0 R" for i in range(len(contents)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(contents)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        *images,
    ]
    for number, (data, image) in enumerate(contents):
        objects.append(b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream")
        shown = f"/XObject << /Im1 {4 + image} 0 R >>" if image is not None else ""
        objects.append(
            (
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << "
                f"/Font << /F1 3 0 R >> {shown} >> /Contents {first + 2 * number} 0 R >>"
            ).encode()
        )
    return _assemble(objects, "")
