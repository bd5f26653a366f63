"""Reach a container's stdio through the Kubernetes attach API (`pods/attach` over WebSocket).

An MCPServer whose image speaks stdio runs as its own container with `stdin: true`; the proxy
(in the same pod or elsewhere) attaches to it the way `kubectl attach -i` does:

    GET /api/v1/namespaces/NS/pods/POD/attach?container=C&stdin=true&stdout=true&stderr=true
    Sec-WebSocket-Protocol: v5.channel.k8s.io, v4.channel.k8s.io

Every binary frame starts with a channel byte: 0 stdin (client -> container), 1 stdout, 2 stderr,
3 error (a metav1.Status JSON when the stream ends abnormally), 4 resize; v5 adds 255 = close a
channel. The container's stdout carries newline-delimited JSON-RPC exactly like a local child's,
so `AttachedChild` plugs into the same multiplexer as `ChildProcess`. When the WebSocket closes
(container restarted, API server restarted, network) it reports an exit and reconnects with the
same exponential backoff.

Credentials come from a kubeconfig (bearer token, token file, client certificate, basic auth;
exec plugins are not supported) or, inside a pod, from the service account. A token file is
re-read at every (re)connect: projected service-account tokens rotate (about hourly), and a
reconnect with the token read at start-up would be refused once it expired.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import ssl
import tempfile
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
import yaml

from mcpfleet.backoff import Backoff
from mcpfleet.proxy.backend import Child, ChildFactory
from mcpfleet.proxy.child import (
    ChildStatus,
    ChildUnavailableError,
    LifecycleHandler,
    MessageHandler,
    deliver_line,
)

log = logging.getLogger(__name__)

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class AttachTarget:
    namespace: str
    pod: str
    container: str | None = None

    @classmethod
    def parse(cls, value: str) -> AttachTarget:
        """`NAMESPACE/POD[/CONTAINER]`."""
        parts = value.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise ValueError(f"--attach: expected NAMESPACE/POD[/CONTAINER], got {value!r}")
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else None)

    def __str__(self) -> str:
        return "/".join(p for p in (self.namespace, self.pod, self.container) if p)


@dataclass
class KubeConnection:
    """Where the API server is and how to authenticate to it."""

    server: str
    ssl_context: ssl.SSLContext | bool = True
    headers: dict[str, str] = field(default_factory=dict)
    token_file: Path | None = None
    """A bearer token file, re-read by `request_headers()` at every connect (tokens rotate)."""

    def request_headers(self) -> dict[str, str]:
        """The headers of one connect: `headers`, with the token file's current token if there is one."""
        if self.token_file is None:
            return dict(self.headers)
        return {**self.headers, "Authorization": f"Bearer {self.token_file.read_text().strip()}"}

    def attach_url(self, target: AttachTarget) -> str:
        query: dict[str, str] = {"stdin": "true", "stdout": "true", "stderr": "true", "tty": "false"}
        if target.container:
            query["container"] = target.container
        path = f"/api/v1/namespaces/{quote(target.namespace)}/pods/{quote(target.pod)}/attach"
        base = self.server.rstrip("/")
        if base.startswith("https://"):
            base = "wss://" + base.removeprefix("https://")
        elif base.startswith("http://"):
            base = "ws://" + base.removeprefix("http://")
        return f"{base}{path}?{urlencode(query)}"


def _data_or_file(entry: Mapping[str, Any], key: str, base: Path) -> bytes | None:
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    if entry.get(key):
        path = Path(entry[key])
        return (path if path.is_absolute() else base / path).read_bytes()
    return None


def load_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> KubeConnection:
    """Read the current (or named) context of a kubeconfig file."""
    file = Path(path)
    config = yaml.safe_load(file.read_text()) or {}
    base = file.parent
    name = context or config.get("current-context")
    contexts = {c["name"]: c.get("context", {}) for c in config.get("contexts", [])}
    if name not in contexts:
        raise ValueError(f"--kubeconfig {file}: context {name!r} not found")
    ctx = contexts[name]
    clusters = {c["name"]: c.get("cluster", {}) for c in config.get("clusters", [])}
    users = {u["name"]: u.get("user", {}) or {} for u in config.get("users", [])}
    cluster = clusters.get(ctx.get("cluster"))
    if cluster is None or "server" not in cluster:
        raise ValueError(f"--kubeconfig {file}: cluster {ctx.get('cluster')!r} has no server")
    user = users.get(ctx.get("user"), {})
    if "exec" in user or "auth-provider" in user:
        raise ValueError(f"--kubeconfig {file}: exec / auth-provider credentials are not supported")
    headers: dict[str, str] = {}
    token = user.get("token")
    token_file = None
    if not token and user.get("tokenFile"):
        token_file = Path(user["tokenFile"])
        token = token_file.read_text().strip()  # read now too: a missing file fails at start
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif user.get("username") is not None:
        basic = base64.b64encode(f"{user['username']}:{user.get('password', '')}".encode()).decode()
        headers["Authorization"] = f"Basic {basic}"
    ssl_context: ssl.SSLContext | bool = True
    if cluster["server"].startswith("https://"):
        if cluster.get("insecure-skip-tls-verify"):
            ctx_ssl = ssl.create_default_context()
            ctx_ssl.check_hostname = False
            ctx_ssl.verify_mode = ssl.CERT_NONE
        else:
            ca = _data_or_file(cluster, "certificate-authority", base)
            ctx_ssl = ssl.create_default_context(cadata=ca.decode() if ca else None)
        cert = _data_or_file(user, "client-certificate", base)
        key = _data_or_file(user, "client-key", base)
        if cert and key:
            _load_client_cert(ctx_ssl, cert, key)
        ssl_context = ctx_ssl
    return KubeConnection(
        server=cluster["server"], ssl_context=ssl_context, headers=headers, token_file=token_file
    )


def in_cluster_connection(account: Path = SERVICE_ACCOUNT) -> KubeConnection:
    """The pod's service account (KUBERNETES_SERVICE_HOST/PORT, token, CA in `account`)."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ValueError(
            "--attach without --kubeconfig needs to run in a pod (KUBERNETES_SERVICE_HOST unset)"
        )
    token_file = account / "token"
    token_file.read_text()  # fail at start, not at the first connect, when no token is mounted
    ctx = ssl.create_default_context(cafile=str(account / "ca.crt"))
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return KubeConnection(server=server, ssl_context=ctx, token_file=token_file)


def _load_client_cert(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads certificate chains from files; keep them on disk only while loading.
    with tempfile.TemporaryDirectory(prefix="mcpfleet-attach-") as tmp:
        cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_file.write_bytes(cert)
        key_file.write_bytes(key)
        key_file.chmod(0o600)
        ctx.load_cert_chain(str(cert_file), str(key_file))


class AttachedChild:
    """A container's stdio over the attach API, with the `ChildProcess` interface."""

    def __init__(
        self,
        connection: KubeConnection,
        target: AttachTarget,
        *,
        on_message: MessageHandler,
        on_exit: LifecycleHandler | None = None,
        on_start: LifecycleHandler | None = None,
        backoff: Backoff | None = None,
        stderr_lines: int = 50,
        name: str = "attached server",
    ) -> None:
        self._conn = connection
        self._target = target
        self._on_message = on_message
        self._on_exit = on_exit
        self._on_start = on_start
        self._backoff = backoff or Backoff()
        self._stderr: deque[str] = deque(maxlen=stderr_lines)
        self._name = name
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._session: aiohttp.ClientSession | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._running = asyncio.Event()
        self._stopping = False
        self._restarts = 0
        self._failures = 0
        self._protocol: str | None = None
        self._last_error: str | None = None
        self._next_restart_at: float | None = None
        self._write_lock = asyncio.Lock()

    @property
    def running(self) -> bool:
        return self._running.is_set()

    @property
    def protocol(self) -> str | None:
        return self._protocol

    async def start(self) -> None:
        if self._supervisor is not None:
            return
        self._stopping = False
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        first = asyncio.get_running_loop().create_future()
        self._supervisor = asyncio.create_task(self._supervise(first), name=f"{self._name}-attach")
        await first

    async def stop(self, grace: float = 3.0) -> None:
        self._stopping = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws.close(), grace)
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, message: Mapping[str, Any]) -> None:
        ws = self._ws
        if not self.running or ws is None or ws.closed:
            raise ChildUnavailableError(f"{self._name} is not attached")
        async with self._write_lock:
            try:
                await ws.send_bytes(bytes([STDIN]) + orjson.dumps(message) + b"\n")
            except (ConnectionResetError, aiohttp.ClientError) as exc:
                raise ChildUnavailableError(f"{self._name}: attach stream closed") from exc

    def status(self) -> ChildStatus:
        next_in = None
        if self._next_restart_at is not None:
            next_in = max(0.0, round(self._next_restart_at - time.monotonic(), 3))
        tail = list(self._stderr)
        if self._last_error and not self.running:
            tail.append(f"[attach] {self._last_error}")
        return ChildStatus(
            command=[f"attach {self._target}"],
            running=self.running,
            restarts=self._restarts,
            next_restart_in=next_in,
            stderr_tail=tail,
        )

    async def _supervise(self, first: asyncio.Future[None]) -> None:
        try:
            while not self._stopping:
                started = time.monotonic()
                try:
                    await self._attach_once(first)
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    self._last_error = f"{type(exc).__name__}: {exc}"
                    log.warning("%s: attach to %s failed: %s", self._name, self._target, self._last_error)
                if not first.done():
                    first.set_result(None)
                if self._stopping:
                    break
                ran_for = time.monotonic() - started
                self._failures = self._backoff.failures_after(self._failures, ran_for)
                delay = self._backoff.delay(self._failures)
                self._next_restart_at = time.monotonic() + delay
                await asyncio.sleep(delay)
                self._next_restart_at = None
                self._restarts += 1
        finally:
            if not first.done():
                first.set_result(None)

    async def _attach_once(self, first: asyncio.Future[None]) -> None:
        assert self._session is not None
        url = self._conn.attach_url(self._target)
        ws = await self._session.ws_connect(
            url,
            protocols=PROTOCOLS,
            headers=self._conn.request_headers(),  # re-read: the token may have rotated
            ssl=self._conn.ssl_context,
            heartbeat=30,
            max_msg_size=64 * 1024 * 1024,
        )
        self._ws = ws
        self._protocol = ws.protocol
        if ws.protocol not in PROTOCOLS:
            await ws.close()
            raise aiohttp.ClientError(f"server chose no supported channel protocol ({ws.protocol!r})")
        self._last_error = None
        self._running.set()
        log.info("%s: attached to %s (%s)", self._name, self._target, ws.protocol)
        if not first.done():
            first.set_result(None)
        try:
            if self._on_start is not None:
                await self._on_start()
            await self._read(ws)
        finally:
            self._running.clear()
            self._ws = None
            if not ws.closed:
                await ws.close()
            if self._on_exit is not None:
                try:
                    await self._on_exit()
                except Exception:
                    log.exception("%s: exit handler failed", self._name)

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        stdout = bytearray()
        stderr = bytearray()
        async for frame in ws:
            if frame.type != aiohttp.WSMsgType.BINARY or not frame.data:
                continue
            channel, payload = frame.data[0], frame.data[1:]
            if channel == STDOUT:
                stdout += payload
                while (newline := stdout.find(b"\n")) >= 0:
                    line = bytes(stdout[:newline]).strip()
                    del stdout[: newline + 1]
                    if line:
                        await deliver_line(line, self._on_message, self._stderr, self._name)
            elif channel == STDERR:
                stderr += payload
                while (newline := stderr.find(b"\n")) >= 0:
                    self._stderr.append(bytes(stderr[:newline]).decode(errors="replace").rstrip())
                    del stderr[: newline + 1]
            elif channel == ERROR and payload:
                # Kept in the tail (not as the last error): it explains a past exit, even once reattached.
                message = _status_message(payload)
                self._stderr.append(f"[attach] stream ended: {message}")
                log.warning("%s: attach stream error: %s", self._name, message)


def _status_message(payload: bytes) -> str:
    try:
        status = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload.decode(errors="replace")
    if isinstance(status, dict):
        return str(status.get("message") or status.get("reason") or status.get("status"))
    return str(status)


def attach_factory(
    connection: KubeConnection, target: AttachTarget, backoff: Backoff | None = None
) -> ChildFactory:
    """A `ChildFactory` for `StdioBackend`: the one attached container stdio."""

    def make(
        name: str, on_message: MessageHandler, on_exit: LifecycleHandler, on_start: LifecycleHandler
    ) -> Child:
        return AttachedChild(
            connection,
            target,
            on_message=on_message,
            on_exit=on_exit,
            on_start=on_start,
            backoff=backoff,
            name=name,
        )

    return make
