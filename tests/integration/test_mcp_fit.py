"""Images that fit the client, and cached media as resources, end to end: the real SDK client
talks over stdio to a real `mcp-media proxy --images fit` wrapping a real SDK server that
returns 4K and 8000 px screenshots."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from PIL import Image

from pipelines.media import MediaKind
from tests.integration.conftest import ROOT, Cluster
from tests.support.factories import png_bytes

pytestmark = pytest.mark.integration

SCREENS = ["--", sys.executable, "-m", "tests.support.fit_upstream"]
MEDIA_URI = "mcp-media://media/"


@asynccontextmanager
async def proxied(cluster: Cluster, *args: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "proxy", "--inline", *args],
        env=cluster.env(PYTHONPATH=str(ROOT)),
        cwd=str(ROOT),
    )
    async with Client(params, read_timeout_seconds=180) as client:
        yield client


def _images(result: types.CallToolResult) -> list[types.ImageContent]:
    return [b for b in result.content if isinstance(b, types.ImageContent)]


def _media_paths(result: types.CallToolResult) -> list[Path]:
    return [
        Path(line.removeprefix("MEDIA:"))
        for block in result.content
        if isinstance(block, types.TextContent)
        for line in block.text.splitlines()
        if line.startswith("MEDIA:")
    ]


def _check_within(
    result: types.CallToolResult, side: int, image_bytes: int, result_bytes: int
) -> list[Image.Image]:
    """Every image block under the limits, the result under its cap; the decoded images."""
    assert len(result.model_dump_json(by_alias=True, exclude_none=True)) <= result_bytes
    decoded: list[Image.Image] = []
    for block in _images(result):
        assert len(block.data) <= image_bytes  # base64 characters
        image = Image.open(io.BytesIO(base64.b64decode(block.data)))
        assert max(image.size) <= side, image.size
        decoded.append(image)
    return decoded


def test_fit_keeps_a_4k_and_an_8000_px_screenshot_under_the_default_limits(
    cluster: Cluster,
) -> None:
    cluster.fake.set(reply="A build dashboard with a sidebar.")

    async def scenario() -> None:
        async with proxied(cluster, "--images", "fit", *SCREENS) as client:
            for width, height in ((3840, 2160), (8000, 4500)):
                got = await client.call_tool("screens", {"width": width, "height": height})
                assert not got.is_error
                assert [b.type for b in got.content] == ["text", "image", "text"]
                (image,) = _check_within(got, 1568, 5 * 1024 * 1024, 1024 * 1024)
                assert image.size == (1568, 882) and image.format == "PNG"
                block = _images(got)[0]
                assert block.annotations is not None and block.annotations.priority == 0.5
                assert block.meta == {"example.com/screen": 0}
                (original,) = _media_paths(got)
                with Image.open(original) as kept:
                    assert kept.size == (width, height)  # the original, untouched
                note = got.content[2]
                assert isinstance(note, types.TextContent)
                assert "A build dashboard with a sidebar." in note.text
                assert f"the original, {width}x{height}" in note.text

    anyio.run(scenario)


def test_fit_with_named_limits_and_a_result_over_its_cap(cluster: Cluster) -> None:
    limits = ["--max-image-side", "800", "--max-image-bytes", "150000"]
    cap = ["--max-result-bytes", "150000"]

    async def scenario() -> None:
        async with proxied(
            cluster, "--wait", "0", "--images", "fit", *limits, *cap, *SCREENS
        ) as client:
            got = await client.call_tool("screens", {"width": 3840, "height": 2160, "count": 3})
            decoded = _check_within(got, 800, 150_000, 150_000)
            links = [b for b in got.content if isinstance(b, types.ResourceLink)]
            assert decoded and links, [b.type for b in got.content]
            assert len(decoded) + len(links) == 3
            paths = _media_paths(got)
            assert len(paths) == 3 and all(p.is_file() for p in paths)
            for link in links:
                assert link.annotations is not None and link.meta is not None
                read = await client.read_resource(str(link.uri))
                (blob,) = read.contents
                assert isinstance(blob, types.BlobResourceContents)
                data = base64.b64decode(blob.blob)
                assert hashlib.sha256(data).hexdigest() == str(link.uri).removeprefix(MEDIA_URI)
                assert Image.open(io.BytesIO(data)).size == (3840, 2160)

    anyio.run(scenario)


def test_a_second_call_sends_the_copy_made_for_the_first(cluster: Cluster) -> None:
    """The copy is kept (cache/fitted): the same screenshot under the same limits is not
    encoded again, even by another door process; other limits make another copy."""

    async def fitted(*limits: str) -> tuple[str, list[Path]]:
        async with proxied(cluster, "--images", "fit", *limits, *SCREENS) as client:
            got = await client.call_tool("screens", {"width": 3840, "height": 2160})
            (image,) = _images(got)
            folder = _media_paths(got)[0].parent.parent / "fitted"
            side = int(limits[1]) if limits else 1568
            _check_within(got, side, 5 * 1024 * 1024, 1024 * 1024)
            return image.data, sorted(folder.iterdir())

    first, kept = anyio.run(fitted)
    assert len(kept) == 1
    made = kept[0].stat().st_ino
    again, still = anyio.run(fitted)
    assert again == first and still == kept
    assert kept[0].stat().st_ino == made  # read, not made and renamed into place again
    other, both = anyio.run(fitted, "--max-image-side", "1000")
    assert other != first and len(both) == 2 and kept[0] in both


def test_cached_media_are_listed_newest_first_page_by_page_with_a_template(
    cluster: Cluster,
) -> None:
    cache = cluster.settings().media_cache()
    shas = []
    for n in range(60):  # more than one page; each a distinct image, older ones first
        stored = cache.store_bytes(png_bytes((8, 8), (n, 2 * n, 100)), MediaKind.IMAGE)
        os.utime(stored.path, (1_700_000_000 + n, 1_700_000_000 + n))
        shas.append(stored.sha256)

    async def scenario() -> None:
        async with proxied(cluster, "--wait", "0", *SCREENS) as client:
            templates = (await client.list_resource_templates()).resource_templates
            assert f"{MEDIA_URI}{{sha256}}" in [t.uri_template for t in templates]
            pages: list[list[Any]] = []
            cursor = None
            while True:
                page = await client.list_resources(cursor=cursor, cache_mode="refresh")
                pages.append(page.resources)
                cursor = page.next_cursor
                if not cursor:
                    break
            listed = [str(r.uri) for page in pages for r in page]
            assert [len(p) for p in pages] == [50, 10]
            assert listed == [f"{MEDIA_URI}{sha}" for sha in reversed(shas)]
            first = pages[0][0]
            assert first.mime_type == "image/png" and first.size and first.size > 0
            # A new screenshot is cached by the call and listed first.
            got = await client.call_tool("screens", {"width": 640, "height": 360})
            (path,) = _media_paths(got)
            newest = (await client.list_resources(cache_mode="refresh")).resources[0]
            assert str(newest.uri) == f"{MEDIA_URI}{path.name.split('.')[0]}"
            read = await client.read_resource(str(newest.uri))
            (blob,) = read.contents
            assert isinstance(blob, types.BlobResourceContents)
            assert base64.b64decode(blob.blob) == path.read_bytes()
            with pytest.raises(MCPError) as refused:
                await client.list_resources(cursor="not-ours", cache_mode="refresh")
            assert refused.value.error.code == types.INVALID_PARAMS

    anyio.run(scenario)
