"""MCP messages and headers that raw-HTTP tests send, and the reading of their answers, written once."""

from __future__ import annotations

import json
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


def answer_message(text: str) -> Any:
    """The JSON-RPC message of a POST's answer body: the body itself when it is JSON, else the data
    of its first SSE `data:` line (an answer of one event, as the gateway sends)."""
    if not text.lstrip().startswith("{"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)
