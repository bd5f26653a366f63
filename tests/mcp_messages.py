"""MCP messages and headers that raw-HTTP tests send, written once."""

from __future__ import annotations

from typing import Any

STREAMABLE_HTTP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}


def initialize_request(protocol_version: str = "2025-11-25", request_id: int = 1) -> dict[str, Any]:
    """A fresh `initialize` request (a new dict each call, so a test may change it freely)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": protocol_version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
