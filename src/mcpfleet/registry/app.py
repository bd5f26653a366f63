"""The registry server's ASGI application: the read API fast path in front of a small Starlette app.

`/v0.1/servers…` and `/v0/servers…` go straight to `RegistryApi` (pre-serialized pages, no framework
work per request); writes to the publisher; everything else — health, readiness, version, status,
metrics, the OpenAPI document, problem documents for unknown paths — is the Starlette app of
`operational.py`, loaded in the background once the API serves (or by the first such request). The
ASGI lifespan (starting and stopping the service) is answered here, so that a start serves the API
without loading Starlette first.

With a tracer, `RegistryApp` wraps both in a SERVER span per HTTP request, `<METHOD> <route template>`
with `http.route` and `http.response.status_code` (a dozen lines here rather than
opentelemetry-instrumentation-asgi: see docs/observability.md). The probe and scrape endpoints
(`/health`, `/readiness`, `/metrics`) are not traced.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanKind

from mcpfleet import telemetry
from mcpfleet.auth.settings import IncomingAuthSettings
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
from mcpfleet.registry.cors import CorsPolicy, answer_preflight, is_preflight
from mcpfleet.registry.service import RegistryService

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from starlette.applications import Starlette

    from mcpfleet.auth.asgi import AuthGuard


def absolute_files(auth: IncomingAuthSettings, base_dir: Path) -> IncomingAuthSettings:
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


_OPERATIONAL = "mcpfleet.registry.operational"
"""The operational endpoints' module (`operational.py`): the service loads it in the background
after a start from the stored catalogue (`RegistryService.preload`), else its first request does."""
_UNTRACED = frozenset({"/health", "/readiness", "/metrics"})
_VALIDATE_PATHS = (b"/v0.1/validate", b"/v0/validate")
"""The publish dry run (`publishcheck.VALIDATE_PATHS`, repeated so the start path stays light)."""
_VALIDATE_BODY_BYTES = 1024 * 1024
"""Largest body the dry run reads on a registry without a publish block (publish.maxBodyBytes' default)."""


async def _problem(send: Send, status: int, detail: str) -> None:
    body = problem(status, detail)
    headers = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RegistryApp:
    """The ASGI callable uvicorn serves."""

    def __init__(
        self, service: RegistryService, manage_lifespan: bool = True, tracer: Tracer | None = None
    ) -> None:
        self.service = service
        self.manage_lifespan = manage_lifespan
        """Whether the ASGI lifespan starts and stops `service` (False: its host does)."""
        self._operational: Starlette | None = None
        service.preload.append(_OPERATIONAL)
        self.api = RegistryApi(service.current, service.metrics)
        self.tracer = tracer
        config = service.config
        self.prefixes = tuple(f"/registry/{alias}/".encode() for alias in config.aliases)
        cors = config.cors
        self.cors = (
            CorsPolicy(
                cors.allowedOrigins,
                cors.allowedMethods,
                cors.allowedHeaders,
                cors.exposedHeaders,
                cors.maxAge,
            )
            if cors.allowedOrigins
            else None
        )
        self.guard: AuthGuard | None = None
        if config.auth is not None and config.auth.type == "oidc":
            # Reader authentication (ToolHive's `auth.mode: oauth`): every path but the public ones.
            from mcpfleet.auth.asgi import AuthGuard

            auth = absolute_files(config.auth.resolved(service.base_dir), service.base_dir)
            self.guard = AuthGuard(self._http, auth, open_paths=config.publicPaths, mcp_path="/v0.1/servers")

    @property
    def operational(self) -> Starlette:
        """The operational endpoints (`operational.py`), loaded on first use."""
        if self._operational is None:
            from mcpfleet.registry.operational import create_operational_app

            self._operational = create_operational_app(self.service)
        return self._operational

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "http" and self.cors is not None:
            # Before the token check: browsers send preflights without credentials.
            if is_preflight(scope):
                await answer_preflight(self.cors, scope, send)
                return
            send = self.cors.wrap(scope["headers"], send)
        if scope["type"] == "http" and self.guard is not None and not self._publisher_authenticates(scope):
            await self.guard(scope, receive, send)
            return
        await self._http(scope, receive, send)

    def _publisher_authenticates(self, scope: Scope) -> bool:
        """Writes of a publishing registry (publish, status, delete, edit, the `/auth/*` logins)
        skip the readers' token check: the publisher authenticates each one itself, with its own
        issuer or a registry token of ours, which a reader's issuer would refuse (a registry token is
        signed by this registry, and a login has no token yet). Aliased paths are not writes."""
        if self.service.config.publish is None or not is_write(scope):
            return False
        raw: bytes = scope.get("raw_path") or scope["path"].encode()
        return raw.split(b"?", 1)[0] not in _VALIDATE_PATHS

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """The ASGI lifespan protocol: start the service at start-up and stop it at shutdown (when
        this app manages it), answering a failure with its traceback, as Starlette's router does."""
        while True:
            message = await receive()
            phase = message["type"].removeprefix("lifespan.")
            step = {"startup": self.service.start, "shutdown": self.service.stop}.get(phase)
            if step is None:
                continue
            try:
                if self.manage_lifespan:
                    await step()
            except BaseException:
                await send({"type": f"lifespan.{phase}.failed", "message": traceback.format_exc()})
                raise
            await send({"type": f"lifespan.{phase}.complete"})
            if phase == "shutdown":
                return

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
        publishing = self.service.config.publish is not None
        if raw.split(b"?", 1)[0] in _VALIDATE_PATHS:
            await self._validate(scope, receive, send)
        elif is_write(scope) and (publishing or raw.endswith(b"/publish")):
            publisher = await self.service.publishing()
            if publisher is not None:
                await publisher(scope, receive, send)
            elif publishing:  # the store did not open (the process is stopping)
                await _problem(send, 503, "The registry's store is not open: publishing is unavailable")
            else:
                detail = (
                    "This registry is read-only: publishing is not enabled (no publish block in its config)"
                )
                await _problem(send, 405, detail)
        elif is_api_path(raw):
            await self.api(scope, receive, send)
        else:
            await self.operational(scope, receive, send)  # type: ignore[arg-type]

    async def _validate(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The publish dry run (`publishcheck.validate`), served with or without publishing."""
        from mcpfleet.registry.publishcheck import send_answer, validate

        config = self.service.config
        limit = config.publish.maxBodyBytes if config.publish is not None else _VALIDATE_BODY_BYTES
        await send_answer(send, validate(scope, receive, limit))

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


def _refusal(status: int, message: str) -> tuple[bytes, bytes]:
    return b"application/problem+json", problem(status, message)


def served(app: RegistryApp) -> tuple[Any, dict[str, Any]]:
    """The ASGI callable and the uvicorn options that serve `app` within the config's connection
    and body limits (`server.*`, the proxy's and gateway's `HttpLimits`): header deadline and size
    (408 / 431, the connection closed), body size and deadline (413 / 408 problem documents),
    keep-alive. Loaded when serving starts (uvicorn loads the same protocol module anyway)."""
    from mcpfleet.httplimits import BodyLimits, uvicorn_options
    from mcpfleet.registry.config import http_limits

    config = app.service.config
    limits = http_limits(config)
    body_key = "server.maxBodyBytes"
    if config.publish is not None and config.publish.maxBodyBytes > config.server.maxBodyBytes:
        body_key = "publish.maxBodyBytes"
    names = {
        "max_body_bytes": body_key,
        "body_timeout": "server.bodyTimeout",
        "header_timeout": "server.headerTimeout",
        "max_header_bytes": "server.maxHeaderBytes",
        "keep_alive_timeout": "server.keepAliveTimeout",
    }
    return BodyLimits(app, limits, _refusal, names), uvicorn_options(limits)
