"""A local stand-in for an OpenAI-compatible chat-completions endpoint.

Speaks enough of POST /v1/chat/completions for the real `openai` client, records what it
received, and can be switched at run time into the failure modes a vision provider shows
in the wild. Usable in-process (`with FakeOpenAI() as fake:`) or as a process:

    python -m tests.support.fake_openai --port 0 --mode ok --latency 2

prints its base URL (``http://127.0.0.1:PORT/v1``) on stdout; POST /_control with a JSON
body ({"mode": "slow", "delay": 30, ...}) changes the behaviour, GET /_stats returns the
counters, POST /_reset clears them. Every wait is bounded and wakes up on stop().
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import json
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, Self

from PIL import Image

HUGE_BODY_BYTES = 50 * 1024 * 1024
MAX_WAIT_S = 600.0  # no mode sleeps longer than this, whatever it is told
MAX_RECORDS = 1000  # received requests kept (the counters keep counting)
_CHUNK = 64 * 1024


class Mode(StrEnum):
    OK = "ok"
    SLOW = "slow"  # sleep `delay` seconds, then answer like OK; a large delay is a hang
    ERROR = "error"  # HTTP `status` with an OpenAI-style error body
    INVALID_JSON = "invalid_json"
    EMPTY = "empty"  # a well-formed completion whose content is empty
    NO_CHOICES = "no_choices"
    DRIP = "drip"  # a valid body sent one byte every `drip_interval` seconds
    HUGE = "huge"  # a valid completion whose content makes the body 50 MB
    CLOSE = "close"  # drop the connection without answering


@dataclass(frozen=True, slots=True)
class Behaviour:
    mode: Mode = Mode.OK
    reply: str = "A test image."
    latency: float = 0.0  # added before every answer, in every mode
    delay: float = 30.0
    status: int = 500
    drip_interval: float = 0.2
    chunked: bool = False  # drip/huge: no Content-Length, Transfer-Encoding: chunked
    # When set, `mode` applies only to images of this width; others are answered OK, so a
    # test can run a misbehaving request beside healthy ones.
    only_width: int | None = None


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    model: str | None
    prompt: str | None
    image_mime: str | None
    image_width: int | None
    image_height: int | None
    image_bytes: int
    headers: dict[str, str]  # names lower-cased


@dataclass(slots=True)
class _State:
    behaviour: Behaviour = field(default_factory=Behaviour)
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    received: list[ReceivedRequest] = field(default_factory=list)


class FakeOpenAI:
    """The server plus its thread; thread-safe to reconfigure while requests are running."""

    def __init__(self, behaviour: Behaviour | None = None, *, port: int = 0) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._state = _State(behaviour=behaviour or Behaviour())
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", port), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._started = False

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def stop(self, grace: float = 5.0) -> None:
        """Stop serving, wake every sleeping handler and wait (bounded) for them to finish."""
        self.stopping.set()
        if self._started:
            self._httpd.shutdown()
            self._thread.join(grace)
        with self._idle:
            self._idle.wait_for(lambda: self._state.in_flight == 0, timeout=grace)
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def set(self, **changes: Any) -> Behaviour:
        """Change the behaviour for the next requests, e.g. ``set(mode=Mode.SLOW, delay=5)``."""
        if "mode" in changes:
            changes["mode"] = Mode(changes["mode"])
        with self._lock:
            self._state.behaviour = replace(self._state.behaviour, **changes)
            return self._state.behaviour

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._state.requests

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._state.max_in_flight

    @property
    def received(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self._state.received)

    def reset(self) -> None:
        with self._lock:
            self._state = _State(behaviour=self._state.behaviour, in_flight=self._state.in_flight)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            s = self._state
            return {
                "requests": s.requests,
                "in_flight": s.in_flight,
                "max_in_flight": s.max_in_flight,
                "behaviour": asdict(s.behaviour),
                "received": [asdict(r) for r in s.received],
            }

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds` (capped); False when the server is stopping."""
        return not self.stopping.wait(min(max(seconds, 0.0), MAX_WAIT_S))

    def _enter(self, record: ReceivedRequest) -> Behaviour:
        with self._lock:
            s = self._state
            s.requests += 1
            s.in_flight += 1
            s.max_in_flight = max(s.max_in_flight, s.in_flight)
            s.received.append(record)
            del s.received[:-MAX_RECORDS]
            return s.behaviour

    def _leave(self) -> None:
        with self._idle:
            self._state.in_flight -= 1
            self._idle.notify_all()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[_Handler], fake: FakeOpenAI) -> None:
        self.fake = fake
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up on purpose in these tests (timeouts, size caps): not news.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/_stats":
            self._send_json(200, self.server.fake.stats())
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        body = self._read_body()
        fake = self.server.fake
        if self.path == "/_control":
            try:
                behaviour = fake.set(**json.loads(body or b"{}"))
            except (ValueError, TypeError) as exc:
                self._send_json(400, {"error": {"message": str(exc)}})
                return
            self._send_json(200, asdict(behaviour))
        elif self.path == "/_reset":
            fake.reset()
            self._send_json(200, {"ok": True})
        elif self.path.rstrip("/").endswith("/chat/completions"):
            headers = {name.lower(): value for name, value in self.headers.items()}
            record = _parse_request(body, headers)
            behaviour = fake._enter(record)
            if behaviour.only_width is not None and record.image_width != behaviour.only_width:
                behaviour = replace(behaviour, mode=Mode.OK)
            self._in_flight = True
            try:
                self._answer(behaviour)
            except OSError:
                self.close_connection = True  # the client gave up: timeouts, size caps
            finally:
                if fake.stopping.is_set():
                    self.close_connection = True  # the answer may be cut short
                self._leave_once()
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def _leave_once(self) -> None:
        if getattr(self, "_in_flight", False):
            self._in_flight = False
            self.server.fake._leave()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _answer(self, b: Behaviour) -> None:
        fake = self.server.fake
        if b.latency and not fake.wait(b.latency):
            return
        match b.mode:
            case Mode.OK:
                self._send_json(200, completion(b.reply))
            case Mode.SLOW:
                if fake.wait(b.delay):
                    self._send_json(200, completion(b.reply))
            case Mode.ERROR:
                message = {"error": {"message": "fake failure", "type": "server_error"}}
                self._send_json(b.status, message)
            case Mode.INVALID_JSON:
                self._send_bytes(200, b'{"id": "chatcmpl-fake", "choices": [', "application/json")
            case Mode.EMPTY:
                self._send_json(200, completion(""))
            case Mode.NO_CHOICES:
                self._send_json(200, {**completion(""), "choices": []})
            case Mode.DRIP:
                self._drip(json.dumps(completion(b.reply)).encode(), b)
            case Mode.HUGE:
                self._huge(b)
            case Mode.CLOSE:
                self.close_connection = True
                self.connection.close()

    def _send_json(self, status: int, payload: object) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json")

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self._start_body(len(data), False, status, content_type)
        self._write(data, False)
        self._end_body(False)

    def _start_body(
        self, length: int, chunked: bool, status: int = 200, content_type: str = "application/json"
    ) -> None:
        # A request stops counting as in flight once its answer starts: the client may
        # read the whole answer and send its next request before this handler returns.
        self._leave_once()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.flush()

    def _write(self, data: bytes, chunked: bool) -> None:
        if chunked:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            self.wfile.write(data)

    def _end_body(self, chunked: bool) -> None:
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drip(self, data: bytes, b: Behaviour) -> None:
        self._start_body(len(data), b.chunked)
        for i in range(len(data)):
            self._write(data[i : i + 1], b.chunked)
            self.wfile.flush()
            if not self.server.fake.wait(b.drip_interval):
                return
        self._end_body(b.chunked)

    def _huge(self, b: Behaviour) -> None:
        head, tail = json.dumps(completion("\x00")).encode().split(b"\\u0000")
        self._start_body(HUGE_BODY_BYTES, b.chunked)
        self._write(head, b.chunked)
        for chunk in _filler(HUGE_BODY_BYTES - len(head) - len(tail)):
            if self.server.fake.stopping.is_set():
                return
            self._write(chunk, b.chunked)
        self._write(tail, b.chunked)
        self._end_body(b.chunked)


def _filler(total: int) -> Iterator[bytes]:
    block = b"a" * _CHUNK
    for start in range(0, total, _CHUNK):
        yield block[: min(_CHUNK, total - start)]


def completion(text: str, model: str = "fake-vision") -> dict[str, Any]:
    """A minimal chat.completion object as the OpenAI API returns it."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _parse_request(body: bytes, headers: dict[str, str]) -> ReceivedRequest:
    model = prompt = mime = None
    width = height = None
    size = 0
    try:
        payload = json.loads(body)
        model = payload.get("model")
        for message in payload.get("messages", []):
            content = message.get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
            for part in parts:
                if part.get("type") == "text":
                    prompt = part.get("text")
                elif part.get("type") == "image_url":
                    mime, data = _decode_data_url(part["image_url"]["url"])
                    size = len(data)
                    with Image.open(io.BytesIO(data)) as image:
                        width, height = image.size
    except (ValueError, KeyError, TypeError, AttributeError, OSError, binascii.Error):
        pass  # recorded as far as it could be read; the counters still move
    return ReceivedRequest(model, prompt, mime, width, height, size, headers)


def _decode_data_url(url: str) -> tuple[str, bytes]:
    header, _, encoded = url.partition(",")
    if not header.startswith("data:") or not header.endswith(";base64"):
        raise ValueError("not a base64 data URL")
    return header[5:-7], base64.b64decode(encoded, validate=True)


class FakeOpenAIControl:
    """Drive a fake running in another process through its control endpoints."""

    def __init__(self, base_url: str, timeout: float = 5.0) -> None:
        self._root = base_url.removesuffix("/").removesuffix("/v1")
        self._timeout = timeout

    def set(self, **changes: Any) -> dict[str, Any]:
        return self._call("POST", "/_control", changes)

    def reset(self) -> dict[str, Any]:
        return self._call("POST", "/_reset", {})

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/_stats", None)

    def _call(self, method: str, path: str, payload: object) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(self._root + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=self._timeout) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.OK.value)
    defaults = Behaviour()
    parser.add_argument("--reply", default=defaults.reply)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--delay", type=float, default=defaults.delay)
    parser.add_argument("--status", type=int, default=defaults.status)
    parser.add_argument("--chunked", action="store_true")
    parser.add_argument("--lifetime", type=float, default=3600.0, help="exit after this many s")
    args = parser.parse_args(argv)
    behaviour = Behaviour(
        mode=Mode(args.mode),
        reply=args.reply,
        latency=args.latency,
        delay=args.delay,
        status=args.status,
        chunked=args.chunked,
    )
    fake = FakeOpenAI(behaviour, port=args.port).start()
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(fake.base_url, flush=True)
    done.wait(args.lifetime)
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
