"""The registry server's ASGI application: the read API fast path in front of a small Starlette app.

`/v0.1/servers…` and `/v0/servers…` go straight to `RegistryApi` (pre-serialized pages, no framework
work per request); everything else — health (also `/v0.1/health`, as the official registry), readiness,
version (`/v0.1/version` in the official registry's shape), status, metrics, the OpenAPI document and
the service's lifespan — is Starlette. Its 404 and 405 are problem documents like the API's.

With a tracer, `RegistryApp` wraps both in a SERVER span per HTTP request, `<METHOD> <route template>`
with `http.route` and `http.response.status_code` (a dozen lines here rather than
opentelemetry-instrumentation-asgi: see docs/observability.md). The probe and scrape endpoints
(`/health`, `/readiness`, `/metrics`) are not traced.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry.trace import SpanKind
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mcpfleet import __version__, telemetry
from mcpfleet.auth.settings import IncomingAuth
from mcpfleet.registry.api import (
    Receive,
    RegistryApi,
    Scope,
    Send,
    is_api_path,
    is_write,
    problem,
    route_template,
)
from mcpfleet.registry.service import RegistryService

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from mcpfleet.auth.asgi import AuthGuard


def absolute_files(auth: IncomingAuth, base_dir: Path) -> IncomingAuth:
    """The OIDC settings with their file paths (CA bundle, token, client secret) made absolute
    against the config file's folder, as every other path of the config is."""
    oidc = auth.oidc
    if oidc is None:
        return auth
    update = {
        key: str(base_dir / value)
        for key in ("jwks_ca_file", "jwks_token_file", "client_secret_file")
        if (value := getattr(oidc, key)) is not None and not Path(value).is_absolute()
    }
    return auth.model_copy(update={"oidc": oidc.model_copy(update=update)})


_UNTRACED = frozenset({"/health", "/readiness", "/metrics"})


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


def create_operational_app(service: RegistryService, manage_lifespan: bool = True) -> Starlette:
    """The operational endpoints and the lifespan, on plain Starlette: a handful of fixed JSON
    answers need no request models, and FastAPI's import alone was a large part of start-up."""

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if manage_lifespan:
            await service.start()
        try:
            yield
        finally:
            if manage_lifespan:
                await service.stop()

    return Starlette(
        routes=_Operational(service).routes(),
        lifespan=lifespan,
        exception_handlers={404: _not_found, 405: _not_allowed},
    )


async def _read_only(send: Send) -> None:
    body = problem(
        405, "This registry is read-only: publishing is not enabled (no publish block in its config)"
    )
    headers = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 405, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RegistryApp:
    """The ASGI callable uvicorn serves."""

    def __init__(
        self, service: RegistryService, manage_lifespan: bool = True, tracer: Tracer | None = None
    ) -> None:
        self.service = service
        self.operational = create_operational_app(service, manage_lifespan)
        self.api = RegistryApi(service.current, service.metrics)
        self.tracer = tracer
        config = service.config
        self.prefixes = tuple(f"/registry/{alias}/".encode() for alias in config.aliases)
        self.guard: AuthGuard | None = None
        if config.auth is not None and config.auth.type == "oidc":
            # Reader authentication (ToolHive's `auth.mode: oauth`): every path but the public ones.
            from mcpfleet.auth.asgi import AuthGuard

            auth = absolute_files(config.auth.resolved(service.base_dir), service.base_dir)
            self.guard = AuthGuard(self._http, auth, open_paths=config.publicPaths, mcp_path="/v0.1/servers")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.guard is not None:
            await self.guard(scope, receive, send)
            return
        await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope["path"].encode()
            for prefix in self.prefixes:
                if raw.startswith(prefix):
                    # ToolHive's server names its registry in the path: /registry/<name>/v0.1/...
                    rest = raw[len(prefix) - 1 :]
                    scope = {**scope, "raw_path": rest, "path": scope["path"][len(prefix) - 1 :]}
                    break
            if self.tracer is not None and scope["path"] not in _UNTRACED:
                await self._traced(self.tracer, scope, receive, send)
                return
            await self._route(scope, receive, send)
            return
        await self.operational(scope, receive, send)  # type: ignore[arg-type]

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") or scope["path"].encode()
        if is_write(scope) and (self.service.publisher is not None or raw.endswith(b"/publish")):
            publisher = self.service.publisher
            if publisher is None:
                await _read_only(send)
            else:
                await publisher(scope, receive, send)
        elif is_api_path(raw):
            await self.api(scope, receive, send)
        else:
            await self.operational(scope, receive, send)  # type: ignore[arg-type]

    async def _traced(self, tracer: Tracer, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") or scope["path"].encode()
        api = is_api_path(raw)
        route = route_template(raw) if api else None
        method = scope["method"]
        status = 500  # when the handler fails before it answers

        async def capture(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        attrs = {
            "http.request.method": method,
            "url.path": scope["path"],
            "url.scheme": scope.get("scheme", "http"),
        }
        name = f"{method} {route}" if route else method
        parent = telemetry.extract(headers)
        with telemetry.current_span(tracer, name, SpanKind.SERVER, attrs, parent) as span:
            try:
                await self._route(scope, receive, capture)
            except BaseException as exc:
                telemetry.record_error(span, type(exc).__qualname__)
                raise
            if route is None:
                # Starlette leaves the matched route in the scope; unmatched paths keep the bare name.
                path = getattr(scope.get("route"), "path", None)
                if isinstance(path, str):
                    route = path
                    span.update_name(f"{method} {path}")
            if route is not None:
                span.set_attribute("http.route", route)
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                telemetry.record_error(span, str(status))


def create_app(
    service: RegistryService, manage_lifespan: bool = True, tracer: Tracer | None = None
) -> RegistryApp:
    """The registry's ASGI app; `tracer` (see `mcpfleet.telemetry`) adds a span per request."""
    return RegistryApp(service, manage_lifespan, tracer)
