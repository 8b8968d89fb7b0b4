"""Resource links read in place (workers.doors.mcp.link_reads), against an in-process reader
that serves a few resources: what is read becomes embedded, what is not stays a link with its
reason, nothing is asked for a link over its declared cap or naming this door's own media,
and only blobs read for a link are given back as the link."""

from __future__ import annotations

import base64
from collections.abc import Mapping

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from workers.doors.mcp.link_reads import LinkReads, Resolved, links_back, resolve_links

pytestmark = pytest.mark.unit

PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()


class Served:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def read(self, uri: str) -> types.ReadResourceResult:
        self.asked.append(uri)
        if uri == "docs://a.pdf":
            blob = types.BlobResourceContents(uri=uri, mime_type="application/pdf", blob=PDF)
            return types.ReadResourceResult(contents=[blob])
        if uri == "docs://a.txt":
            text = types.TextResourceContents(uri=uri, mime_type="text/plain", text="hello")
            return types.ReadResourceResult(contents=[text])
        raise MCPError(-32002, f"no {uri}")


def link(uri: str, size: int | None = None) -> dict[str, object]:
    made: dict[str, object] = {"type": "resource_link", "uri": uri, "name": uri}
    if size is not None:
        made["size"] = size
    return made


def resolve(served: Served, *blocks: Mapping[str, object]) -> Resolved:
    reads = LinkReads(served.read, frozenset({"other://b.pdf"}), max_bytes=100, timeout=30)
    return anyio.run(resolve_links, list(blocks), reads)


def test_read_links_become_embedded_and_unread_ones_say_why() -> None:
    served = Served()
    caption = {"type": "text", "text": "two files"}
    done = resolve(
        served,
        caption,
        link("docs://a.pdf"),
        link("docs://a.txt"),
        link("docs://gone.pdf"),
        link("docs://huge.pdf", size=101),
        link("other://b.pdf"),
        link("mcp-media://media/abc"),
    )
    types_ = [block["type"] for block in done.content]
    assert types_ == ["text", "resource", "resource", *["resource_link", "text"] * 4]
    assert done.content[1]["resource"]["blob"] == PDF
    assert done.content[2]["resource"]["text"] == "hello"
    reasons = [b["text"] for b in done.content[3:] if b["type"] == "text"]
    assert "resources/read failed: no docs://gone.pdf" in reasons[0]
    assert "101 bytes, is over the 100-byte cap" in reasons[1]
    assert reasons[2] == (
        "[MCP resource link other://b.pdf not read: it names another server's resource]"
    )
    assert reasons[3].endswith("not read: it names another server's resource]")
    assert served.asked == ["docs://a.pdf", "docs://a.txt", "docs://gone.pdf"]


def test_only_blobs_read_for_a_link_are_given_back_as_the_link() -> None:
    done = resolve(
        Served(), {"type": "text", "text": "x"}, link("docs://a.pdf"), link("docs://a.txt")
    )
    about = {"type": "text", "text": "[MCP resource saved to /x (application/pdf, 13 bytes)]"}
    rewritten = {"content": [done.content[0], done.content[1], about, done.content[2]]}
    back = links_back(rewritten, done)["content"]
    assert back == [done.content[0], link("docs://a.pdf"), about, done.content[2]]


def test_the_reads_of_one_result_share_one_deadline() -> None:
    # Each read takes 0.3 s and the result has 0.5 s for all of them: three reads cannot all
    # finish (0.9 s), so the last link stays a link however fast or slow the machine is.
    asked: list[str] = []

    async def slow(uri: str) -> types.ReadResourceResult:
        asked.append(uri)
        await anyio.sleep(0.3)
        text = types.TextResourceContents(uri=uri, mime_type="text/plain", text="late")
        return types.ReadResourceResult(contents=[text])

    reads = LinkReads(slow, frozenset(), max_bytes=100, timeout=0.5)
    blocks = [link("docs://1.txt"), link("docs://2.txt"), link("docs://3.txt")]
    done = anyio.run(resolve_links, blocks, reads)
    assert done.content[-2] == link("docs://3.txt")
    assert done.content[-1]["text"] == (
        "[MCP resource link docs://3.txt not read: the upstream's resources/read gave no "
        "answer within the result's 0.5 s]"
    )
