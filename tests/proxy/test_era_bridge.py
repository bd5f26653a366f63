"""2026-07-28 clients served by the one handshake-era child (`proxy/bridge.py`), against the real
conformance fixture over stdio: discover, the envelope, log levels, subscriptions/listen, and the
InputRequiredResult rounds made from the child's server-to-client requests, hostile retries included.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance import harness
from tests.hostile import MODERN, modern_headers
from tests.proxy.conftest import RunningProxy, running_proxy

ELICITATION_CAPS = {"elicitation": {"form": {}}}
_ids = iter(range(1, 1_000_000))


def envelope(capabilities: dict[str, Any] | None = None, log_level: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
    }
    if log_level is not None:
        meta["io.modelcontextprotocol/logLevel"] = log_level
    return meta


def call(name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    meta = extra.pop("meta", None) or envelope()
    params = {"name": name, "arguments": arguments or {}, "_meta": meta, **extra}
    return {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": params}


async def exchange(proxy: RunningProxy, message: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """POST one 2026-07-28 request; the HTTP status and every message of the answer (SSE or JSON)."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.url, data=orjson.dumps(message), headers=modern_headers(message)) as resp,
    ):
        body = await resp.read()
        if resp.content_type == "application/json":
            return resp.status, [orjson.loads(body)]
        events = [line[5:].strip() for line in body.decode().splitlines() if line.startswith("data:")]
        return resp.status, [orjson.loads(event) for event in events]


def answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    final = messages[-1]
    assert "method" not in final, messages
    return final


@pytest.fixture(scope="module")
async def proxy() -> AsyncIterator[RunningProxy]:
    async with running_proxy(harness.fixture_stdio_command(), modern_era="translate") as running:
        yield running


async def open_round(proxy: RunningProxy, text: str = "Who are you?") -> tuple[dict[str, Any], str, str]:
    """Call the fixture's handshake-era elicitation tool: the answer is an InputRequiredResult."""
    request = call("test_elicitation", {"message": text}, meta=envelope(ELICITATION_CAPS))
    status, messages = await exchange(proxy, request)
    result = answer(messages)["result"]
    assert status == 200 and result["resultType"] == "input_required", messages
    [(key, asked)] = result["inputRequests"].items()
    assert asked["method"] == "elicitation/create" and asked["params"]["message"] == text
    return request, key, result["requestState"]


def retry(request: dict[str, Any], state: Any, responses: Any) -> dict[str, Any]:
    params = {**request["params"], "requestState": state, "inputResponses": responses}
    return {**request, "id": next(_ids), "params": params}


ACCEPT_ADA = {"action": "accept", "content": {"response": "Ada"}}


async def test_one_child_serves_both_eras(proxy: RunningProxy) -> None:
    before = await proxy.child()
    status, messages = await exchange(proxy, call("test_simple_text"))
    result = answer(messages)["result"]
    assert status == 200 and result["resultType"] == "complete"
    assert result["content"][0]["text"] == "This is a simple text response for testing."
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcpfleet-conformance-fixture"
    health = (await proxy.health())[1]
    assert list(health["children"]) == ["handshake"] and (await proxy.child())["pid"] == before["pid"]


async def test_discover_comes_from_the_childs_initialize(proxy: RunningProxy) -> None:
    request = {"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {"_meta": envelope()}}
    status, messages = await exchange(proxy, request)
    result = answer(messages)["result"]
    assert status == 200 and result["supportedVersions"] == [MODERN]
    assert result["serverInfo"]["name"] == "mcpfleet-conformance-fixture"
    assert result["capabilities"]["tools"] is not None and result["cacheScope"] == "private"


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe"])
async def test_methods_removed_at_2026_are_refused(proxy: RunningProxy, method: str) -> None:
    params: dict[str, Any] = {"_meta": envelope(), "level": "debug", "uri": "test://watched-resource"}
    status, messages = await exchange(proxy, {"jsonrpc": "2.0", "id": 3, "method": method, "params": params})
    assert status == 404 and answer(messages)["error"]["code"] == -32601


async def test_log_lines_follow_the_requests_opt_in(proxy: RunningProxy) -> None:
    _, silent = await exchange(proxy, call("test_tool_with_logging"))
    assert [m for m in silent if m.get("method") == "notifications/message"] == []
    _, chatty = await exchange(proxy, call("test_tool_with_logging", meta=envelope(log_level="info")))
    assert len([m for m in chatty if m.get("method") == "notifications/message"]) == 3
    _, above = await exchange(proxy, call("test_tool_with_logging", meta=envelope(log_level="error")))
    assert [m for m in above if m.get("method") == "notifications/message"] == []


STRICT_SERVER = [sys.executable, str(Path(__file__).with_name("handshake_server.py"))]


@pytest.fixture(scope="module")
async def strict() -> AsyncIterator[RunningProxy]:
    """A handshake-only server that refuses the envelope and anything before `initialize`."""
    async with running_proxy(STRICT_SERVER) as running:
        yield running


async def listen_until(
    proxy: RunningProxy, notifications: dict[str, Any], trigger: dict[str, Any], count: int
) -> list[dict[str, Any]]:
    """Open a listen stream, run `trigger` once it is acknowledged, return its first `count` messages."""
    listen = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"_meta": envelope(), "notifications": notifications},
    }
    seen: list[dict[str, Any]] = []
    acknowledged = asyncio.Event()

    async def read_stream() -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.post(proxy.url, data=orjson.dumps(listen), headers=modern_headers(listen)) as resp,
        ):
            async for line in resp.content:
                if line.startswith(b"data:"):
                    seen.append(orjson.loads(line[5:]))
                    acknowledged.set()
                    if len(seen) == count:
                        return

    reader = asyncio.create_task(read_stream())
    await asyncio.wait_for(acknowledged.wait(), 10)
    await exchange(proxy, trigger)
    await asyncio.wait_for(reader, 10)
    return seen


async def test_a_strict_handshake_server_never_sees_the_envelope(strict: RunningProxy) -> None:
    meta = {**envelope(log_level="debug"), "progressToken": "p-1"}
    status, messages = await exchange(strict, call("echo_params", {"a": 1}, meta=meta))
    result = answer(messages)["result"]
    assert status == 200 and result["resultType"] == "complete", messages
    received = orjson.loads(result["content"][0]["text"])
    assert received == {"name": "echo_params", "arguments": {"a": 1}, "_meta": {"progressToken": "p-1"}}
    status, messages = await exchange(
        strict, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope()}}
    )
    listed = answer(messages)["result"]
    assert listed["ttlMs"] == 0 and listed["cacheScope"] == "private" and len(listed["tools"]) == 4


async def test_listen_gets_list_changes_with_its_subscription_id(strict: RunningProxy) -> None:
    ack, changed = await listen_until(strict, {"toolsListChanged": True}, call("change"), 2)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"toolsListChanged": True}
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"


async def test_listen_resource_subscriptions_subscribe_on_the_child(strict: RunningProxy) -> None:
    uri = "mem://watched"
    wanted = {"resourceSubscriptions": [uri], "promptsListChanged": True}
    ack, updated = await listen_until(strict, wanted, call("touch", {"uri": uri}), 2)
    assert ack["params"]["notifications"] == {"promptsListChanged": True, "resourceSubscriptions": [uri]}
    assert updated["method"] == "notifications/resources/updated" and updated["params"]["uri"] == uri
    # The stream ended: the child's subscription is dropped with it.
    for _ in range(50):
        _, messages = await exchange(strict, call("subscriptions"))
        if answer(messages)["result"]["content"][0]["text"] == "[]":
            break
        await asyncio.sleep(0.1)
    assert answer(messages)["result"]["content"][0]["text"] == "[]"


async def test_a_server_request_becomes_an_input_round(proxy: RunningProxy) -> None:
    request, key, state = await open_round(proxy)
    status, messages = await exchange(proxy, retry(request, state, {key: ACCEPT_ADA}))
    final = answer(messages)
    assert status == 200 and final["result"]["resultType"] == "complete", messages
    assert final["result"]["content"][0]["text"] == 'User response: action=accept, content={"response":"Ada"}'
    # The round is used up: the same state again is refused.
    status, messages = await exchange(proxy, retry(request, state, {key: ACCEPT_ADA}))
    assert answer(messages)["error"]["code"] == -32602


async def test_an_undeclared_capability_fails_the_request(proxy: RunningProxy) -> None:
    status, messages = await exchange(proxy, call("test_elicitation", {"message": "?"}))
    error = answer(messages)["error"]
    assert status == 400 and error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {}}}
    # The child's call was cancelled and its request answered: the next call goes through.
    _, messages = await exchange(proxy, call("test_simple_text"))
    assert answer(messages)["result"]["resultType"] == "complete"


async def test_another_clients_round_is_out_of_reach(proxy: RunningProxy) -> None:
    """Client B holds its own round; neither a forged state nor a wrong method reaches A's."""
    request_a, key_a, state_a = await open_round(proxy, "A?")
    request_b, key_b, state_b = await open_round(proxy, "B?")
    forged = [
        state_a[:-1],
        state_a + "x",
        state_a.upper(),
        secrets.token_urlsafe(32),
        "",
        "input-1",
        1,
        [state_a],
    ]
    for state in forged:
        _, messages = await exchange(proxy, retry(request_b, state, {key_a: ACCEPT_ADA}))
        assert answer(messages)["error"]["code"] == -32602, state
    # A's state used for another method (a prompt) is refused and leaves A's round open.
    prompt = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": "prompts/get",
        "params": {"name": "test_simple_prompt", "_meta": envelope(), "requestState": state_a},
    }
    _, messages = await exchange(proxy, prompt)
    assert answer(messages)["error"]["code"] == -32602
    _, messages_b = await exchange(proxy, retry(request_b, state_b, {key_b: ACCEPT_ADA}))
    _, messages_a = await exchange(proxy, retry(request_a, state_a, {key_a: {"action": "decline"}}))
    assert answer(messages_a)["result"]["content"][0]["text"] == "User response: action=decline, content={}"
    assert "Ada" in answer(messages_b)["result"]["content"][0]["text"]


async def test_a_retry_without_the_input_answers_the_child_with_an_error(proxy: RunningProxy) -> None:
    request, _, state = await open_round(proxy)
    status, messages = await exchange(proxy, retry(request, state, {"not-the-key": ACCEPT_ADA}))
    final = answer(messages)
    assert status == 200, messages
    assert "Elicitation not supported or error" in final["result"]["content"][0]["text"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=60),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=json_values, responses=json_values)
async def test_forged_retries_never_resolve_a_round(proxy: RunningProxy, state: Any, responses: Any) -> None:
    """Whatever a client sends as requestState / inputResponses, it gets a JSON-RPC error naming
    the field (never a 5xx), and no parked round is consumed."""
    rounds = proxy.app.bridges
    before = sum(bridge.open_rounds() for bridge in rounds.values())
    status, messages = await exchange(
        proxy, retry(call("test_elicitation", {"message": "?"}), state, responses)
    )
    final = answer(messages)
    assert status < 500 and "error" in final, messages
    if state is not None:
        assert final["error"]["code"] == -32602 and "requestState" in final["error"]["message"]
    assert sum(bridge.open_rounds() for bridge in rounds.values()) == before


async def test_a_2026_only_server_is_relayed_to_untranslated() -> None:
    """A child that refuses `initialize` as a 2026-07-28-only server gets the requests as they are,
    on the one process (its own caching hints survive)."""
    command = [sys.executable, str(Path(__file__).with_name("modern_only_server.py"))]
    async with running_proxy(command, modern_era="translate") as modern_only:
        status, messages = await exchange(modern_only, call("where"))
        assert status == 200 and answer(messages)["result"]["content"][0]["text"] == "served at 2026-07-28"
        listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": envelope()}}
        _, messages = await exchange(modern_only, listed)
        assert answer(messages)["result"]["cacheScope"] == "public"
        health = (await modern_only.health())[1]
        assert list(health["children"]) == ["handshake"]
