"""The local token issuer: bearer tokens for a local gateway without an identity provider of one's own.

`mcpfleet auth enable` gives a fleet a signing key (`STATE/auth/issuer-key.pem`, P-256, mode 0600 in
a 0700 folder) and a fixed loopback port (`STATE/auth/issuer.json`), and points the gateway's
`incomingAuth` at this issuer (ordinary inline OIDC: issuer, audience, JWKS URL). `mcpfleet up` then
serves the issuer's two public documents — its OIDC discovery document and its JWKS — on that port,
and `mcpfleet auth token --user NAME` signs a token for NAME (ES256, `iss`, `aud`, `sub`, `iat`,
`exp`, `jti`) offline with the key. The gateway validates those tokens exactly as it validates any
OIDC provider's: nothing in the data plane knows this issuer exists.

The issuer serves nothing secret and accepts no input but the request line: `GET` (or `HEAD`) of the
two paths, from a loopback Host; everything else is a JSON 404 / 405 / 421 with no body read. Headers
are bounded in size and time like every other endpoint (`httplimits`).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet.platform.local.errors import LocalPlatformError
from mcpfleet.platform.local.paths import safe_join
from mcpfleet.platform.local.ports import port_is_free, preferred_port

AUTH_DIR = "auth"
KEY_FILE = "issuer-key.pem"
SETTINGS_FILE = "issuer.json"
AUDIENCE = "mcpfleet-gateway"
DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/jwks.json"
MAX_TTL_SECONDS = 366 * 24 * 3600
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


class IssuerError(LocalPlatformError, ValueError):
    """An issuer that cannot be set up or used; the message says why."""


@dataclass(frozen=True)
class IssuerSettings:
    """Where the issuer listens; its URL is the `iss` of its tokens."""

    port: int
    audience: str = AUDIENCE

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jwks_url(self) -> str:
        return self.url + JWKS_PATH


def _auth_dir(state_dir: Path) -> Path:
    return safe_join(state_dir, AUTH_DIR)


def read_settings(state_dir: Path) -> IssuerSettings | None:
    """The issuer of this state folder, or None when `auth enable` never ran for it."""
    path = _auth_dir(state_dir) / SETTINGS_FILE
    try:
        data = json.loads(path.read_text())
        port = int(data["port"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IssuerError(f"{path}: unreadable ({exc})") from None
    if not 1 <= port <= 65535:
        raise IssuerError(f"{path}: port {port} out of range")
    return IssuerSettings(port=port, audience=str(data.get("audience") or AUDIENCE))


def _pick_port(state_dir: Path, port_range: tuple[int, int]) -> int:
    low, high = port_range
    start = preferred_port(f"issuer/{state_dir}", low, high)
    for offset in range(high - low + 1):
        port = low + (start - low + offset) % (high - low + 1)
        if port_is_free(port):
            return port
    raise IssuerError(f"no free port in {low}-{high} for the local issuer")


def ensure_issuer(state_dir: Path, port_range: tuple[int, int] = (20000, 29999)) -> IssuerSettings:
    """Creates the issuer's key and settings once (later calls return the same settings)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder = _auth_dir(state_dir)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    key_path = folder / KEY_FILE
    if not key_path.exists():
        private = ec.generate_private_key(ec.SECP256R1())
        pem = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
    settings = read_settings(state_dir)
    if settings is None:
        settings = IssuerSettings(port=_pick_port(state_dir, port_range))
        (folder / SETTINGS_FILE).write_text(
            json.dumps({"port": settings.port, "audience": settings.audience})
        )
    return settings


def _signing_key(state_dir: Path) -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from mcpfleet.auth.authserver.keys import signing_key

    path = _auth_dir(state_dir) / KEY_FILE
    try:
        private = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        raise IssuerError(f"no issuer key in {path.parent} (run `mcpfleet auth enable` first)") from None
    except (OSError, ValueError, TypeError) as exc:
        raise IssuerError(f"{path}: not a usable key ({exc})") from None
    if not isinstance(private, ec.EllipticCurvePrivateKey):
        raise IssuerError(f"{path}: not an EC P-256 key")
    return signing_key(private)


def issue_token(state_dir: Path, user: str, ttl_seconds: int) -> str:
    """A bearer token for `user`, signed with the fleet's issuer key."""
    import jwt

    if not user or len(user) > 256 or any(ord(c) < 32 for c in user):
        raise IssuerError("--user: 1-256 characters without control characters")
    if not 60 <= ttl_seconds <= MAX_TTL_SECONDS:
        raise IssuerError(f"--ttl: between 60 s and {MAX_TTL_SECONDS // 86400} days")
    settings = read_settings(state_dir)
    if settings is None:
        raise IssuerError(f"no local issuer for {state_dir} (run `mcpfleet auth enable` first)")
    key = _signing_key(state_dir)
    now = int(time.time())
    claims = {
        "iss": settings.url,
        "aud": settings.audience,
        "sub": user,
        "iat": now,
        "exp": now + ttl_seconds,
        "jti": secrets.token_urlsafe(12),
    }
    return str(jwt.encode(claims, key.private, algorithm=key.algorithm, headers={"kid": key.kid}))


def documents(state_dir: Path, settings: IssuerSettings) -> dict[str, bytes]:
    """The two documents the issuer serves, by path."""
    key = _signing_key(state_dir)
    discovery = {
        "issuer": settings.url,
        "jwks_uri": settings.jwks_url,
        "id_token_signing_alg_values_supported": [key.algorithm],
        "response_types_supported": ["token"],
        "subject_types_supported": ["public"],
    }
    return {
        DISCOVERY_PATH: json.dumps(discovery).encode(),
        JWKS_PATH: json.dumps({"keys": [key.jwk()]}).encode(),
    }


def _host_allowed(scope: dict[str, Any], port: int) -> bool:
    host = b""
    for name, value in scope.get("headers") or []:
        if name == b"host":
            if host:
                return False  # two Host headers: refused, never guessed
            host = value
    text = host.decode("latin-1").lower()
    return text in {f"{h}:{port}" for h in LOOPBACK_HOSTS} or text in LOOPBACK_HOSTS


class IssuerApp:
    """The issuer's ASGI app: two static documents, nothing else."""

    def __init__(self, served: dict[str, bytes], port: int) -> None:
        self.served = served
        self.port = port

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if not _host_allowed(scope, self.port):
            await _answer(send, 421, {"error": "Host: only a loopback host may reach the local issuer"})
        elif scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, {"error": f"method {scope['method'][:16]}: only GET"}, allow=True)
        elif scope["path"] not in self.served:
            await _answer(send, 404, {"error": "not found", "paths": sorted(self.served)})
        else:
            body = self.served[scope["path"]]
            await _answer(send, 200, body, head=scope["method"] == "HEAD")


async def _answer(
    send: Any, status: int, body: dict[str, Any] | bytes, allow: bool = False, head: bool = False
) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"max-age=300"),
        (b"x-content-type-options", b"nosniff"),
    ]
    if allow:
        headers.append((b"allow", b"GET, HEAD"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else data})


def server(state_dir: Path, settings: IssuerSettings) -> Any:
    """A uvicorn server for the issuer on 127.0.0.1 (the caller serves it and stops it)."""
    from mcpfleet import uvicornserver
    from mcpfleet.httplimits import HttpLimits, uvicorn_options

    app = IssuerApp(documents(state_dir, settings), settings.port)
    return uvicornserver.server(
        app,
        host="127.0.0.1",
        port=settings.port,
        log_level="warning",
        lifespan="on",
        **uvicorn_options(HttpLimits.from_env()),
    )


async def follow(state_dir: Path, stop: Any, report: Any, poll: float = 0.5) -> None:
    """Serves the issuer of `state_dir` while `stop` (an asyncio.Event) is not set: from `up`'s
    start if `auth enable` ran before, or from the moment it runs. `report(text)` tells the person
    (once per problem) when the issuer cannot be served."""
    import asyncio
    import contextlib

    served: Any = None
    task: asyncio.Task[None] | None = None
    problem = ""
    try:
        while not stop.is_set():
            if task is None:
                try:
                    settings = read_settings(state_dir)
                    if settings is not None:
                        served = server(state_dir, settings)
                        # `_serve`, not `serve`: `serve` would take over `up`'s signal handlers.
                        task = asyncio.create_task(served._serve(), name="local-issuer")
                        report(
                            f"local token issuer: {settings.url} (gateway tokens: mcpfleet auth token --user NAME)"
                        )
                except IssuerError as exc:
                    if str(exc) != problem:
                        problem = str(exc)
                        report(f"local token issuer not served: {problem}")
            elif task.done():
                error = task.exception() if not task.cancelled() else None
                report(f"local token issuer stopped: {error or 'its port is taken'}; retrying in 5 s")
                task = None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 5.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), poll)
    finally:
        if served is not None and task is not None:
            served.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5.0)
