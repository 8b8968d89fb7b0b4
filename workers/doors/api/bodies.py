"""Request bodies read with bounds, every hostile shape a 400 with its own code: the one
place the HTTP door turns bytes into JSON or checks a multipart body's framing.

JSON: at most `MAX_JSON_DEPTH` levels (checked before the parser recurses), UTF-8 only,
finite numbers of sane length, no lone surrogates in any string (`"\\ud800"` escapes decode
to text no encoder takes). Multipart: a boundary as RFC 2046 allows it (1 to 70 of its
characters), form text in strict UTF-8.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
from python_multipart.multipart import parse_options_header
from starlette.requests import Request

from workers.doors.api.errors import ApiError

MAX_JSON_DEPTH = 64
MAX_NUMBER_CHARS = 100
MAX_BOUNDARY = 70  # RFC 2046, 5.1.1
_BCHARS = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? ")
# What the depth count looks at: an escape (skipped), a quote (in or out of a string), a
# bracket. One pass, each character once, however the body is made.
_TOKENS = re.compile(r'\\.|["\[\]{}]', re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")


async def body_chunks(request: Request, seconds: float) -> AsyncIterator[bytes]:
    """The body as it arrives; a 408 when a piece takes over `seconds` (a client that
    stalls mid-body held its connection, and the upload's file, for good)."""
    chunks = request.stream().__aiter__()
    while True:
        try:
            with anyio.fail_after(seconds):
                chunk = await chunks.__anext__()
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise ApiError(
                408, f"the request body stalled for {seconds:g} s", code="request_timeout"
            ) from None
        yield chunk


async def read_capped(request: Request, limit: int, seconds: float) -> bytes:
    """The whole body, 413 as soon as it passes `limit` bytes."""
    body = bytearray()
    async for chunk in body_chunks(request, seconds):
        body += chunk
        if len(body) > limit:
            raise ApiError(
                413, f"the request body is over {limit // 1024} kB", code="body_too_large"
            )
    return bytes(body)


async def read_json(request: Request, limit: int, seconds: float) -> dict[str, Any]:
    """A JSON object body of at most `limit` bytes, parsed within bounds."""
    return parse_json(await read_capped(request, limit, seconds))


def parse_json(body: bytes) -> dict[str, Any]:
    """A JSON object, or the 400 that says what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, f"the body is not UTF-8 text (byte {exc.start})", code="invalid_encoding"
        ) from None
    check_depth(text)
    try:
        data = json.loads(text, parse_float=_float, parse_int=_int, parse_constant=_constant)
    except ValueError as exc:
        raise ApiError(400, f"the body is not JSON: {exc}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object", code="invalid_body")
    check_strings(data)
    return data


def check_depth(text: str, limit: int = MAX_JSON_DEPTH) -> None:
    """400 when arrays and objects nest deeper than `limit` (counted without recursion)."""
    depth = 0
    quoted = False
    for match in _TOKENS.finditer(text):
        mark = match.group()
        if mark == '"':
            quoted = not quoted
        elif quoted or len(mark) > 1:
            continue
        elif mark in "[{":
            depth += 1
            if depth > limit:
                raise ApiError(
                    400,
                    f"the JSON nests deeper than {limit} levels",
                    code="json_too_deep",
                )
        elif mark in "]}":
            depth -= 1


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or len(text) > MAX_NUMBER_CHARS:
        raise ApiError(400, f"the number {text[:40]} is out of range", code="invalid_number")
    return value


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise ApiError(
            400, f"a number of {len(text)} digits is out of range", code="invalid_number"
        )
    return int(text)


def _constant(text: str) -> float:
    raise ApiError(400, f"{text} is not a JSON number", code="invalid_number")


def check_strings(data: Any) -> None:
    """400 naming the field when a string (key or value) holds a lone surrogate."""
    todo: list[tuple[str | None, Any]] = [(None, data)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                name = key if where is None else f"{where}.{key}"
                _check_text(key, where or "body")
                todo.append((name, item))
        elif isinstance(value, list):
            todo.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(value, where or "body")


def _check_text(text: str, param: str) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        raise ApiError(
            400,
            f"`{param}` holds a lone surrogate (U+{ord(found.group()):04X}) at character "
            f"{found.start()}: not text",
            param=param,
            code="invalid_text",
        )


def multipart_boundary(content_type: str) -> bytes:
    """The boundary of a multipart/form-data body, as RFC 2046 allows it; else a 400."""
    ctype, options = parse_options_header(content_type)
    if ctype != b"multipart/form-data":
        raise ApiError(400, "send the request as multipart/form-data", code="invalid_body")
    boundary = options.get(b"boundary") or b""
    if not 0 < len(boundary) <= MAX_BOUNDARY:
        raise ApiError(
            400,
            f"the multipart boundary is {len(boundary)} characters: RFC 2046 allows 1 to "
            f"{MAX_BOUNDARY}",
            code="invalid_boundary",
        )
    if not set(boundary) <= _BCHARS or boundary.endswith(b" "):
        raise ApiError(
            400, "the multipart boundary has characters RFC 2046 does not allow",
            code="invalid_boundary",
        )  # fmt: skip
    return boundary


def check_form_type(content_type: str) -> None:
    """A form body (urlencoded or multipart) whose framing can be parsed within bounds."""
    if content_type.lower().startswith("multipart/"):
        multipart_boundary(content_type)


def form_text(raw: bytes, param: str) -> str:
    """A form field's value (or name) as text: strict UTF-8, else a 400 naming it."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400,
            f"the form field {param[:100]!r} is not UTF-8 text (byte {exc.start})",
            param=param[:100],
            code="invalid_text",
        ) from None
