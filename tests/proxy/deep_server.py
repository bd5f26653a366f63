"""A hand-written stdio MCP server whose answers are nested $DEEP_SERVER_DEPTH levels deep.

Lenient on purpose (it answers `initialize` with the version asked for, `server/discover`, and
every list / call / get / read): it is the hostile server of the proxy's deep-answer tests, not a
reference. A `tools/call` whose `arguments.answer` is a string answers with the members that JSON
text holds (the hostile suite's generated answers). Written with the standard library's json, which writes any nesting (orjson stops at 255).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

DEPTH = int(os.environ.get("DEEP_SERVER_DEPTH", "300"))
# $DEEP_SERVER_TOOLS=not-a-list: tools/list answers {"tools": 5}.
CAPS = {"tools": {}, "prompts": {}, "resources": {}}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def result(method: str, params: dict[str, Any]) -> Any:
    deep = nested(DEPTH)
    if method == "initialize":
        version = params.get("protocolVersion", "2025-11-25")
        return {
            "protocolVersion": version,
            "capabilities": CAPS,
            "serverInfo": {"name": "deep", "version": "1"},
        }
    if method == "server/discover":
        return {
            "supportedVersions": ["2026-07-28"],
            "capabilities": CAPS,
            "serverInfo": {"name": "deep", "version": "1"},
        }
    tools: Any = [{"name": "t", "inputSchema": {"type": "object", "x": deep}}]
    if os.environ.get("DEEP_SERVER_TOOLS") == "not-a-list":
        tools = 5
    answers: dict[str, Any] = {
        "tools/list": {"tools": tools},
        "tools/call": {"content": [], "structuredContent": {"x": deep}},
        "prompts/list": {"prompts": [{"name": "p", "x": deep}]},
        "prompts/get": {"messages": [], "x": deep},
        "resources/list": {"resources": [{"uri": "mem://r", "name": "r", "x": deep}]},
        "resources/read": {"contents": [], "x": deep},
        "ping": {},
    }
    return answers.get(method)


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            continue
        params = msg.get("params") or {}
        given = (params.get("arguments") or {}).get("answer") if msg["method"] == "tools/call" else None
        if isinstance(given, str):  # the hostile suite's generated answer: its members, as JSON text
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **json.loads(given)}) + "\n")
            sys.stdout.flush()
            continue
        answer = result(msg["method"], params)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"]}
        if answer is None:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        else:
            reply["result"] = answer
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
