"""Resource links resolved: a `resource_link` block that names its own upstream's resource is
read (`resources/read` on the same upstream session) and put through ingest as the embedded
resource it answered, so its bytes are cached and get their job (summary, digest,
transcript). The client still receives the link the upstream sent, with our text under it.

Fail-open: a link whose read fails, takes longer than its timeout, is over the size cap or
names another server's resource stays as it came, followed by a one-line reason.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from pipelines.render import one_line
from pipelines.rewrite import MEDIA_URI_PREFIX

Reader = Callable[[str], Awaitable[types.ReadResourceResult]]


@dataclass(frozen=True, slots=True)
class LinkReads:
    """How links are read: `others` are the URIs other upstreams listed (not this one's to
    answer); `max_bytes` caps one resource's bytes, `timeout` the reads of one result
    together, in seconds (one deadline, so ten slow links wait no longer than one)."""

    read: Reader
    others: frozenset[str]
    max_bytes: int
    timeout: float


@dataclass(frozen=True, slots=True)
class Resolved:
    """The content to ingest, and each embedded block read for a link with that link: the
    rewritten result gives the client the link back where the embedded block would go."""

    content: list[dict[str, Any]]
    embedded: tuple[tuple[dict[str, Any], dict[str, Any]], ...]

    def linked(self) -> frozenset[int]:
        """Where in `content` the blocks stand that go back to the client as links."""
        made = {id(block) for block, _ in self.embedded}
        return frozenset(i for i, block in enumerate(self.content) if id(block) in made)


class LinkUnread(Exception):
    """Why a link stays a link, in one line."""


def link_note(uri: str, reason: str) -> str:
    return f"[MCP resource link {one_line(uri)} not read: {reason}]"


async def resolve_links(content: Sequence[Mapping[str, Any]], reads: LinkReads) -> Resolved:
    """`content` (wire JSON blocks) with each resource link read in place; unchanged when
    there is none."""
    out: list[dict[str, Any]] = []
    embedded: list[tuple[dict[str, Any], dict[str, Any]]] = []
    deadline = anyio.current_time() + reads.timeout
    for block in content:
        link = dict(block)
        if link.get("type") != "resource_link" or not isinstance(link.get("uri"), str):
            out.append(link)
            continue
        uri = link["uri"]
        try:
            contents = await _read(link, reads, deadline)
        except LinkUnread as exc:
            out += [link, {"type": "text", "text": link_note(uri, str(exc))}]
            continue
        for made in contents:
            resource = {**made, "uri": uri} if "uri" not in made else made
            block_made = {"type": "resource", "resource": resource}
            out.append(block_made)
            embedded.append((block_made, link))
    return Resolved(out, tuple(embedded))


async def _read(link: Mapping[str, Any], reads: LinkReads, deadline: float) -> list[dict[str, Any]]:
    uri: str = link["uri"]
    if uri.startswith(MEDIA_URI_PREFIX) or uri in reads.others:
        raise LinkUnread("it names another server's resource")
    size = link.get("size")
    if isinstance(size, int) and size > reads.max_bytes:
        raise LinkUnread(f"its size, {size} bytes, is over the {reads.max_bytes}-byte cap")
    answer: types.ReadResourceResult | None = None
    try:
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            answer = await reads.read(uri)
    except MCPError as exc:
        why = one_line(exc.message, 200)
        raise LinkUnread(f"the upstream's resources/read failed: {why}") from None
    except Exception as exc:  # an answer the SDK could not take: the link still reaches the client
        why = one_line(f"{type(exc).__name__}: {exc}", 200)
        raise LinkUnread(f"the upstream's resources/read failed: {why}") from None
    if answer is None:
        raise LinkUnread(
            f"the upstream's resources/read gave no answer within the result's {reads.timeout:g} s"
        )
    contents = [
        c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in answer.contents
    ]
    if not contents:
        raise LinkUnread("the upstream's resources/read answered no contents")
    total = sum(_bytes(c) for c in contents)
    if total > reads.max_bytes:
        raise LinkUnread(f"it holds {total} bytes, over the {reads.max_bytes}-byte cap")
    return contents


def _bytes(contents: Mapping[str, Any]) -> int:
    """The decoded size of one resource contents (text as UTF-8)."""
    blob = contents.get("blob")
    if isinstance(blob, str):
        try:
            return len(base64.b64decode(blob, validate=False))
        except (binascii.Error, ValueError):
            return len(blob)
    text = contents.get("text")
    return len(text.encode()) if isinstance(text, str) else 0


def links_back(rewritten: dict[str, Any], resolved: Resolved) -> dict[str, Any]:
    """`rewritten` with each embedded blob read for a link (where the rewrite forwarded it
    as such) put back as the link the upstream sent: the client gets what it was sent, and
    our text under it; the bytes stay in the cache. Text read for a link stays embedded."""
    if not resolved.embedded:
        return rewritten
    content = rewritten.get("content")
    if isinstance(content, list):
        back = {_blob_key(made): link for made, link in resolved.embedded}
        back.pop(None, None)
        rewritten["content"] = [back.get(_blob_key(block), block) for block in content]
    return rewritten


def _blob_key(block: Any) -> tuple[Any, str] | None:
    if not isinstance(block, Mapping) or block.get("type") != "resource":
        return None
    resource = block.get("resource")
    if not isinstance(resource, Mapping) or not isinstance(resource.get("blob"), str):
        return None  # text read for a link stays: the client reads it where it is
    return (resource.get("uri"), resource["blob"])
