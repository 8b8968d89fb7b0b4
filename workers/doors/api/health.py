"""`/healthz`: the process is up and answers. (`/readyz` asks the workers.)"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from workers.doors.api.context import ApiContext


def routes(ctx: ApiContext) -> list[BaseRoute]:
    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return [Route("/healthz", healthz, methods=["GET"])]
