"""The MCP wire pieces the benchmark scripts send and read, written once: the `initialize` request
and the JSON-RPC response in the body of a streamable-HTTP POST's answer, which a server may send
as plain JSON or as an SSE stream (text/event-stream).

Standard library only: the scripts of bench/ run standalone (`python -P bench/X.py`) and import
this file by appending bench/ to sys.path, never through the test tree or the mcpfleet package.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

Loads = Callable[[bytes], Any]
"""A JSON parser of bytes (json.loads by default; a script may pass a faster one such as orjson's)."""

# An SSE stream begins with a field (`event:`, `data:`, `id:`, `retry:`) or a comment (`:`); JSON
# never does, so the body alone tells the two apart (a caller need not have the content type).
_SSE_START = re.compile(rb"\s*(?:event|data|id|retry)?:")


def initialize_params(protocol_version: str, client_name: str) -> dict[str, Any]:
    """The params of an `initialize` request: no capabilities, client `client_name` version 1."""
    return {
        "protocolVersion": protocol_version,
        "capabilities": {},
        "clientInfo": {"name": client_name, "version": "1"},
    }


def initialize_request(protocol_version: str, client_name: str, request_id: int = 1) -> dict[str, Any]:
    """A fresh `initialize` JSON-RPC request (a new dict each call)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": initialize_params(protocol_version, client_name),
    }


def sse_data(body: bytes) -> Iterator[bytes]:
    """The data of each event of an SSE body, in order: its `data:` lines joined by newlines, one
    leading space of each dropped, as the SSE spec says; events without data are skipped. A last
    event with no blank line after it counts too: a benchmark reads whole bodies, not live streams."""
    data: list[bytes] = []
    for line in body.splitlines():  # bytes.splitlines: CRLF, LF or CR, as SSE allows
        if not line:
            if data:
                yield b"\n".join(data)
                data = []
        elif line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b"data: ") else line[5:])
    if data:
        yield b"\n".join(data)


def _response(body: bytes, loads: Loads) -> tuple[bytes, Any] | None:
    """(JSON text, parsed message) of the JSON-RPC response in a POST answer's body, if any."""
    if body.startswith(b"{") or not _SSE_START.match(body):
        return (body, loads(body)) if body.strip() else None
    for data in sse_data(body):
        if not data or data.isspace():
            continue
        message = loads(data)
        # A stream may carry the server's own requests and notifications before the response.
        if isinstance(message, dict) and "id" in message and "method" not in message:
            return data, message
    return None


def response_json(body: bytes, loads: Loads = json.loads) -> bytes | None:
    """The JSON text of the JSON-RPC response in a streamable-HTTP POST answer's body: the body
    itself when it is JSON, else the data of the first SSE event that is a response (not a request
    or notification of the server's); None for an empty body (an accepted notification) or a stream
    without a response. `loads` parses the candidates of a stream."""
    found = _response(body, loads)
    return None if found is None else found[0]


def response_message(body: bytes, loads: Loads = json.loads) -> Any:
    """The JSON-RPC response in a streamable-HTTP POST answer's body, parsed by `loads`; None where
    `response_json` is None."""
    found = _response(body, loads)
    return None if found is None else found[1]
