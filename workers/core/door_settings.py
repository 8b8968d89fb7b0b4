"""The settings sections of the doors: `mcp-media serve` (the HTTP API and the jobs page),
the MCP door (`proxy`, `mcp`) and the Wyoming door (`wyoming`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator


class ApiSettings(BaseModel):
    """`mcp-media serve`: the HTTP API (OpenAI audio) and the jobs page."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, gt=0, lt=65536)
    # Bearer key of /v1/* and the page's login. Unset: generated once in <home>/api-key,
    # loopback only; a non-loopback address is refused without one.
    key: SecretStr = SecretStr("")
    max_upload_mb: float = Field(default=25.0, gt=0)
    # Seconds a request waits for its job (then 504); a new job expected to finish later, by
    # the work ahead of it, is refused at once (429 rate_limit_exceeded with Retry-After).
    wait: float = Field(default=300.0, gt=0)
    retry_after: int = Field(default=5, ge=1)  # the Retry-After of a 429 (queue over high water)
    # OpenAI voice names (alloy, echo, ...) -> prepared voices; unnamed ones: tts.voice when
    # it speaks English, else the first English voice prepared.
    voices: dict[str, str] = Field(default_factory=dict)
    # /v1/audio/voices and /v1/audio/models without the key on a loopback bind (Open WebUI
    # asks for them without one); false: keyed like the rest. Off loopback: always keyed.
    public_catalog: bool = True
    max_speech_request_kb: int = Field(default=256, ge=1)  # JSON body of /v1/audio/speech
    # A request's line and header fields together (and at most 100 fields): past it, 431.
    max_header_kb: int = Field(default=16, ge=1)
    # Seconds a request's line and headers may take to arrive once begun, and then each piece
    # of its body: past it, 408 and the connection closed (a client that stalled mid-head or
    # mid-upload held its connection, and the upload's file, for good).
    head_timeout: float = Field(default=30.0, gt=0)
    # Jobs-page logins held at once (each lives 7 days); past it the oldest is logged out.
    page_sessions: int = Field(default=1000, ge=1)
    # Reverse proxies whose X-Forwarded-For/-Proto are believed (addresses or networks,
    # comma-separated). Unset: none, so a client cannot name its own address (the login limit).
    trusted_proxies: str = ""
    # The door's Redis: a broker that does not connect, or does not answer, is a 503 within
    # about these seconds (never the half minute the workers' client rides out). The read
    # bound stays above the door's blocking reads (stream reads block 500 ms).
    broker_connect_timeout: float = Field(default=0.5, gt=0)
    broker_timeout: float = Field(default=1.5, ge=1.0)
    # /v1/realtime transcription sessions: open at once (then 429), minutes each lives, and
    # the audio one turn's buffer holds (MB of PCM16) before an append is refused.
    realtime_sessions: int = Field(default=16, ge=1)
    realtime_minutes: float = Field(default=30.0, gt=0)
    realtime_buffer_mb: float = Field(default=15.0, gt=0)
    # Server VAD: a turn spoken without a pause ends at this length, or where the buffer is
    # full if that comes first, and the speech goes on as the next turn (silero's max speech).
    realtime_turn_s: float = Field(default=20.0, gt=0)


class McpSettings(BaseModel):
    """The MCP door (`proxy`, `mcp`): bounds on its upstreams and its HTTP sessions."""

    # Seconds an upstream tool call may go without answering; each progress notification
    # it sends starts the count again. Past it: a JSON-RPC error, and the call is cancelled.
    call_timeout: float = Field(default=300.0, gt=0)
    # One upstream message (a line on stdio). A result carrying one blob at the cache's
    # max_blob_bytes (50 MiB, ~67 MiB as base64) fits with room to spare; past it the
    # message is discarded as it streams by and its call gets a JSON-RPC error.
    max_upstream_message_mb: float = Field(default=128.0, gt=0)
    # HTTP sessions: closed after this many idle seconds; past `max_sessions` open ones a
    # new client gets 503 (a live client's session is never evicted).
    session_idle_timeout: float = Field(default=600.0, gt=0)
    max_sessions: int = Field(default=500, ge=1)
    # The HTTP door: a request's line and header fields together (at most 100 fields): past
    # it, 431 with a JSON-RPC error.
    max_header_kb: int = Field(default=16, ge=1)
    # Seconds a request's head, and then each piece of its body, may take to arrive: past
    # it, 408 with a JSON-RPC error and the connection closed.
    head_timeout: float = Field(default=30.0, gt=0)
    # 2026-07-28 requests over HTTP (no session to tell clients apart): `request` gives each
    # its own upstream sessions (no client sees another's upstream state; at most
    # `max_sessions` at once); `shared` gives them all one set, for upstreams that keep no
    # per-session state (the clients then see each other's: subscriptions, a session
    # resource, a log level). `spare_sessions` sets are started ahead (counted within
    # `max_sessions`) so a request need not wait for its upstreams to start; 0: none.
    modern_sessions: str = "request"
    spare_sessions: int = Field(default=1, ge=0, le=16)
    # MCP tasks (the io.modelcontextprotocol/tasks extension): at most `max_tasks` held at
    # once (finished ones give way to new ones, oldest first); each kept `task_ttl` seconds.
    max_tasks: int = Field(default=1000, ge=1)
    task_ttl: float = Field(default=3600.0, gt=0)
    # Results held by finished tasks (speech comes inline): past this, oldest results go.
    task_results_mb: float = Field(default=256.0, gt=0)
    # Our MEDIA: line under an image or audio block the client receives as such (--images
    # or --audio keep, fit): `always`; `omit`; `auto`: omitted for a client named hermes*,
    # which writes its own line for each such block, so that one image has one line.
    sent_media_tag: Literal["auto", "always", "omit"] = "auto"
    # A resource_link block naming its own upstream's resource: read on the same session
    # and handled as the embedded resource it answers (cached, summarised, digested), the
    # link kept for the client. `auto`: on for --images text, off otherwise. A read that
    # fails, is over max_blob_bytes or takes over `link_read_timeout` seconds leaves the
    # link as it came, with a line saying why.
    resolve_links: Literal["auto", "on", "off"] = "auto"
    link_read_timeout: float = Field(default=30.0, gt=0)
    # Over stdio, a client's `initialize` and first `tools/list` are answered before the MCP
    # SDK is loaded (the same answers, sooner); anything else waits for the SDK. Off: the
    # SDK answers everything.
    early_answers: bool = True

    @field_validator("modern_sessions")
    @classmethod
    def _modern_sessions(cls, value: str) -> str:
        if value not in ("request", "shared"):
            raise ValueError(
                "MCP_MEDIA_MCP__MODERN_SESSIONS must be 'request' (each 2026-07-28 request "
                "over HTTP gets upstream sessions of its own) or 'shared' (one set for all, "
                f"for upstreams that keep no per-session state), not {value!r}"
            )
        return value

    @property
    def max_upstream_message_bytes(self) -> int:
        return int(self.max_upstream_message_mb * 1024 * 1024)


class WyomingSettings(BaseModel):
    """`mcp-media wyoming`: where it listens and the bounds of every connection (Wyoming has
    no authentication, so a client may be anyone who reaches the port). Its flags win."""

    uri: str = "tcp://127.0.0.1:10300"  # tcp://HOST:PORT, unix://PATH or stdio://
    allow_remote: bool = False  # an address other machines reach; refused without it
    max_connections: int = Field(default=16, ge=1)  # open at once; past it: `unavailable`
    idle_timeout: float = Field(default=60.0, gt=0)  # seconds without an event
    max_audio_seconds: float = Field(default=120.0, gt=0)  # of one transcription
    max_chunk_kb: int = Field(default=1024, ge=1)  # one event's payload (an audio chunk)
    wait: float | None = Field(default=None, gt=0)  # for a job; unset: api.wait
    # A name: the door announced over zeroconf as NAME._wyoming._tcp.local. (tcp:// off
    # loopback only, so with allow_remote); empty: not announced.
    zeroconf: str = ""
