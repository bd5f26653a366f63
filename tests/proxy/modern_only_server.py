"""A hand-written stdio MCP server that speaks only protocol 2026-07-28.

`initialize` is refused with -32022 (the stdio form of "not part of 2026-07-28"); every request
must carry the `_meta` envelope; `server/discover`, `tools/list` and `tools/call` (tool `where`,
answering the envelope's protocol version it received) are served with `resultType`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
INFO = {"name": "modern-only", "version": "1"}


def answer(method: str, meta: dict[str, Any]) -> tuple[Any, Any]:
    if method == "initialize":
        return None, {"code": -32022, "message": "initialize is not part of protocol 2026-07-28"}
    if meta.get(VERSION_KEY) != "2026-07-28":
        return None, {"code": -32600, "message": "the _meta envelope is required"}
    if method == "server/discover":
        caps = {"tools": {}}
        return {"supportedVersions": ["2026-07-28"], "capabilities": caps, "serverInfo": INFO}, None
    if method == "tools/list":
        return {
            "tools": [{"name": "where", "inputSchema": {"type": "object"}}],
            "ttlMs": 5000,
            "cacheScope": "public",
        }, None
    if method == "tools/call":
        return {"content": [{"type": "text", "text": f"served at {meta[VERSION_KEY]}"}]}, None
    return None, {"code": -32601, "message": "Method not found"}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        params = message.get("params") or {}
        result, error = answer(message["method"], params.get("_meta") or {})
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        reply.update({"error": error} if error else {"result": {"resultType": "complete", **result}})
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
