"""`/v1/models` (what the API serves, by OpenAI's names and ours) and `/readyz` (a live worker
serves stt and one serves tts; workers announce themselves only after their probe passed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from workers.doors.api.catalog import catalog, model_ids
from workers.doors.api.context import ApiContext

READY_QUEUES = ("stt", "tts")
# Which engine and model folder made a transcript or a speech file (a result's output says).
ENGINE_HEADER, MODEL_HEADER = "X-MCP-Media-Engine", "X-MCP-Media-Model"


def made_by(output: Mapping[str, Any]) -> dict[str, str]:
    """The response headers naming what made `output` (none for results made before it
    was recorded)."""
    named = {ENGINE_HEADER: output.get("engine"), MODEL_HEADER: output.get("model")}
    return {header: str(value) for header, value in named.items() if value}


def routes(ctx: ApiContext) -> list[BaseRoute]:
    async def models(request: Request) -> JSONResponse:
        data = [
            {"id": ident, "object": "model", "created": 0, "owned_by": "mcp-media"}
            for ident in dict.fromkeys(model_ids(await catalog(ctx)))
        ]
        return JSONResponse({"object": "list", "data": data})

    async def readyz(request: Request) -> JSONResponse:
        try:
            serving = {
                queue: await to_thread.run_sync(ctx.gateway.serving, queue)
                for queue in READY_QUEUES
            }
        except Exception as exc:  # the broker is down: not ready, and say why
            shaped = ctx.fault(exc)
            reason = shaped.message if shaped else str(exc)
            code = shaped.code if shaped else None
            failed = {"status": "unavailable", "reason": reason, "code": code}
            headers = shaped.headers if shaped else None
            return JSONResponse(failed, status_code=503, headers=headers)
        ready = all(serving.values())
        body = {"status": "ready" if ready else "not ready", "workers": serving}
        return JSONResponse(body, status_code=200 if ready else 503)

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
