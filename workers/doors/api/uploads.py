"""Multipart uploads streamed into the cache: the file part is hashed and written as it
arrives (never held in memory, never spooled outside the cache), the size cap is checked
while streaming (413), and small form fields are capped too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import anyio
from anyio import to_thread
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from pipelines.media import BlobError, MarkerReason, MediaKind, StoredBlob
from pipelines.outcomes import Outcome
from pipelines.results import private_folders
from workers.core.settings import Settings
from workers.doors.api.bodies import body_chunks, form_text, multipart_boundary
from workers.doors.api.errors import ApiError
from workers.doors.api.faults import disk_full, insufficient_storage
from workers.doors.api.outcomes import http_error

MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 32
MAX_PART_HEADERS = 16 * 1024  # bytes of one part's headers


@dataclass
class Form:
    fields: dict[str, list[str]] = field(default_factory=dict)
    blob: StoredBlob | None = None
    filename: str = ""

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self.fields.get(name)
        return values[-1] if values else default


class _Part:
    def __init__(self) -> None:
        self.headers: dict[bytes, bytes] = {}
        self.header_field = b""
        self.header_value = b""
        self.name = ""
        self.header_bytes = 0
        self.filename: str | None = None
        self.value = bytearray()


class _Upload:
    """The file part, written under the cache folder while it arrives."""

    def __init__(self, home: Path, folder: Path, limit: int) -> None:
        # Every level this makes is 0700 (`cache/` too when an upload is the home's first
        # write): `mkdir(parents=True)` gives the parents the default mode.
        private_folders(home, folder)
        self.path = folder / f".upload-{secrets.token_hex(8)}"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        self.file: BinaryIO = os.fdopen(fd, "wb")
        self.limit = limit
        self.size = 0

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise http_error(
                Outcome.AUDIO_TOO_LARGE,
                f"the upload is over the {self.limit // (1024 * 1024)} MB limit "
                "(MCP_MEDIA_API__MAX_UPLOAD_MB)",
            )
        try:
            self.file.write(data)
        except OSError as exc:
            self._check_full(exc)
            raise

    def finish(self) -> None:
        """Close the file (its last bytes reach the disk here)."""
        try:
            self.file.close()
        except OSError as exc:
            self._check_full(exc)
            raise

    def _check_full(self, exc: OSError) -> None:
        """A full disk is a 507 naming this upload's folder."""
        if disk_full(exc) is not None:
            raise insufficient_storage(exc, self.path.parent) from exc

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        self.path.unlink(missing_ok=True)


DRAIN_BYTES = 1 << 20  # of a body refused before it was read, read and dropped at most
DRAIN_SECONDS = 2.0


async def _drain(request: Request) -> None:
    """Read and drop what is left of a body refused before it was read, within bounds: a
    connection closed with unread data is reset by the kernel, and the client may never
    read the answer."""
    read = 0
    with contextlib.suppress(Exception), anyio.move_on_after(DRAIN_SECONDS):
        async for chunk in request.stream():
            read += len(chunk)
            if read > DRAIN_BYTES:
                return


async def read_form(request: Request, settings: Settings, file_field: str = "file") -> Form:
    """Parse a multipart body; the part named `file_field` goes into the audio cache."""
    limit = int(settings.api.max_upload_mb * 1024 * 1024)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + MAX_FIELDS * MAX_FIELD_BYTES:
        raise http_error(
            Outcome.AUDIO_TOO_LARGE,
            f"the request body ({declared} bytes) is over the "
            f"{settings.api.max_upload_mb:g} MB upload limit",
        )
    try:
        boundary = multipart_boundary(request.headers.get("content-type", ""))
    except ApiError:
        await _drain(request)
        raise
    form = Form()
    upload: _Upload | None = None
    part = _Part()
    failure: list[ApiError] = []

    def on_part_begin() -> None:
        nonlocal part
        part = _Part()

    def headers_grow(data: bytes) -> bytes:
        part.header_bytes += len(data)
        if part.header_bytes > MAX_PART_HEADERS and not failure:
            failure.append(
                ApiError(
                    400,
                    f"a part's headers are over {MAX_PART_HEADERS // 1024} kB",
                    code="invalid_multipart",
                )
            )
        return data if not failure else b""

    def on_header_field(data: bytes, start: int, end: int) -> None:
        part.header_field += headers_grow(data[start:end])

    def on_header_value(data: bytes, start: int, end: int) -> None:
        part.header_value += headers_grow(data[start:end])

    def on_header_end() -> None:
        part.headers[part.header_field.lower()] = part.header_value
        part.header_field = part.header_value = b""

    def on_headers_finished() -> None:
        nonlocal upload
        if failure:
            return
        _, disposition = parse_options_header(part.headers.get(b"content-disposition", b""))
        try:
            part.name = form_text(disposition.get(b"name", b""), "name")
        except ApiError as exc:
            failure.append(exc)
            return
        raw_name = disposition.get(b"filename")
        part.filename = raw_name.decode("utf-8", "replace") if raw_name is not None else None
        if part.name == file_field:
            if upload is not None:
                failure.append(ApiError(400, "send one file", param=file_field))
                return
            form.filename = part.filename or ""
            upload = _Upload(settings.home, settings.cache_root / "uploads", limit)

    def on_part_data(data: bytes, start: int, end: int) -> None:
        if failure:
            return
        if part.name == file_field and upload is not None:
            try:
                upload.write(data[start:end])
            except ApiError as exc:
                failure.append(exc)
            return
        part.value += data[start:end]
        if len(part.value) > MAX_FIELD_BYTES:
            failure.append(ApiError(400, f"the field {part.name!r} is too long", param=part.name))

    def on_part_end() -> None:
        if part.name != file_field and not failure:
            if sum(len(v) for v in form.fields.values()) >= MAX_FIELDS:
                failure.append(ApiError(400, "too many form fields"))
                return
            try:
                value = form_text(bytes(part.value), part.name)
            except ApiError as exc:
                failure.append(exc)
                return
            form.fields.setdefault(part.name, []).append(value)

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_headers_finished": on_headers_finished,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    try:
        async for chunk in body_chunks(request, settings.api.head_timeout):
            parser.write(chunk)
            if failure:
                raise failure[0]
        parser.finalize()
        if failure:
            raise failure[0]
        if upload is None:
            raise ApiError(400, f"the form has no `{file_field}` part", param=file_field)
        form.blob = await to_thread.run_sync(_store, settings, upload)
    except FormParserError as exc:  # the multipart parser's errors: the body is malformed
        raise ApiError(400, f"malformed multipart body: {exc}", code="invalid_multipart") from exc
    finally:
        if upload is not None:
            upload.discard()
    return form


def _store(settings: Settings, upload: _Upload) -> StoredBlob:
    upload.finish()
    if upload.size == 0:
        raise http_error(Outcome.EMPTY_AUDIO, "the uploaded file is empty")
    try:
        return settings.media_cache().store_file(upload.path, MediaKind.AUDIO)
    except BlobError as exc:
        if exc.reason is MarkerReason.NOT_AUDIO:
            raise http_error(Outcome.NOT_AUDIO, exc.message) from exc
        if exc.reason is MarkerReason.TOO_LARGE:
            raise http_error(Outcome.AUDIO_TOO_LARGE, exc.message) from exc
        if disk_full(exc) is not None:
            raise insufficient_storage(exc, settings.cache_root) from exc
        raise ApiError(500, exc.message, code="cache_error") from exc
