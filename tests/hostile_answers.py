"""Hostile *server answers* for the hostile suites of the gateway and the proxy (issue 27, defect 4).

The other hostile suites (tests/hostile.py) attack a service from the client side; these attack it
from behind: the answer a backend (gateway) or stdio server (proxy) sends to a request the service
relays. `ANSWER_CORPUS` holds hand-written hostile answers; `hostile_answers()` generates them
(nesting from 0 to 400 levels wherever a value may sit, and malformed `error` members). The property
both services must keep: the client gets a JSON-RPC answer to its request (never a 5xx or a
traceback), and an answer nested deeper than `MAX_ANSWER_DEPTH` is an error naming the server.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from mcpfleet.jsonrpc import MAX_ANSWER_DEPTH
from tests.hostile import json_values, nested

# (name, message members besides jsonrpc / id, kind): "deep" answers must become an error naming the
# server; "malformed" ones (no object result, or an `error` that is no JSON-RPC error object) an
# error saying the server sent an invalid answer, as a client's SDK could not read them (it would
# wait for an answer until it gives up); "ok" ones are relayed.
ANSWER_CORPUS: list[tuple[str, dict[str, Any], str]] = [
    ("deep result", {"result": {"content": [], "structuredContent": nested(300)}}, "deep"),
    ("deep result at 255", {"result": {"content": [], "x": nested(255)}}, "deep"),
    ("result at the bound", {"result": {"x": nested(MAX_ANSWER_DEPTH - 3)}}, "ok"),
    ("deep error data", {"error": {"code": -32000, "message": "m", "data": nested(300)}}, "deep"),
    ("deep error message", {"error": {"code": -32000, "message": nested(300)}}, "deep"),
    ("error is a string", {"error": "boom"}, "malformed"),
    ("error is a list", {"error": [1, 2]}, "malformed"),
    ("error code is a string", {"error": {"code": "x", "message": "m"}}, "malformed"),
    ("error code is a float", {"error": {"code": 1.5, "message": "m"}}, "malformed"),
    ("error code beyond 64 bits", {"error": {"code": 10**30, "message": "m"}}, "malformed"),
    ("result is a list", {"result": [1, 2]}, "malformed"),
    ("result is null", {"result": None}, "malformed"),
    ("no result, no error", {}, "malformed"),
    ("a result and a deep error", {"result": {}, "error": {"code": 1, "message": nested(300)}}, "deep"),
]


def answer_depth(members: dict[str, Any]) -> int:
    """Nesting levels of the whole message (the message object itself is level 1)."""
    depth, stack = 1, [(v, 2) for v in members.values()]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            depth = max(depth, level)
            stack.extend((v, level + 1) for v in (value.values() if isinstance(value, dict) else value))
    return depth


def _wrap(value: Any, depth: int, as_list: bool) -> Any:
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


@st.composite
def hostile_answers(draw: st.DrawFn) -> dict[str, Any]:
    """The members (besides jsonrpc / id) of one generated server answer."""
    depth = draw(st.one_of(st.integers(0, 400), st.integers(MAX_ANSWER_DEPTH - 4, MAX_ANSWER_DEPTH + 4)))
    value = _wrap(draw(json_values), depth, draw(st.booleans()))
    where = draw(st.sampled_from(["result", "structured", "error-data", "error-message", "error-shape"]))
    if where == "result":
        return {"result": value if isinstance(value, dict) else {"v": value}}
    if where == "structured":
        return {"result": {"content": [], "structuredContent": {"v": value}}}
    if where == "error-data":
        return {"error": {"code": draw(st.integers(-32768, 32767)), "message": "m", "data": value}}
    if where == "error-message":
        return {"error": {"code": -32000, "message": value}}
    return {"error": value}
