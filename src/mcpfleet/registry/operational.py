"""The registry server's operational endpoints, on Starlette: health (also `/v0.1/health`, as the
official registry), readiness, version (`/v0.1/version` in the official registry's shape), sync
status, metrics and the OpenAPI document; unknown paths and methods answer problem documents like
the API's.

`RegistryApp` (app.py) loads this module on the first request that is not an API request: serving
the API from a start needs no Starlette (its import was a tenth of a start on an existing database,
issue 17).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mcpfleet import __version__
from mcpfleet.registry.api import problem
from mcpfleet.registry.service import RegistryService


class _OrjsonResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class _Operational:
    """Health, readiness, version, sync status, metrics and the OpenAPI document of one service."""

    def __init__(self, service: RegistryService) -> None:
        self.service = service
        self.document: bytes | None = None  # built on first request: not needed to start serving

    async def health(self, _request: Request) -> Response:
        return _OrjsonResponse({"status": "ok"})

    async def readiness(self, _request: Request) -> Response:
        # Ready = every source has good data to serve. A source whose latest sync failed keeps serving
        # its last good data (the replica stays in the Service) and is listed under failingSources.
        service = self.service
        failing = service.syncer.failing() if service._syncer is not None else []
        extra = {"failingSources": failing} if failing else {}
        if service.ready:
            return _OrjsonResponse({"status": "ready", **extra})
        return _OrjsonResponse(
            {"status": "not ready: waiting for the first successful sync", **extra}, status_code=503
        )

    async def version(self, _request: Request) -> Response:
        return _OrjsonResponse({"version": __version__, "api": "v0.1"})

    async def api_version(self, _request: Request) -> Response:
        # The official registry's version body (build details a Python package does not have are
        # "unknown").
        return _OrjsonResponse({"version": __version__, "git_commit": "unknown", "build_time": "unknown"})

    async def status(self, _request: Request) -> Response:
        service = self.service
        body: dict[str, Any] = {"ready": service.ready, "sources": []}
        if service._syncer is not None:
            body = service.syncer.status()
        body["generation"] = service.catalogue.generation
        body["entries"] = service.catalogue.active_count
        return _OrjsonResponse(body)

    async def metrics(self, _request: Request) -> Response:
        return Response(self.service.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def openapi(self, _request: Request) -> Response:
        if self.document is None:
            from mcpfleet.registry.openapi import build_openapi

            self.document = orjson.dumps(build_openapi())
        return Response(self.document, media_type="application/json")

    def routes(self) -> list[Route]:
        get = ["GET"]
        return [
            Route("/health", self.health, methods=get),
            Route("/v0.1/health", self.health, methods=get),
            Route("/v0/health", self.health, methods=get),
            Route("/readiness", self.readiness, methods=get),
            Route("/version", self.version, methods=get),
            Route("/v0.1/version", self.api_version, methods=get),
            Route("/v0/version", self.api_version, methods=get),
            Route("/status", self.status, methods=get),
            Route("/metrics", self.metrics, methods=get),
            Route("/openapi.json", self.openapi, methods=get),
        ]


async def _not_found(_request: Request, _exc: Exception) -> Response:
    return Response(problem(404, "Not found"), 404, media_type="application/problem+json")


async def _not_allowed(_request: Request, _exc: Exception) -> Response:
    return Response(problem(405, "Method not allowed"), 405, media_type="application/problem+json")


def create_operational_app(service: RegistryService) -> Starlette:
    """The operational endpoints on plain Starlette: a handful of fixed JSON answers need no request
    models, and FastAPI's import alone was a large part of start-up."""
    return Starlette(
        routes=_Operational(service).routes(),
        exception_handlers={404: _not_found, 405: _not_allowed},
    )
