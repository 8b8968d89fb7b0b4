"""The MCP servers behind the proxy: how to reach each, and keeping a live session to it.

An upstream is reached over stdio (a command) or over HTTP (streamable HTTP or SSE, with
headers). Its session lives in a task of its own (anyio ties a connection's context to the
task that opened it); calls from any handler use it. When the upstream crashes, the calls in
flight fail, the session is torn down, and the next call starts it again after a back-off.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import Process
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.subscriptions import event_to_notification

from workers.core.door_settings import McpSettings
from workers.doors.mcp.upstream_process import Prestarted, spawn_environment
from workers.doors.mcp.upstream_specs import ConfigFileError, UpstreamSpec, read_config
from workers.doors.mcp.upstream_stdio import upstream_stdio

__all__ = ["ConfigFileError", "Upstream", "UpstreamDown", "UpstreamSpec", "read_config"]

log = logging.getLogger("mcp_media.proxy")

CONNECT_TIMEOUT = 30.0
BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0  # seconds up after which a failure starts the back-off over
WAIT_OUT_BACKOFF = 5.0  # a call waits for a shorter back-off instead of failing


class UpstreamDown(Exception):
    """The upstream cannot be reached now; the message says why and when it is tried again."""


def _target(
    spec: UpstreamSpec, limits: McpSettings, process: Process | None = None, handshake: Any = None
) -> Any:
    if spec.command is not None:
        params = StdioServerParameters(
            command=spec.command, args=list(spec.args), env=spawn_environment(spec), cwd=spec.cwd
        )
        return upstream_stdio(
            spec.name,
            params,
            limits.max_upstream_message_bytes,
            process=process,
            handshake=handshake,
        )
    assert spec.url is not None
    import httpx2

    from workers.doors.mcp.upstream_http import SSE_CLIENT_EVENT_BYTES, bounded_client

    cap = limits.max_upstream_message_bytes
    if spec.transport == "sse":
        from mcp.client.sse import sse_client

        note = "MCP_MEDIA_MCP__MAX_UPSTREAM_MESSAGE_MB"
        if cap > SSE_CLIENT_EVENT_BYTES:  # the SDK's SSE client fails past it, whatever we allow
            cap, note = SSE_CLIENT_EVENT_BYTES, f"the SSE transport's; {note} is larger"
        factory = partial(bounded_client, spec.name, cap, note)
        return sse_client(spec.url, headers=dict(spec.headers), httpx_client_factory=factory)
    from mcp.client.streamable_http import streamable_http_client

    http = bounded_client(
        spec.name, cap, headers=dict(spec.headers), timeout=httpx2.Timeout(30, read=300)
    )
    # Events are bounded by the client's transport (an error in place of one past the cap),
    # not by the SDK (which fails the stream past 1 MiB).
    inner = streamable_http_client(spec.url, http_client=http, max_sse_event_size=None)
    return _OwningTransport(inner, http)


class _OwningTransport:
    """A transport that also closes the HTTP client it was given."""

    def __init__(self, inner: AbstractAsyncContextManager[Any], http: Any) -> None:
        self.inner = inner
        self.http = http

    async def __aenter__(self) -> Any:
        return await self.inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.inner.__aexit__(*exc)
        finally:
            await self.http.aclose()


MessageHandler = Callable[[str, Any], Awaitable[None]]


def _absorb_early_listing(name: str, client: Client, handshake: Any) -> None:
    """The tools the early front listed on this session's process, taken in by its client
    as if it had listed them itself (their output schemas check its results, every page)."""
    tools = getattr(handshake, "tools", None)
    if not tools:
        return
    try:
        listing = types.ListToolsResult(
            tools=[types.Tool.model_validate(tool, by_name=False) for tool in tools]
        )
        client.session._absorb_tool_listing(listing, complete=False)
    except Exception as exc:  # its client lists them itself at the first call
        log.info("upstream %s: early listing not taken in: %s", name, _reason(exc))


def _reason(exc: BaseException) -> str:
    """The first real error inside task-group wrappers, in one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:500]


class Upstream:
    """One upstream server and its (re)started session."""

    def __init__(
        self,
        spec: UpstreamSpec,
        on_message: MessageHandler,
        limits: McpSettings | None = None,
        callbacks: Mapping[str, Any] | None = None,
        prestarted: Prestarted | None = None,
    ) -> None:
        self.spec = spec
        self._prestarted = prestarted  # its process may have been started ahead
        self.limits = limits or McpSettings()
        self._on_message = on_message
        self._callbacks = dict(callbacks or {})  # what the client behind us declared
        self._finished = anyio.Event()
        self.client: Client | None = None
        self.error: str | None = None
        self._wanted = anyio.Event()
        self._ready = anyio.Event()
        self._broken = anyio.Event()
        self._closed = anyio.Event()
        self._stopping = False
        self._retry_at = 0.0
        self._backoff = BACKOFF_START
        self.retry_delays: deque[float] = deque(maxlen=32)  # the back-off after each failure

    @property
    def name(self) -> str:
        return self.spec.name

    async def run(self) -> None:
        """The session's own task: connect when wanted, hold it until broken, back off.

        The back-off doubles at each failure and starts again only after a call succeeded
        (`succeeded`) or the session stayed up STABLE_AFTER seconds: a server that starts
        fine but crashes on every call is not restarted at the first delay each time."""
        try:
            await self._run()
        finally:
            self._finished.set()

    async def finished(self) -> None:
        """Wait until `run` has returned (after `stop`): the session and its process ended."""
        await self._finished.wait()

    async def _run(self) -> None:
        up_since: float | None = None
        while not self._stopping:
            await self._wanted.wait()
            if self._stopping:
                return
            try:
                # The handshake, not the `server/discover` probe: SDK 1.x servers log a long
                # error at each unknown method, and every server still speaks the handshake.
                ahead = self._prestarted.take(self.name) if self._prestarted else None
                shaken = self._prestarted.handshake(self.name) if self._prestarted else None
                async with Client(
                    _target(self.spec, self.limits, ahead, shaken),
                    mode="legacy",
                    message_handler=self._handle,
                    read_timeout_seconds=self.limits.call_timeout,  # tools/call: see Proxy
                    **self._callbacks,
                ) as client:
                    self.client, self.error = client, None
                    _absorb_early_listing(self.name, client, shaken)
                    up_since = anyio.current_time()
                    self._closed = anyio.Event()
                    self._ready.set()
                    async with anyio.create_task_group() as watch:
                        watch.start_soon(self._listen, client)
                        await self._broken.wait()
                        watch.cancel_scope.cancel()
            except Exception as exc:  # a spawn failure, a crash, a refused connection
                self.error = _reason(exc)
                log.warning("upstream %s is down: %s", self.name, self.error)
            finally:
                self.client = None
                now = anyio.current_time()
                if up_since is not None and now - up_since >= STABLE_AFTER:
                    self._backoff = BACKOFF_START  # it ran well for a while: a fresh failure
                up_since = None
                self.retry_delays.append(self._backoff)
                self._retry_at = now + self._backoff
                self._backoff = min(self._backoff * 2, BACKOFF_MAX)
                self._wanted, self._broken = anyio.Event(), anyio.Event()
                ready, self._ready = self._ready, anyio.Event()
                ready.set()  # wake waiters: they see no client and the error
                self._closed.set()

    async def session(self) -> Client:
        """The live session, started (again) if needed; raises UpstreamDown."""
        if self._stopping:
            raise UpstreamDown(f"upstream {self.name!r} is stopped: its client has gone")
        if self.client is not None:
            if not self._broken.is_set():
                return self.client
            with anyio.move_on_after(CONNECT_TIMEOUT):
                await self._closed.wait()  # the broken session is still being torn down
        wait = self._retry_at - anyio.current_time()
        if wait > WAIT_OUT_BACKOFF and self.error is not None:
            raise UpstreamDown(
                f"upstream {self.name!r} is down ({self.error}); retried in {wait:.1f} s"
            )
        if wait > 0:
            await anyio.sleep(wait)  # a short back-off is waited out by the call
        ready = self._ready
        self._wanted.set()
        with anyio.move_on_after(CONNECT_TIMEOUT):
            await ready.wait()
        if self.client is None:
            raise UpstreamDown(
                f"upstream {self.name!r} did not start: {self.error or 'timed out connecting'}"
            )
        return self.client

    @property
    def live(self) -> bool:
        """The session is up: not broken, not stopped, and its connection has not ended (a
        process that died while idle; the SDK keeps that on the session's dispatcher only)."""
        if self.client is None or self._broken.is_set() or self._stopping:
            return False
        dispatcher = getattr(getattr(self.client, "session", None), "_dispatcher", None)
        return not getattr(dispatcher, "_closed", False)

    def succeeded(self) -> None:
        """A call was answered (a result or the upstream's own error): back-off starts over."""
        self._backoff = BACKOFF_START

    def broken(self, why: str) -> None:
        """A call failed at the transport: tear the session down; the next call restarts it."""
        self.error = why[:500]
        self._broken.set()

    def stop(self) -> None:
        self._stopping = True
        self._wanted.set()
        self._broken.set()

    async def _listen(self, client: Client) -> None:
        """Change events of a 2026-07-28 upstream come on a `subscriptions/listen` stream;
        earlier versions send list-changed notifications, which reach `_handle`."""
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as events:
                async for event in events:
                    await self._on_message(self.name, event_to_notification(event, {}))
        except ListenNotSupportedError:
            return
        except Exception as exc:  # no change events from this one; its calls still work
            log.info("upstream %s: no change events (%s)", self.name, _reason(exc))

    async def _handle(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.warning("upstream %s: %s", self.name, message)
            return
        await self._on_message(self.name, message)
