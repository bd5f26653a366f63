#!/usr/bin/python3
"""A stdio MCP server with one tool (`echo`), standard library only: the OCI image test's server.

Packed into its own small image (Debian minbase + python3 + this file) to exercise the OCI-image
stdio path: the runner container attaches to this container's stdin/stdout through the API server.
"""

import json
import sys


def reply(msg_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


TOOL = {
    "name": "echo",
    "description": "Echoes its message back.",
    "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
}

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue  # notifications need no answer
    if method == "initialize":
        version = msg.get("params", {}).get("protocolVersion", "2025-06-18")
        reply(
            msg_id,
            {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo-stdio", "version": "1"},
            },
        )
    elif method == "tools/list":
        reply(msg_id, {"tools": [TOOL]})
    elif method == "tools/call":
        text = str(msg.get("params", {}).get("arguments", {}).get("message", ""))
        reply(msg_id, {"content": [{"type": "text", "text": f"echo: {text}"}]})
    elif method == "ping":
        reply(msg_id, {})
    else:
        sys.stdout.write(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": msg_id,
                    "error": {"code": -32601, "message": f"unknown method {method}"},
                }
            )
            + "\n"
        )
        sys.stdout.flush()
