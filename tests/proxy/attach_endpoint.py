"""A local stand-in for the kubelet side of `pods/attach`, for testing the proxy's attach client.

No kubelet runs here, so this aiohttp server speaks the same WebSocket channel protocol
(v5.channel.k8s.io / v4.channel.k8s.io: one channel byte, then payload; 0 stdin, 1 stdout,
2 stderr, 3 error status, 255 close) on the API server's attach path, in front of a real
process playing the container (the conformance fixture server over stdio). The "container"
outlives attach connections, like a real one; `restart_container()` replaces it and ends the
current attach stream with an error status, as a container restart does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import orjson
from aiohttp import WSMsgType, web

from tests.conformance import harness

TOKEN = "attach-test-token"


@dataclass
class AttachEndpoint:
    namespace: str = "team-a"
    pod: str = "time-server-0"
    container: str = "mcp"
    protocols: tuple[str, ...] = ("v5.channel.k8s.io", "v4.channel.k8s.io")
    url: str = ""
    token: str = TOKEN
    """The bearer token the API server accepts now (a test rotates it)."""
    attaches: int = 0
    authorizations: list[str] = field(default_factory=list)
    """The Authorization header of every accepted attach."""
    negotiated: list[str] = field(default_factory=list)
    _proc: asyncio.subprocess.Process | None = None
    _current: web.WebSocketResponse | None = None
    _runner: web.AppRunner | None = None

    async def start_container(self) -> None:
        cmd = harness.fixture_stdio_command()
        self._proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

    async def restart_container(self) -> None:
        old, ws = self._proc, self._current
        await self.start_container()
        if old is not None:
            old.kill()
            await old.wait()
        if ws is not None and not ws.closed:
            status = {"status": "Failure", "message": "container mcp restarted"}
            await ws.send_bytes(b"\x03" + orjson.dumps(status))
            await ws.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        expected = f"/api/v1/namespaces/{self.namespace}/pods/{self.pod}/attach"
        if request.path != expected:
            return web.Response(status=404, text=f"no pod at {request.path}")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.Response(status=401, text="Unauthorized")
        self.authorizations.append(request.headers["Authorization"])
        query = request.query
        if (
            query.get("container") != self.container
            or query.get("stdin") != "true"
            or query.get("stdout") != "true"
        ):
            return web.Response(status=400, text=f"bad attach query {dict(query)}")
        ws = web.WebSocketResponse(protocols=self.protocols)
        await ws.prepare(request)
        self.attaches += 1
        self.negotiated.append(ws.ws_protocol or "")
        self._current = ws
        proc = self._proc
        assert (
            proc is not None
            and proc.stdin is not None
            and proc.stdout is not None
            and proc.stderr is not None
        )

        async def pump(stream: asyncio.StreamReader, channel: int) -> None:
            while chunk := await stream.read(65536):
                # Split across frames on purpose: the client must reassemble lines.
                half = max(1, len(chunk) // 2)
                for part in (chunk[:half], chunk[half:]):
                    if part and not ws.closed:
                        await ws.send_bytes(bytes([channel]) + part)

        pumps = [asyncio.create_task(pump(proc.stdout, 1)), asyncio.create_task(pump(proc.stderr, 2))]
        try:
            async for frame in ws:
                if frame.type != WSMsgType.BINARY or not frame.data:
                    continue
                if frame.data[0] == 0:
                    proc.stdin.write(frame.data[1:])
                    await proc.stdin.drain()
        finally:
            for task in pumps:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return ws

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[AttachEndpoint]:
        await self.start_container()
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/attach", self.handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        port = harness.free_port()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.url = f"http://127.0.0.1:{port}"
        try:
            yield self
        finally:
            await self._runner.cleanup()
            if self._proc is not None and self._proc.returncode is None:
                self._proc.kill()
                await self._proc.wait()

    def kubeconfig(self, token: str = TOKEN, token_file: str | None = None) -> str:
        user = {"tokenFile": token_file} if token_file is not None else {"token": token}
        return orjson.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "local", "cluster": {"server": self.url}}],
                "users": [{"name": "me", "user": user}],
                "contexts": [{"name": "test", "context": {"cluster": "local", "user": "me"}}],
            }
        ).decode()
