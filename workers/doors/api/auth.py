"""The bearer key of /v1/* and /metrics. Probes (/healthz, /readyz) stay open; the jobs page
has its own login (a cookie set from the same key)."""

from __future__ import annotations

import hmac

from starlette.requests import Request

from workers.doors.api.errors import ApiError

PROTECTED_PREFIXES = ("/v1/", "/metrics")
# What a client lists before it has a key (Open WebUI's voice and model pickers).
CATALOG_PATHS = frozenset({"/v1/audio/voices", "/v1/audio/models"})


def needs_key(path: str) -> bool:
    return path.startswith(PROTECTED_PREFIXES) or path == "/v1"


def check_bearer(request: Request, key: str) -> None:
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    if scheme.lower() != "bearer" or not value:
        raise ApiError(
            401,
            "missing API key: send Authorization: Bearer <key>",
            code="missing_api_key",
            headers={"WWW-Authenticate": 'Bearer realm="mcp-media"'},
        )
    if not hmac.compare_digest(value.strip().encode(), key.encode()):
        raise ApiError(
            401,
            "wrong API key",
            code="invalid_api_key",
            headers={"WWW-Authenticate": 'Bearer realm="mcp-media"'},
        )
