"""A stdio server's answer nested too deep to relay is a JSON-RPC error naming it (issue 27, defect 4).

Before: orjson reads 1,024 levels but writes only 255. Behind the proxy, a server answer nested
300 levels was a 500 on the 2026-07-28 `tools/list` with an authorization config (the list is
re-encoded after filtering) and an empty 200 on the 2025 path. Now every message a stdio server
writes is checked as it is read: a response too deep becomes an error naming the server, in both
eras, with or without authorization, for lists, calls, prompts and resources.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcpfleet.jsonrpc import MAX_ANSWER_DEPTH
from mcpfleet.policy.config import parse_document
from mcpfleet.policy.engine import PolicyEngine
from mcpfleet.policy.guard import Policy
from mcpfleet.proxy.serve import build_stdio_app, with_auth
from tests.hostile import (
    LEGACY,
    META,
    MODERN,
    TEST_LIMITS,
    ThreadServers,
    error_log,
    legacy_headers,
    modern_headers,
    open_session,
    post,
)

SERVER = [sys.executable, str(Path(__file__).with_name("deep_server.py"))]
POLICIES = [
    'permit(principal, action == Action::"call_tool", resource == Tool::"t");',
    'permit(principal, action == Action::"get_prompt", resource == Prompt::"p");',
    'permit(principal, action == Action::"read_resource", resource == Resource::"mem://r");',
]
REQUESTS = [
    ("tools/list", {}),
    ("tools/call", {"name": "t", "arguments": {}}),
    ("prompts/get", {"name": "p"}),
    ("resources/read", {"uri": "mem://r"}),
    ("prompts/list", {}),
    ("resources/list", {}),
]


def _start(authz: bool) -> tuple[ThreadServers, str]:
    servers = ThreadServers()
    app: Any = build_stdio_app(SERVER, host="127.0.0.1")
    if authz:
        doc = {"version": "1.0", "type": "cedarv1", "cedar": {"policies": POLICIES}}
        app = with_auth(app, None, policy=Policy(engine=PolicyEngine(parse_document(doc, "test"))))
    base = servers.add(app, TEST_LIMITS)
    servers.start()
    return servers, base


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "authz"])
def proxy(request: pytest.FixtureRequest) -> Iterator[str]:
    servers, base = _start(request.param)
    try:
        yield base
    finally:
        servers.stop()


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize(("method", "params"), REQUESTS, ids=[m for m, _ in REQUESTS])
def test_deep_server_answers_are_errors_naming_the_server(
    proxy: str, era: str, method: str, params: dict[str, Any]
) -> None:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": 5, "method": method, "params": dict(params)}
    if era == MODERN:
        msg["params"]["_meta"] = META
        headers = modern_headers(msg)
    else:
        headers = legacy_headers(open_session(proxy))
    with error_log() as log:
        reply = post(proxy, orjson.dumps(msg), headers, until=b'"id":5')
    assert reply.status == 200, (reply.status, reply.body[:300])
    (answer,) = [m for m in reply.messages() if isinstance(m, dict) and m.get("id") == 5]
    assert answer["error"]["code"] == -32603, answer
    text = answer["error"]["message"]
    assert "sent an invalid answer" in text and f"nested deeper than {MAX_ANSWER_DEPTH} levels" in text, text
    assert "server '" in text, text  # names the server
    assert not log.tracebacks()


def test_a_malformed_tools_list_does_not_break_param_header_checks() -> None:
    """The 2026-07-28 `Mcp-Param-*` check reads the server's tools/list; `{"tools": 5}` was a
    TypeError (a 500) on every tools/call with arguments. Now: no schemas, the call is relayed."""
    servers = ThreadServers()
    app = build_stdio_app(SERVER, host="127.0.0.1", env={**os.environ, "DEEP_SERVER_TOOLS": "not-a-list"})
    base = servers.add(app, TEST_LIMITS)
    servers.start()
    try:
        msg = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "t", "arguments": {"a": 1}, "_meta": META},
        }
        with error_log() as log:
            reply = post(base, orjson.dumps(msg), modern_headers(msg), until=b'"id":5')
        assert reply.status == 200, (reply.status, reply.body[:300])
        (answer,) = [m for m in reply.messages() if isinstance(m, dict) and m.get("id") == 5]
        assert "nested deeper" in answer["error"]["message"]  # the server's own (deep) call answer
        assert not log.tracebacks()
    finally:
        servers.stop()
