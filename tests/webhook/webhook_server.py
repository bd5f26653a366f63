"""A real HTTP webhook server for the webhook tests: ToolHive's protocol, behaviour switched per call.

`/mutate` and `/validate` answer according to `WebhookServer.modes[path]`; every call is recorded
with its parsed payload and whether its `X-ToolHive-Signature` verified with the server's key."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web


@dataclass
class Call:
    path: str
    payload: dict[str, Any]
    signed: bool
    signature_ok: bool


@dataclass
class WebhookServer:
    key: bytes
    modes: dict[str, str] = field(default_factory=lambda: {"mutate": "allow", "validate": "allow"})
    calls: list[Call] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=4 << 20)
        app.router.add_post("/mutate", self._handle)
        app.router.add_post("/validate", self._handle)
        return app

    def _verify(self, request: web.Request, body: bytes) -> tuple[bool, bool]:
        signature = request.headers.get("X-ToolHive-Signature")
        timestamp = request.headers.get("X-ToolHive-Timestamp")
        if signature is None or timestamp is None:
            return False, False
        expected = (
            "sha256=" + hmac.new(self.key, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        )
        return True, hmac.compare_digest(expected, signature)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        path = request.path.strip("/")
        payload = orjson.loads(body)
        signed, ok = self._verify(request, body)
        self.calls.append(Call(path, payload, signed, ok))
        mode = self.modes[path]
        uid = payload["uid"]
        arguments = (payload["mcp_request"].get("params") or {}).get("arguments") or {}
        if mode == "allow":
            return web.json_response({"version": "v0.1.0", "uid": uid, "allowed": True})
        if mode.startswith("deny-"):
            name = (payload["mcp_request"].get("params") or {}).get("name")
            if name == mode.removeprefix("deny-"):
                return web.json_response(
                    {
                        "version": "v0.1.0",
                        "uid": uid,
                        "allowed": False,
                        "reason": "NoMath",
                        "message": "no math today",
                    }
                )
            return web.json_response({"version": "v0.1.0", "uid": uid, "allowed": True})
        if mode == "patch-timezone" and "timezone" in arguments:
            patch = [
                {"op": "replace", "path": "/mcp_request/params/arguments/timezone", "value": "Asia/Tokyo"}
            ]
            return web.json_response(
                {"uid": uid, "allowed": True, "patch_type": "json_patch", "patch": patch}
            )
        if mode in ("patch", "patch-timezone"):
            if "city" not in arguments:
                return web.json_response({"version": "v0.1.0", "uid": uid, "allowed": True})
            patch = [
                {
                    "op": "replace",
                    "path": "/mcp_request/params/arguments/city",
                    "value": "Patched-" + arguments["city"],
                }
            ]
            return web.json_response(
                {"uid": uid, "allowed": True, "patch_type": "json_patch", "patch": patch}
            )
        if mode == "slow":
            await asyncio.sleep(5)
        return FIXED[mode]()


def _patch(*ops: dict[str, Any]) -> web.Response:
    return web.json_response({"allowed": True, "patch_type": "json_patch", "patch": list(ops)})


FIXED: dict[str, Callable[[], web.Response]] = {
    # An answer above the 1 MiB cap.
    "huge": lambda: web.Response(
        body=b'{"allowed": true, "pad": "' + b"x" * (2 << 20) + b'"}', content_type="application/json"
    ),
    "notjson": lambda: web.Response(text="<html>oops</html>", content_type="text/html"),
    "wrongshape": lambda: web.json_response({"allowed": "yes"}),
    "array": lambda: web.json_response([True]),
    "500": lambda: web.Response(status=500, text="internal secret stack trace"),
    "422": lambda: web.json_response({"allowed": True}, status=422),
    "slow": lambda: web.json_response({"allowed": True}),
    # A patch outside mcp_request (the principal).
    "scope": lambda: _patch({"op": "replace", "path": "/principal", "value": {"sub": "admin"}}),
    "idchange": lambda: _patch({"op": "replace", "path": "/mcp_request/id", "value": 999999}),
    # A small answer whose patch grows the request past 1 MiB.
    "bigpatch": lambda: _patch(
        {"op": "add", "path": "/mcp_request/params/arguments/pad", "value": "y" * 700_000},
        {
            "op": "copy",
            "from": "/mcp_request/params/arguments/pad",
            "path": "/mcp_request/params/arguments/pad2",
        },
    ),
}
