"""Vision through any OpenAI-compatible chat-completions endpoint, with a hard deadline.

The client's own timeout is per network operation, so a server that drips one byte a
second, or streams 50 MB, would hold a call far beyond it. Here the whole call (retries
included) runs on a helper thread that the caller stops waiting for at the deadline, and
the transport aborts a response body that passes the deadline or the byte cap.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import TypeVar

import httpx2
import openai
from openai.types.chat import ChatCompletionMessageParam

from pipelines.errors import ConfigError, Stopped
from pipelines.imaging import PreparedImage
from pipelines.vision import (
    DegradedReason,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
    StopAsked,
    VisionConfig,
)

OPENAI_BASE_URL = "https://api.openai.com/v1"
MAX_RESPONSE_BYTES = 1024 * 1024  # a 4,000-character summary arrives in a few kB
_NO_KEY = "unused"  # local endpoints need none; never let the client read OPENAI_API_KEY
_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_MIN_ATTEMPT_S = 0.5  # not worth starting an attempt with less time than this left
_BACKOFF_S = 0.5
STOP_POLL_S = 0.2  # how often a wait for the provider asks whether the job should stop

T = TypeVar("T")
_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("vision_deadline")


class _ResponseTooLarge(ProviderRejected):
    def __init__(self, limit: int) -> None:
        super().__init__(
            DegradedReason.RESPONSE_TOO_LARGE, f"provider response exceeds {limit} bytes"
        )


class _DeadlinePassed(ProviderUnavailable):
    def __init__(self) -> None:
        super().__init__(DegradedReason.TIMEOUT, "provider response still arriving at deadline")


class _BoundedStream(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, limit: int, deadline: float) -> None:
        self._inner = inner
        self._limit = limit
        self._deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                raise _ResponseTooLarge(self._limit)
            if time.monotonic() > self._deadline:
                raise _DeadlinePassed
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _BoundedTransport(httpx2.BaseTransport):
    """Caps response bodies by size and by the calling thread's deadline."""

    def __init__(self, inner: httpx2.BaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = self._inner.handle_request(request)
        declared = response.headers.get("content-length", "")
        encoding = response.headers.get("content-encoding", "identity").lower()
        if declared.isdigit() and int(declared) > self._limit:
            response.close()
            raise _ResponseTooLarge(self._limit)
        if encoding != "identity":
            # We asked for identity: a compressed body would escape the byte cap on decode.
            response.close()
            raise ProviderRejected(
                DegradedReason.INVALID_RESPONSE, f"unrequested content-encoding {encoding!r}"
            )
        assert isinstance(response.stream, httpx2.SyncByteStream)
        deadline = _deadline.get(time.monotonic() + 3600.0)
        response.stream = _BoundedStream(response.stream, self._limit, deadline)
        return response

    def close(self) -> None:
        self._inner.close()


class OpenAIVisionProvider:
    """A `VisionProvider`. Thread-safe; one instance per worker process. Call `close()`."""

    def __init__(self, config: VisionConfig, *, max_response_bytes: int = MAX_RESPONSE_BYTES):
        if not config.model.strip():
            raise ConfigError(
                "vision model is empty: set the vision model or AUXILIARY_VISION_MODEL"
            )
        self._config = config
        # trust_env=False: no proxy or certificate settings read from the environment here.
        transport = _BoundedTransport(httpx2.HTTPTransport(trust_env=False), max_response_bytes)
        self._http = httpx2.Client(
            transport=transport,
            headers={"Accept-Encoding": "identity"},
            follow_redirects=False,
            trust_env=False,
        )
        self._client = openai.OpenAI(
            base_url=config.base_url or OPENAI_BASE_URL,
            api_key=config.api_key or _NO_KEY,
            timeout=config.timeout,
            max_retries=0,  # our loop retries, inside the deadline
            http_client=self._http,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIVisionProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe(self, image: PreparedImage, should_stop: StopAsked | None = None) -> str:
        deadline = time.monotonic() + self._config.timeout
        call = partial(self._attempts, image, deadline)
        return _run_until(deadline, call, self._config.timeout, should_stop)

    def _attempts(self, image: PreparedImage, deadline: float) -> str:
        _deadline.set(deadline)
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                return self._once(image, remaining)
            except ProviderError as exc:
                attempt += 1
                retry = exc.transient and exc.reason is not DegradedReason.TIMEOUT
                room = deadline - time.monotonic() - _BACKOFF_S
                if not retry or attempt > self._config.max_retries or room < _MIN_ATTEMPT_S:
                    raise
                time.sleep(_BACKOFF_S)

    def _once(self, image: PreparedImage, remaining: float) -> str:
        messages: list[ChatCompletionMessageParam] = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": self._config.prompt},
                    {"type": "image_url", "image_url": {"url": image.data_url()}},
                ],
            }
        ]
        try:
            raw = self._client.chat.completions.with_raw_response.create(
                model=self._config.model,
                messages=messages,
                timeout=httpx2.Timeout(max(remaining, 0.01)),
            )
            body = raw.http_response.content
        except ProviderError:
            raise
        except openai.APITimeoutError as exc:
            raise ProviderUnavailable(DegradedReason.TIMEOUT, "provider did not answer") from exc
        except openai.APIStatusError as exc:
            raise _status_error(exc) from exc
        except openai.APIConnectionError as exc:
            raise _connection_error(exc) from exc
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            message = f"{type(exc).__name__}: {exc}"[:300]
            raise ProviderUnavailable(DegradedReason.PROVIDER_ERROR, message) from exc
        return parse_completion(body)


def parse_completion(body: bytes) -> str:
    """The first choice's text; checked by hand because compatible servers vary."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ProviderUnavailable(
            DegradedReason.INVALID_RESPONSE, f"provider response is not JSON ({len(body)} bytes)"
        ) from exc
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list):
        raise ProviderUnavailable(DegradedReason.INVALID_RESPONSE, "response has no choices list")
    if not choices:
        raise ProviderRejected(DegradedReason.EMPTY_RESPONSE, "provider returned no choices")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        raise ProviderUnavailable(DegradedReason.INVALID_RESPONSE, "first choice has no message")
    content = message.get("content")
    if isinstance(content, list):  # some servers send content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is not None and not isinstance(content, str):
        raise ProviderUnavailable(DegradedReason.INVALID_RESPONSE, "message content is not text")
    if not content or not content.strip():
        refusal = message.get("refusal")
        detail = f"provider refused: {refusal}"[:300] if refusal else "provider returned no text"
        raise ProviderRejected(DegradedReason.EMPTY_RESPONSE, detail)
    return content


def _status_error(exc: openai.APIStatusError) -> ProviderError:
    status = exc.status_code
    detail = exc.body.get("message") if isinstance(exc.body, dict) else None
    message = f"provider answered HTTP {status}" + (f": {detail}"[:200] if detail else "")
    if status in _RETRY_STATUSES:
        return ProviderUnavailable(DegradedReason.HTTP_ERROR, message)
    return ProviderRejected(DegradedReason.HTTP_ERROR, message)


def _connection_error(exc: BaseException) -> ProviderError:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return ProviderUnavailable(
                DegradedReason.CONNECTION_REFUSED, "provider refused the connection"
            )
        if isinstance(cause, httpx2.TimeoutException):
            return ProviderUnavailable(DegradedReason.TIMEOUT, "provider did not answer")
        cause = cause.__cause__ or cause.__context__
    root = exc.__cause__ or exc
    message = f"cannot reach provider: {type(root).__name__}: {root}"[:300]
    return ProviderUnavailable(DegradedReason.CONNECTION_ERROR, message)


def _run_until(
    deadline: float, call: Callable[[], T], timeout: float, should_stop: StopAsked | None = None
) -> T:
    """Run `call` on a daemon thread; give up waiting at `deadline`, or as soon as
    `should_stop()` says so (asked every STOP_POLL_S; raises `Stopped`).

    An abandoned thread ends on its own soon after: every network operation it makes is
    bounded by the remaining time, and the transport aborts bodies past the deadline.
    """
    box: list[T] = []
    error: list[BaseException] = []
    finished = threading.Event()

    def target() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # handed to the waiting thread
            error.append(exc)
        finally:
            finished.set()

    worker = threading.Thread(target=target, name="vision-call", daemon=True)
    worker.start()
    while not finished.wait(min(max(deadline - time.monotonic(), 0.0), STOP_POLL_S)):
        if time.monotonic() >= deadline:
            raise ProviderUnavailable(DegradedReason.TIMEOUT, f"no answer within {timeout:g} s")
        if should_stop is not None and should_stop():
            raise Stopped("stopped while waiting for the provider's answer")
    if error:
        raise error[0]
    return box[0]
