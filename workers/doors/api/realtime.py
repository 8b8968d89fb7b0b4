"""`/v1/realtime?intent=transcription`: OpenAI's Realtime transcription over a WebSocket.

The client appends base64 PCM16 (`input_audio_buffer.append`) and ends each turn with
`input_audio_buffer.commit`, or, with server VAD, the session ends it where the speaker
stops (`speech_started`, `speech_stopped`, then `committed`: `realtime_vad`), or where a turn
spoken without a pause reaches the buffer's bound or the longest turn, the speech going on
as the next turn, so that no append is refused while someone talks; each committed
turn is one transcription job through the gateway (`realtime_turns`), its `.delta` and
`.completed` events sent in commit order while the client goes on appending the next. The
key is serve's: `Authorization: Bearer`, or from a browser the `openai-insecure-api-key.<key>`
subprotocol. Bounded: sessions held at once (then 429 before the upgrade), minutes a session
lives, audio one turn's buffer holds, turns waiting to be transcribed.
"""

from __future__ import annotations

import binascii
import hmac
import json
import logging
import secrets
from base64 import b64decode
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from workers.core.speech_scoring import SpeechScoring
from workers.doors.api.catalog import catalog, stt_model
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError, refuse_upgrade
from workers.doors.api.realtime_audio import decoded_size, to_pcm16
from workers.doors.api.realtime_events import (
    EventError,
    ServerVad,
    SessionConfig,
    error_event,
    item_id,
    server_event,
    session_object,
    updated,
)
from workers.doors.api.realtime_turns import Turn
from workers.doors.api.realtime_vad import EdgeKind, ServerTurns

log = logging.getLogger(__name__)
TurnQueue = MemoryObjectSendStream[tuple[Turn, bytes]]

KEY_PROTOCOL = "openai-insecure-api-key."
PENDING_TURNS = 8  # committed turns waiting for their transcription; past it a commit is refused
MIN_TURN_S = 0.1  # OpenAI refuses a commit of less than 100 ms of audio
UPDATES = {"session.update": False, "transcription_session.update": True}  # -> the older shape


def _key_given(websocket: WebSocket) -> str:
    scheme, _, value = websocket.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    for protocol in websocket.scope.get("subprotocols") or ():
        if protocol.startswith(KEY_PROTOCOL):
            return str(protocol[len(KEY_PROTOCOL) :])
    return ""


def _check(websocket: WebSocket, key: str) -> ApiError | None:
    given = _key_given(websocket)
    if not given:
        return ApiError(
            401, "missing API key: send Authorization: Bearer <key> (or, from a browser, the "
            f"{KEY_PROTOCOL}<key> subprotocol)", code="missing_api_key",
        )  # fmt: skip
    if not hmac.compare_digest(given.encode(), key.encode()):
        return ApiError(401, "wrong API key", code="invalid_api_key")
    intent = websocket.query_params.get("intent", "transcription")
    if intent != "transcription":
        return ApiError(
            400, f"intent {intent!r} is not served here: only intent=transcription",
            param="intent", code="invalid_value",
        )  # fmt: skip
    return None


@dataclass(slots=True)
class Session:
    """One connection's state: its settings, the turn being appended, the turns queued."""

    ctx: ApiContext
    websocket: WebSocket
    config: SessionConfig
    older: bool = False
    id: str = field(default_factory=lambda: f"sess_{secrets.token_hex(10)}")
    buffer: bytearray = field(default_factory=bytearray)
    offset: int = 0  # samples since the session's first one that the buffer no longer holds
    last_item: str | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    turns: ServerTurns | None = None  # server VAD
    vad_from: int = 0  # the sample where server VAD began listening
    speech: tuple[str, int] | None = None  # the turn being spoken: its item, its first sample

    async def send(self, event: dict[str, Any]) -> None:
        async with self.lock:  # the reader and the turns both send
            await self.websocket.send_text(json.dumps(event))

    async def refuse(self, exc: EventError, client_event: str | None) -> None:
        await self.send(error_event(exc, client_event))

    def append(self, event: dict[str, Any]) -> bytes:
        audio = event.get("audio")
        if not isinstance(audio, str):
            raise EventError("`audio` must be base64 text", code="invalid_type", param="audio")
        limit = self.limit
        codec = self.config.codec
        if len(self.buffer) + decoded_size(codec, len(audio) * 3 // 4) > limit:  # before decoding
            raise EventError(
                f"the input audio buffer would pass its {limit} bytes: commit the turn before"
                " appending more (MCP_MEDIA_API__REALTIME_BUFFER_MB)",
                code="input_audio_buffer_too_large",
                param="audio",
            )
        try:
            pcm = to_pcm16(codec, b64decode(audio, validate=True))
        except binascii.Error:
            raise EventError("`audio` is not base64", code="invalid_value", param="audio") from None
        self.buffer += pcm
        return pcm

    @property
    def limit(self) -> int:
        return int(self.ctx.settings.api.realtime_buffer_mb * 1024 * 1024)

    def reaches_bound(self, event: dict[str, Any]) -> bool:
        """Would this append take the turn being spoken past the buffer's bound or the
        longest turn? (Server VAD; a turn shorter than a commit's least is not ended so.)"""
        audio = event.get("audio")
        if self.speech is None or not isinstance(audio, str):
            return False
        rate, end = self.config.rate, self.offset + len(self.buffer) // 2
        if end - self.speech[1] < rate * MIN_TURN_S:
            return False
        size = decoded_size(self.config.codec, len(audio) * 3 // 4)  # before decoding
        longest = rate * self.ctx.settings.api.realtime_turn_s
        return len(self.buffer) + size > self.limit or end + size // 2 - self.speech[1] > longest

    def commit(self) -> tuple[str, bytes]:
        least = int(self.config.rate * 2 * MIN_TURN_S)
        if len(self.buffer) < least:
            raise EventError(
                f"buffer too small: expected at least {MIN_TURN_S * 1000:.0f} ms of audio, have"
                f" {len(self.buffer) / 2 / self.config.rate * 1000:.0f} ms",
                code="input_audio_buffer_commit_empty",
            )
        pcm = bytes(self.buffer)
        self.clear()
        return item_id(), pcm

    def clear(self) -> None:
        self.offset += len(self.buffer) // 2
        self.buffer.clear()

    def cut(self, start: int, end: int) -> bytes:
        """The buffer's samples [start, end) (since the session's first sample); what comes
        before `end` is dropped."""
        start, end = max(start, self.offset), min(end, self.offset + len(self.buffer) // 2)
        pcm = bytes(self.buffer[(start - self.offset) * 2 : (end - self.offset) * 2])
        self.drop(end)
        return pcm

    def drop(self, before: int) -> None:
        """Forget the samples before `before` (since the session's first sample)."""
        if before > self.offset:
            del self.buffer[: (before - self.offset) * 2]
            self.offset = before

    def listen(self, vad: ServerVad | None, scoring: SpeechScoring | None) -> None:
        """Server VAD from now on (a new scorer when its settings or the audio changed), or
        none."""
        if vad is None or scoring is None:
            self.turns, self.speech = None, None
            return
        if (
            self.turns is not None
            and self.turns.watch.vad == vad
            and self.turns.rate == (self.config.rate)
        ):
            return
        self.turns = ServerTurns(scoring.open(self.config.rate), vad, self.config.rate)
        self.vad_from, self.speech = self.offset + len(self.buffer) // 2, None

    async def edge(self, kind: EdgeKind, at: int, queue: TurnQueue) -> None:
        """`speech_started` (a new turn from sample `at`) or `speech_stopped` at `at`."""
        ms = at * 1000 // self.config.rate
        if kind is EdgeKind.STARTED:
            self.speech = (item_id(), at)
            fields = {"audio_start_ms": ms, "item_id": self.speech[0]}
            await self.send(server_event("input_audio_buffer.speech_started", **fields))
            return
        item, start = self.speech or (item_id(), at)
        self.speech = None
        fields = {"audio_end_ms": ms, "item_id": item}
        await self.send(server_event("input_audio_buffer.speech_stopped", **fields))
        try:
            await _enqueue(self, item, self.cut(start, at), queue)
        except EventError as exc:
            await self.refuse(exc, None)

    async def split(self, queue: TurnQueue) -> None:
        """End the turn being spoken where the buffer ends (its bound reached, the speaker
        not stopped), and start the next there unless quiet had begun."""
        assert self.turns is not None
        end = self.offset + len(self.buffer) // 2
        await self.edge(EdgeKind.STOPPED, end, queue)
        if self.turns.cut():
            await self.edge(EdgeKind.STARTED, end, queue)

    async def heard(self, pcm: bytes, queue: TurnQueue) -> None:
        """Server VAD on newly appended audio: each turn's edges sent, each ended turn
        committed; between turns the buffer keeps only what the next one's padding needs."""
        assert self.turns is not None
        rate = self.config.rate
        for edge in await self.turns.heard(pcm):
            await self.edge(edge.kind, self.vad_from + edge.at_ms * rate // 1000, queue)
        if self.speech is None:  # the padding, and a window's worth the scorer may lag
            keep = rate * (self.turns.watch.vad.prefix_padding_ms + 100) // 1000
            self.drop(self.offset + len(self.buffer) // 2 - keep)


async def _enqueue(session: Session, item: str, pcm: bytes, queue: TurnQueue) -> None:
    """A committed turn queued for its transcription, and `committed` sent."""
    turn = Turn(session.ctx, session.config, item, session.send)
    try:
        queue.send_nowait((turn, pcm))
    except anyio.WouldBlock:
        raise EventError(
            f"{PENDING_TURNS} turns already wait for their transcription: commit again later",
            code="too_many_pending_turns",
        ) from None
    await session.send(
        server_event(
            "input_audio_buffer.committed", previous_item_id=session.last_item, item_id=item
        )
    )
    session.last_item = item


async def _turns(session: Session, queued: MemoryObjectReceiveStream[tuple[Turn, bytes]]) -> None:
    async with queued:
        async for turn, pcm in queued:
            try:
                await turn.run(pcm)
            except (WebSocketDisconnect, OSError, RuntimeError):
                return  # the client left while its turn was transcribed


async def _events(session: Session, queue: TurnQueue) -> None:
    """Read and answer the client's events until it leaves."""
    while True:
        message = await session.websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None:  # a binary frame: events are JSON text
            refusal = EventError("events are JSON objects in text frames", code="invalid_json")
            await session.refuse(refusal, None)
            continue
        try:
            event = json.loads(text)
            if not isinstance(event, dict):
                raise ValueError
        except ValueError:
            await session.refuse(
                EventError("the event is not a JSON object", code="invalid_json"), None
            )
            continue
        client_event = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        try:
            await _answer(session, event, queue)
        except EventError as exc:
            await session.refuse(exc, client_event)


async def _answer(session: Session, event: dict[str, Any], queue: TurnQueue) -> None:
    kind = event.get("type")
    if kind in UPDATES:
        older = UPDATES[str(kind)]
        model = stt_model(await catalog(session.ctx))
        scoring = session.ctx.scoring
        session.config, refusal = updated(
            session.config, model, event, older, vad_ready=scoring is not None
        )
        session.older = older
        session.listen(session.config.vad, scoring)
        name = "transcription_session.updated" if older else "session.updated"
        await session.send(
            server_event(name, session=session_object(session.id, session.config, older))
        )
        if refusal is not None:
            raise refusal
    elif kind == "input_audio_buffer.append":
        if session.reaches_bound(event):  # speech without a pause: this turn ends here
            await session.split(queue)
        pcm = session.append(event)
        if session.turns is not None:
            await session.heard(pcm, queue)
    elif kind == "input_audio_buffer.clear":
        session.clear()
        await session.send(server_event("input_audio_buffer.cleared"))
    elif kind == "input_audio_buffer.commit":
        await _enqueue(session, *session.commit(), queue)
    else:
        raise EventError(
            f"unknown event type {str(kind)[:60]!r}: this session takes session.update,"
            " transcription_session.update and input_audio_buffer.append/commit/clear",
            code="invalid_value",
            param="type",
        )


def routes(ctx: ApiContext) -> list[BaseRoute]:
    held = [0]  # sessions open now

    async def realtime(websocket: WebSocket) -> None:
        api = ctx.settings.api
        refusal = _check(websocket, ctx.key)
        if refusal is None and held[0] >= api.realtime_sessions:
            refusal = ApiError(
                429, f"{api.realtime_sessions} realtime sessions are open already"
                " (MCP_MEDIA_API__REALTIME_SESSIONS): retry later",
                code="too_many_sessions", headers={"Retry-After": str(api.retry_after)},
            )  # fmt: skip
        if refusal is not None:
            await refuse_upgrade(websocket, refusal)
            return
        offered = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol="realtime" if "realtime" in offered else None)
        held[0] += 1
        ctx.metrics.realtime_sessions.set(held[0])
        session = Session(ctx, websocket, SessionConfig())
        try:
            await session.send(
                server_event(
                    "session.created", session=session_object(session.id, session.config, False)
                )
            )
            send, receive = anyio.create_memory_object_stream[tuple[Turn, bytes]](PENDING_TURNS)
            with anyio.move_on_after(api.realtime_minutes * 60) as timer:
                async with anyio.create_task_group() as group, send:
                    group.start_soon(_turns, session, receive)
                    await _events(session, send)
                    group.cancel_scope.cancel()  # the client left: its turns go unanswered
            if timer.cancelled_caught:
                expired = EventError(
                    f"the session reached its {api.realtime_minutes:g} minutes"
                    " (MCP_MEDIA_API__REALTIME_MINUTES)", code="session_expired",
                )  # fmt: skip
                await session.refuse(expired, None)
                await websocket.close(code=1000)
        except WebSocketDisconnect:
            pass
        finally:
            held[0] -= 1
            ctx.metrics.realtime_sessions.set(held[0])

    return [WebSocketRoute("/v1/realtime", realtime)]
