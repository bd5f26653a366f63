"""A hand-written stdio MCP server that speaks only the handshake era, strictly.

What most published servers are: `initialize` first (anything else before it is refused), no
`server/discover`, and a request carrying the 2026-07-28 `_meta` envelope is refused. Its tools
make it show what reaches it: `echo_params` answers with the params it received; `change` sends
`notifications/tools/list_changed`; `touch` sends `notifications/resources/updated` for its `uri`
argument. `resources/subscribe` and `resources/unsubscribe` are recorded and listed by `subscriptions`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

ENVELOPE = "io.modelcontextprotocol/protocolVersion"
CAPS = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
TOOLS = [
    {"name": name, "inputSchema": {"type": "object"}}
    for name in ("echo_params", "change", "touch", "subscriptions")
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(value, sort_keys=True)}]}


def main() -> None:
    initialized = False
    subscribed: set[str] = set()
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if request_id is None or method is None:
            continue  # notifications and answers
        meta = params.get("_meta") or {}
        error = None
        result: Any = None
        if method == "initialize":
            initialized = True
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": CAPS,
                "serverInfo": {"name": "strict", "version": "1"},
            }
        elif not initialized:
            error = {"code": -32600, "message": "not initialized"}
        elif ENVELOPE in meta:
            error = {"code": -32600, "message": "this connection serves the handshake era"}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "resources/subscribe":
            subscribed.add(params["uri"])
            result = {}
        elif method == "resources/unsubscribe":
            subscribed.discard(params["uri"])
            result = {}
        elif method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments") or {}
            if name == "change":
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            elif name == "touch":
                uri = arguments.get("uri")
                send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
            result = text(sorted(subscribed) if name == "subscriptions" else params)
        else:
            error = {"code": -32601, "message": "Method not found"}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        reply.update({"error": error} if error else {"result": result})
        send(reply)


if __name__ == "__main__":
    main()
