"""Runs INSIDE the client pod (read from stdin by the image's python): MCP or HTTP calls, JSON out.

Usage: python - mcp URL [TOOL [JSON_ARGS]]   -> {"tools": [...], "result": "<text of the call>"}
       python - session URL JSON_PLAN         -> {"tools": [{name, description, inputSchema}, ...],
                                                   "calls": [{"is_error", "text", "structured", "seconds"}
                                                             or {"error": {"code", "message"}, "seconds"}]}
           JSON_PLAN: {"mode": "legacy" | "2026-07-28" (default legacy),
                       "calls": [{"tool": NAME, "arguments": {...}}, ...]}; one client session,
           the tool list first, then each call in order (a JSON-RPC error is recorded, not raised).
       python - get URL                       -> {"status": 200, "body": <json or text>}
Only the image's own packages are used (the `mcp` SDK is a dependency of mcpfleet).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.request
from typing import Any


async def mcp(url: str, tool: str | None, args: dict[str, Any]) -> dict[str, Any]:
    from mcp.client.client import Client

    async with Client(url, mode="legacy") as c:
        tools = sorted(t.name for t in (await c.list_tools()).tools)
        out: dict[str, Any] = {"tools": tools}
        if tool:
            res = await c.call_tool(tool, args)
            out["is_error"] = bool(res.is_error)
            out["result"] = "".join(getattr(part, "text", "") for part in res.content)
        return out


async def session(url: str, plan: dict[str, Any]) -> dict[str, Any]:
    from mcp.client.client import Client
    from mcp.shared.exceptions import MCPError

    async with Client(url, mode=plan.get("mode", "legacy")) as c:
        listed = (await c.list_tools()).tools
        out: dict[str, Any] = {
            "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed],
            "calls": [],
        }
        for call in plan.get("calls", []):
            started = time.perf_counter()
            try:
                res = await c.call_tool(call["tool"], call.get("arguments") or {})
            except MCPError as exc:
                out["calls"].append(
                    {
                        "error": {"code": exc.error.code, "message": exc.error.message},
                        "seconds": time.perf_counter() - started,
                    }
                )
                continue
            out["calls"].append(
                {
                    "is_error": bool(res.is_error),
                    "text": "".join(getattr(part, "text", "") for part in res.content),
                    "structured": res.structured_content,
                    "seconds": time.perf_counter() - started,
                }
            )
        return out


def get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=20) as r:
        body = r.read().decode()
        try:
            return {"status": r.status, "body": json.loads(body)}
        except ValueError:
            return {"status": r.status, "body": body}


def main() -> None:
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "get":
        print(json.dumps(get(url)))
        return
    if mode == "session":
        print(json.dumps(asyncio.run(asyncio.wait_for(session(url, json.loads(sys.argv[3])), 120))))
        return
    tool = sys.argv[3] if len(sys.argv) > 3 else None
    args = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    print(json.dumps(asyncio.run(asyncio.wait_for(mcp(url, tool, args), 60))))


if __name__ == "__main__":
    main()
