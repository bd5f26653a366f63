"""MCP wire details shared by the front-end and the upstream clients.

Owns: protocol-version sets and header names, JSON encode/decode (orjson), JSON-RPC error
values, the SSE frame encoder (the parser is `mcpfleet.sse`), and the HTTP status table for
2026-07-28 errors. Kept free of SDK session machinery so the hot path stays a few dict operations.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: Final = ("2026-07-28",)
LATEST_HANDSHAKE: Final = HANDSHAKE_VERSIONS[-1]
LATEST_MODERN: Final = MODERN_VERSIONS[-1]

H_SESSION: Final = "mcp-session-id"
H_VERSION: Final = "mcp-protocol-version"
H_METHOD: Final = "mcp-method"
H_NAME: Final = "mcp-name"
H_PARAM_PREFIX: Final = "mcp-param-"

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

# Request methods that exist on the 2026-07-28 wire; anything else is -32601 / HTTP 404 there.
MODERN_METHODS: Final = frozenset(
    {
        "completion/complete",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "server/discover",
        "subscriptions/listen",
        "tools/call",
        "tools/list",
    }
)

# Methods whose name-bearing parameter is mirrored in the Mcp-Name header (2026-07-28).
NAME_PARAM: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_VERSION: Final = -32022
# Gateway-specific (implementation-defined server error range).
BACKEND_UNAVAILABLE: Final = -32010
UNAUTHORIZED: Final = -32011

# JSON-RPC error code -> HTTP status on the 2026-07-28 wire (other codes: 200).
ERROR_HTTP_STATUS: Final = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_VERSION: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    METHOD_NOT_FOUND: 404,
}

dumps = orjson.dumps
loads = orjson.loads


class RPCError(Exception):
    """A JSON-RPC error to return to the caller (code, message, optional data)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def error_message(req_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": req_id, "error": err}


def sse_frame(msg: Any, event_id: str | None = None) -> bytes:
    head = b"event: message\n"
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    return head + b"data: " + dumps(msg) + b"\n\n"
