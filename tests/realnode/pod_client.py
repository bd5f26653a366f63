"""Runs INSIDE the client pod (read from stdin by the image's python): one MCP or HTTP call, JSON out.

Usage: python - mcp URL [TOOL [JSON_ARGS]]   -> {"tools": [...], "result": "<text of the call>"}
       python - get URL                       -> {"status": 200, "body": <json or text>}
Only the image's own packages are used (the `mcp` SDK is a dependency of mcpfleet).
"""

from __future__ import annotations

import asyncio
import json
import sys
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
    tool = sys.argv[3] if len(sys.argv) > 3 else None
    args = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    print(json.dumps(asyncio.run(asyncio.wait_for(mcp(url, tool, args), 60))))


if __name__ == "__main__":
    main()
