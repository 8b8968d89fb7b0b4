"""Errors in the OpenAI shape: `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    431: "invalid_request_error",
    503: "service_unavailable",
    504: "timeout",
    507: "server_error",
}


class ApiError(Exception):
    """Raised anywhere under a route; the app answers it in the OpenAI shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        body = {
            "error": {
                "message": self.message,
                "type": _TYPES.get(self.status, "api_error"),
                "param": self.param,
                "code": self.code,
            }
        }
        return JSONResponse(body, status_code=self.status, headers=self.headers)


async def refuse_upgrade(websocket: WebSocket, error: ApiError) -> None:
    """A WebSocket upgrade refused: an HTTP answer in the door's shape where the server can
    send one, else a close before the accept (the client's handshake fails with 403)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(error.response())
    else:
        await websocket.close(code=1008, reason=error.message[:120])
