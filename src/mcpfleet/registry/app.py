"""The registry server's ASGI application: the read API fast path in front of a small FastAPI app.

`/v0.1/servers…` and `/v0/servers…` go straight to `RegistryApi` (pre-serialized pages, no framework
work per request); everything else — health, readiness, version, status, metrics, the OpenAPI document
and the service's lifespan — is FastAPI.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from mcpfleet import __version__
from mcpfleet.registry.api import Receive, RegistryApi, Scope, Send, is_api_path
from mcpfleet.registry.openapi import build_openapi
from mcpfleet.registry.service import RegistryService


class _OrjsonResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def create_fastapi(service: RegistryService, manage_lifespan: bool = True) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if manage_lifespan:
            await service.start()
        try:
            yield
        finally:
            if manage_lifespan:
                await service.stop()

    app = FastAPI(
        title="mcpfleet registry server",
        version=__version__,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    document = orjson.dumps(build_openapi())

    @app.get("/health")
    async def health() -> Response:
        return _OrjsonResponse({"status": "ok"})

    @app.get("/readiness")
    async def readiness() -> Response:
        if service.ready:
            return _OrjsonResponse({"status": "ready"})
        return _OrjsonResponse(
            {"status": "not ready: waiting for the first successful sync"}, status_code=503
        )

    @app.get("/version")
    async def version() -> Response:
        return _OrjsonResponse({"version": __version__, "api": "v0.1"})

    @app.get("/status")
    async def status() -> Response:
        body: dict[str, Any] = {"ready": service.ready, "sources": []}
        if service._syncer is not None:
            body = service.syncer.status()
        body["generation"] = service.catalogue.generation
        body["entries"] = service.catalogue.active_count
        return _OrjsonResponse(body)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(service.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/openapi.json")
    async def openapi() -> Response:
        return Response(document, media_type="application/json")

    @app.exception_handler(404)
    async def not_found(_request: Any, _exc: Any) -> Response:
        return JSONResponse({"error": "Not found"}, status_code=404)

    @app.exception_handler(405)
    async def not_allowed(_request: Any, _exc: Any) -> Response:
        return JSONResponse({"error": "Method not allowed"}, status_code=405)

    return app


class RegistryApp:
    """The ASGI callable uvicorn serves."""

    def __init__(self, service: RegistryService, manage_lifespan: bool = True) -> None:
        self.service = service
        self.fastapi = create_fastapi(service, manage_lifespan)
        self.api = RegistryApi(service.current, service.metrics)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope["path"].encode()
            if is_api_path(raw):
                await self.api(scope, receive, send)
                return
        await self.fastapi(scope, receive, send)  # type: ignore[arg-type]


def create_app(service: RegistryService, manage_lifespan: bool = True) -> RegistryApp:
    return RegistryApp(service, manage_lifespan)
