"""Small MCP servers of our own for the gateway tests, served in-process by uvicorn.

* `sdk_backend(name, ...)`: an `mcp` SDK v2 MCPServer (both protocol eras) with an `echo` tool that
  conflicts across backends, a tool of its own, a resource, a resource template, a prompt and a
  trigger that changes its tool list and announces it.
* `jsonrpc_backend(...)`: a hand-written 2025-era JSON-RPC server whose behaviour a test controls
  (a failing prompts/list, a required header, a call counter).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from tests.hostile import encode
from tests.inprocess_server import InProcessServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """An ASGI app running under uvicorn in the test's event loop; stop() and start() again on the same port."""

    def __init__(self, app: Any, port: int | None = None, tls: tuple[str, str] | None = None) -> None:
        self.app = app
        self.port = port or free_port()
        self.tls = tls  # (certificate file, key file): serve HTTPS
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def start(self) -> Served:
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="error",
            lifespan="on",
            ssl_certfile=self.tls[0] if self.tls else None,
            ssl_keyfile=self.tls[1] if self.tls else None,
        )
        self._server = InProcessServer(config)
        self._task = asyncio.create_task(self._server.serve())
        for _ in range(1500):  # 30 s: a gateway's start-up connects to every backend first
            if self._server.started:
                return self
            if self._task.done():
                self._task.result()
                raise RuntimeError(f"server on port {self.port} exited during start-up")
            await asyncio.sleep(0.02)
        raise RuntimeError(f"server on port {self.port} did not start within 30 s")

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            try:
                await asyncio.wait_for(self._task, 10)
            except TimeoutError:
                self._task.cancel()
        self._server = None
        self._task = None


def sdk_backend(name: str, *, extra_tool: str | None = None) -> MCPServer:
    mcp = MCPServer(name)

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo text back (every test backend has it: a name conflict)."""
        return f"{name}:{text}"

    def own(x: int = 1) -> str:
        return f"{name} own {x}"

    mcp.add_tool(own, name=extra_tool or f"{name}_only", description=f"A tool only {name} has.")

    @mcp.tool()
    def upper(text: str) -> str:
        """Upper-case text."""
        return text.upper()

    @mcp.tool()
    def fail(message: str = "boom") -> str:
        """Always fails."""
        raise ToolError(message)

    @mcp.tool()
    async def slow(seconds: float = 0.5) -> str:
        """Sleeps, then answers."""
        await asyncio.sleep(seconds)
        return "slept"

    @mcp.tool()
    async def grow(ctx: Context, tool: str = "grown") -> str:
        """Adds a tool to this server and announces the change."""

        def grown() -> str:
            return "grown"

        mcp.add_tool(grown, name=tool, description="added at run time")
        await ctx.notify_tools_changed()
        return "grew"

    @mcp.resource(f"mem://{name}/info")
    def info() -> str:
        """Static info resource."""
        return f"info of {name}"

    @mcp.resource(f"mem://{name}/items/{{item}}")
    def item(item: str) -> str:
        """One item."""
        return f"{name} item {item}"

    @mcp.prompt()
    def greet(who: str) -> str:
        """A greeting prompt (all test backends have it)."""
        return f"Hello {who} from {name}"

    return mcp


@dataclass
class JsonRpcBackend:
    """A hand-written 2025-era backend; `calls` counts requests by method, `headers` keeps the last ones."""

    name: str
    tools: list[str] = field(default_factory=lambda: ["echo"])
    fail_prompts_list: bool = False
    require_header: tuple[str, str] | None = None
    calls: dict[str, int] = field(default_factory=dict)
    last_headers: dict[str, str] = field(default_factory=dict)
    headers_by_method: dict[str, dict[str, str]] = field(default_factory=dict)
    on_call: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    # 2026-07-28 only: answers server/discover, refuses initialize, requires the _meta envelope.
    modern_only: bool = False
    # A fixed result per method (hostile answers: nested too deep, ...), or a callable making the
    # whole answer (bytes) for the request id; resources/* ones also make it announce resources.
    answers: dict[str, Any] = field(default_factory=dict)

    async def _refused(self, send: Any, http_method: str, headers: dict[str, str]) -> bool:
        """405 for anything but POST, 401 without the required header; True when refused."""
        if http_method != "POST":
            await self._send(send, 405, b"")
            return True
        if (
            self.require_header is not None
            and headers.get(self.require_header[0].lower()) != self.require_header[1]
        ):
            await self._send(send, 401, b'{"error":"unauthorized"}')
            return True
        return False

    async def _modern_answer(
        self, send: Any, req: dict[str, Any], method: str, headers: dict[str, str]
    ) -> bool:
        """2026-07-28 only: refuse the old handshake, answer server/discover; True when answered."""
        result: Any
        meta = (req.get("params") or {}).get("_meta") or {}
        version = meta.get("io.modelcontextprotocol/protocolVersion")
        if method == "initialize" or version != "2026-07-28" or headers.get("mcp-method") != method:
            err = {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": version},
            }
            await self._send(send, 400, orjson.dumps({"jsonrpc": "2.0", "id": req["id"], "error": err}))
            return True
        if method == "server/discover":
            caps = {"tools": {"listChanged": False}}
            result = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": caps,
                "resultType": "complete",
                "ttlMs": 0,
                "cacheScope": "private",
            }
            await self._send(send, 200, orjson.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}))
            return True
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        body = await _body(receive)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.last_headers = headers
        if await self._refused(send, scope["method"], headers):
            return
        req = orjson.loads(body)
        method = req.get("method", "")
        self.calls[method] = self.calls.get(method, 0) + 1
        self.headers_by_method[method] = headers
        if "id" not in req:
            await self._send(send, 202, b"")
            return
        result: Any
        if await self._special_answer(send, req, method, headers):
            return
        if method == "initialize":
            result = self._initialize_result()
        elif method == "tools/list":
            result = {
                "tools": [
                    {"name": t, "description": f"{t} of {self.name}", "inputSchema": {"type": "object"}}
                    for t in self.tools
                ]
            }
        elif method == "prompts/list":
            if self.fail_prompts_list:
                await self._send(
                    send,
                    200,
                    orjson.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": req["id"],
                            "error": {"code": -32603, "message": "prompts are broken"},
                        }
                    ),
                )
                return
            result = {"prompts": []}
        elif method == "tools/call":
            if self.on_call is not None:
                await self.on_call(req)
            args = req["params"].get("arguments") or {}
            text = f"{self.name}:{req['params']['name']}:{orjson.dumps(args).decode()}"
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        elif method == "ping":
            result = {}
        else:
            await self._send(
                send,
                200,
                orjson.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": req["id"],
                        "error": {"code": -32601, "message": "Method not found"},
                    }
                ),
            )
            return
        await self._reply(send, req, method, result)

    async def _special_answer(
        self, send: Any, req: dict[str, Any], method: str, headers: dict[str, str]
    ) -> bool:
        """A 2026-only server's own answers, or a fixed answer from `answers`; True when answered."""
        if self.modern_only and await self._modern_answer(send, req, method, headers):
            return True
        if method in self.answers:
            answer = self.answers[method]
            if callable(answer):  # the whole message, as bytes, for the request id
                await self._send(send, 200, answer(req["id"]))
            else:
                await self._reply(send, req, method, answer)
            return True
        return False

    def _initialize_result(self) -> dict[str, Any]:
        caps: dict[str, Any] = {"tools": {"listChanged": True}, "prompts": {}}
        if any(m.startswith("resources/") for m in self.answers):
            caps["resources"] = {}
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": caps,
            "serverInfo": {"name": self.name, "version": "1"},
        }

    async def _reply(self, send: Any, req: dict[str, Any], method: str, result: Any) -> None:
        if self.modern_only and isinstance(result, dict):
            result["resultType"] = "complete"
        answer = {"jsonrpc": "2.0", "id": req["id"], "result": result}
        out = encode(answer)  # also a hostile answer nested deeper than orjson writes
        extra = [(b"mcp-session-id", b"s-" + self.name.encode())] if method == "initialize" else []
        await self._send(send, 200, out, extra)

    @staticmethod
    async def _send(
        send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        headers = [(b"content-type", b"application/json"), *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        m = await receive()
        if m["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif m["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _body(receive: Any) -> bytes:
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            return body
