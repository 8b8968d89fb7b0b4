"""Resources through the proxy: the upstreams' (listed, read, subscribed to, and followed by
`subscriptions/listen` streams), beside the cache's media, read back by their
`mcp-media://media/<sha256>` links (or the same with the file's extension) with the MIME type
each link was handed out with.
"""

from __future__ import annotations

import base64
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError

from pipelines.rewrite import MEDIA_URI_PREFIX
from workers.doors.mcp.routing import Router, handshake_era_call
from workers.doors.mcp.tools import OwnTools

log = logging.getLogger("mcp_media.proxy")
REMEMBERED_LINKS = 10_000


class ProxyResources:
    """The proxy's handlers of the resources methods."""

    def __init__(self, router: Router, tools: OwnTools) -> None:
        self.router = router
        self.tools = tools
        self._link_mimes: OrderedDict[str, str] = OrderedDict()  # links handed out: their MIME
        self._listen = ListenHandler(router.events)

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        if getattr(params, "cursor", None):  # upstreams' come whole on the first page
            return self.tools.media_resources(params.cursor)
        peer = self.router.peer(ctx)
        resources: list[types.Resource] = []
        for upstream, client in await self.router.each(peer):
            listed = await self.router.pages(peer, upstream, client.list_resources, "resources")
            for resource in listed:
                peer.resource_owner[str(resource.uri)] = upstream.name
            resources += listed
        return self.tools.media_resources(None, resources)

    async def list_resource_templates(
        self, ctx: Any, params: Any
    ) -> types.ListResourceTemplatesResult:
        peer = self.router.peer(ctx)
        templates: list[types.ResourceTemplate] = []
        for upstream, client in await self.router.each(peer):
            listed = await self.router.pages(
                peer, upstream, client.list_resource_templates, "resource_templates"
            )
            for template in listed:
                peer.resource_owner[template.uri_template] = upstream.name
            templates += listed
        return types.ListResourceTemplatesResult(
            resource_templates=[*templates, *self.tools.resource_templates()]
        )

    async def read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri.startswith(MEDIA_URI_PREFIX):
            return self._read_media(uri)
        return await self.router.by_resource(ctx, uri, lambda client: client.read_resource(uri))

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        await self._forward(ctx, str(params.uri), "subscribe_resource")
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self._forward(ctx, str(params.uri), "unsubscribe_resource")
        return types.EmptyResult()

    async def _forward(self, ctx: Any, uri: str, verb: str) -> None:
        """A (un)subscription, to the upstream that listed `uri`."""
        with handshake_era_call():
            await self.router.by_resource(ctx, uri, lambda client: getattr(client, verb)(uri))

    async def listen(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026 client's `subscriptions/listen`: the changes its upstream sessions send
        (over HTTP the stream's own sessions, held while it is open), and updates of the
        resources it names, subscribed upstream for as long as the stream lasts."""
        peer = self.router.peer(ctx)
        await self.router.each(peer)  # the upstreams run: their changes can come
        uris = [str(uri) for uri in params.notifications.resource_subscriptions or ()]
        try:
            for uri in uris:
                peer.listened[uri] += 1
                if peer.listened[uri] == 1:
                    await self._listened(ctx, uri, subscribe=True)
            handler = self._listen if peer.events is None else ListenHandler(peer.events)
            return await handler(ctx, params)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                for uri in uris:
                    peer.listened[uri] -= 1
                    if peer.listened[uri] <= 0:
                        del peer.listened[uri]
                        await self._listened(ctx, uri, subscribe=False)

    async def _listened(self, ctx: Any, uri: str, subscribe: bool) -> None:
        verb = "subscribe_resource" if subscribe else "unsubscribe_resource"
        try:
            await self._forward(ctx, uri, verb)
        except MCPError as exc:  # an upstream without subscriptions: list changes still come
            log.info("resource %s: %s upstream failed: %s", uri, verb, exc)

    def remember_links(self, blocks: Sequence[Any]) -> None:
        """The MIME type of each mcp-media:// link handed out, for resources/read to repeat."""
        for block in blocks:
            if not isinstance(block, Mapping) or block.get("type") != "resource_link":
                continue
            uri, mime = block.get("uri"), block.get("mimeType")
            if isinstance(uri, str) and uri.startswith(MEDIA_URI_PREFIX) and isinstance(mime, str):
                self._link_mimes[uri] = mime
                self._link_mimes.move_to_end(uri)
                if len(self._link_mimes) > REMEMBERED_LINKS:
                    self._link_mimes.popitem(last=False)

    def _read_media(self, uri: str) -> types.ReadResourceResult:
        # The URI handed out names the sha256; the same with the file's extension reads too.
        sha = uri.removeprefix(MEDIA_URI_PREFIX).partition(".")[0]
        found = self.tools.cached(sha)
        if found is None:
            raise MCPError(types.INVALID_PARAMS, f"no cached media {uri}")
        path, guessed = found
        handed_out = f"{MEDIA_URI_PREFIX}{sha}"
        mime = self._link_mimes.get(handed_out, guessed)
        blob = base64.b64encode(path.read_bytes()).decode()
        # The contents' URI carries the extension: a client that saves a blob under the last
        # segment of its URI (hermes-agent does) then has a file it can open by its name.
        named = f"{handed_out}{path.suffix}"
        contents = types.BlobResourceContents(uri=named, mime_type=mime, blob=blob)
        return types.ReadResourceResult(contents=[contents])
