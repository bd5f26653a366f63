"""Remote mode: forward `/mcp` to a remote streamable-HTTP MCP server (MCPRemoteProxy).

A byte-level reverse proxy on aiohttp: method, body and headers go through (minus hop-by-hop
headers and `Host`), response bodies are streamed back chunk by chunk so SSE works, and
configured headers are added to every upstream request (replacing a client's header of the same
name, whatever its case, and whatever its spelling with `_` for `-`: a remote behind CGI-style
normalisation, `X_Api_Key` and `X-Api-Key` both `HTTP_X_API_KEY`, could otherwise read the client's
value; hop-by-hop names are dropped under the same rule). Header values come from environment variables (`--header-from-env
Authorization=TOKEN_ENV`, `--bearer-token-from-env`), which is how Kubernetes Secrets reach the pod;
values are never logged.

DNS-rebinding protection is the stdio mode's (`security`, from `security_for`): with a loopback bind
or `--allowed-host`, a request whose Host or Origin is not allowed gets 421 / 403 and is not
relayed - otherwise a web page could make a browser on this machine call the remote server with the
secret headers added. The remote URL may carry credentials (`user:pw@`, `?api_key=`): `/health`,
logs and errors show it through `mcpfleet.redact`.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
import orjson
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from mcpfleet.redact import redact_text, redact_url

log = logging.getLogger(__name__)

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def headers_from_env(mapping: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`{"Authorization": "TOKEN_ENV"}` -> `{"Authorization": $TOKEN_ENV}`; a missing variable is an error."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for header, variable in mapping.items():
        if variable not in env:
            raise ValueError(
                f"--header-from-env {header}={variable}: environment variable {variable} is not set"
            )
        out[header] = env[variable]
    return out


def bearer_from_env(variable: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`Authorization: Bearer $VARIABLE` (an MCPExternalAuthConfig of type bearerToken)."""
    env = os.environ if environ is None else environ
    token = env.get(variable, "").strip()  # a Secret written with a trailing newline still works
    if not token:
        raise ValueError(
            f"--bearer-token-from-env {variable}: environment variable {variable} is not set or empty"
        )
    return {"Authorization": f"Bearer {token}"}


@dataclass
class RemoteProxyApp:
    """ASGI app relaying `/mcp` to `remote_url`.

    With `all_paths`, every path but `/health` goes to the same path on `remote_url`'s origin: the
    front of an HTTP MCP server in the same pod (`/mcp`, or `/sse` plus the `/messages/` URLs its
    endpoint event names), which is how incoming auth is put in front of a server that has none.
    """

    remote_url: str
    extra_headers: dict[str, str] = field(default_factory=dict)
    connect_timeout: float = 10.0
    all_paths: bool = False
    security: TransportSecuritySettings | None = None
    _session: aiohttp.ClientSession | None = None
    _last_error: str | None = None
    _requests: int = 0

    def __post_init__(self) -> None:
        if not self.remote_url.startswith(("http://", "https://")):
            raise ValueError(f"--remote: expected an http(s) URL, got {redact_url(self.remote_url)!r}")
        self._shown_url = redact_url(self.remote_url)
        self._guard = TransportSecurityMiddleware(self.security)
        # `user:pw@` in the URL becomes a Basic header we send ourselves (aiohttp refuses URL
        # credentials next to an Authorization header); configured headers win over it.
        self._target, basic = _split_credentials(self.remote_url)
        self._headers = dict(self.extra_headers)
        if basic is not None and not any(name.lower() == "authorization" for name in self._headers):
            self._headers["Authorization"] = basic
        # Names our headers replace, normalised: a client's `authorization` (or `X_Api_Key` next to
        # a configured `X-Api-Key`) must not ride along next to the configured one.
        self._replaced = frozenset(_normalised(name) for name in self._headers)

    async def start(self) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout)
        # auto_decompress off: bytes (and Content-Encoding) pass through as the server sent them.
        self._session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await self.start()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.stop()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"] == "/health":
            body = {
                "status": "ok",
                "remote": self._shown_url,
                "requests": self._requests,
                "lastError": self._last_error,
            }
            await Response(orjson.dumps(body), 200, media_type="application/json")(scope, receive, send)
            return
        refused = await self._guard.validate_request(Request(scope, receive))
        if refused is not None:
            await refused(scope, receive, send)
            return
        if self.all_paths:
            await self._forward(scope, receive, send, _origin(self._target) + scope["path"])
            return
        if scope["path"].rstrip("/") != "/mcp":
            await Response("Not Found", 404)(scope, receive, send)
            return
        await self._forward(scope, receive, send, self._target)

    async def _forward(self, scope: Scope, receive: Receive, send: Send, url: str) -> None:
        assert self._session is not None, "RemoteProxyApp.start() was not called"
        self._requests += 1
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope["headers"]
            if _normalised(k.decode("latin-1")) not in HOP_BY_HOP
            and _normalised(k.decode("latin-1")) not in self._replaced
        }
        headers.update(self._headers)
        if scope.get("query_string"):
            url += ("&" if "?" in url else "?") + scope["query_string"].decode("latin-1")
        try:
            upstream = await self._session.request(scope["method"], url, data=bytes(body), headers=headers)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            self._last_error = redact_text(f"{type(exc).__name__}: {exc}")
            log.warning("remote %s unreachable: %s", self._shown_url, self._last_error)
            err = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32603, "message": "remote MCP server unreachable"},
            }
            await Response(orjson.dumps(err), 502, media_type="application/json")(scope, receive, send)
            return
        async with upstream:
            out_headers = [
                (k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in upstream.headers.items()
                if k.lower() not in HOP_BY_HOP
            ]
            await send({"type": "http.response.start", "status": upstream.status, "headers": out_headers})
            try:
                async for chunk in upstream.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except (aiohttp.ClientError, ConnectionResetError) as exc:
                log.debug("remote stream ended: %s", redact_text(str(exc)))
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def _normalised(name: str) -> str:
    """A header name as CGI-style servers read it: case-insensitive, `_` the same as `-`."""
    return name.lower().replace("_", "-")


def _split_credentials(url: str) -> tuple[str, str | None]:
    """`http://user:pw@host/p` -> (`http://host/p`, `Basic base64(user:pw)`); other URLs unchanged."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    pair = f"{unquote(user)}:{unquote(password)}".encode()
    return urlunsplit(parts._replace(netloc=hostport)), "Basic " + base64.b64encode(pair).decode()


def _origin(url: str) -> str:
    """`http://host:port/any/path` -> `http://host:port`."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
