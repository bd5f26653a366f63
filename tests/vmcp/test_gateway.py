"""End-to-end: SDK clients of both eras -> vMCP -> real SDK / JSON-RPC backends (all over HTTP)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from mcp.client.client import Client

from mcpfleet.vmcp.aggregate import ConflictError
from mcpfleet.vmcp.backends import BackendSpec, QueueBackendSource, StaticBackendSource
from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.gateway import Gateway
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served, sdk_backend

MODES = ["legacy", "2026-07-28"]


def two(a: Served, b: Served, **extra: Any) -> dict[str, Any]:
    return {
        "name": "test",
        "backends": [{"name": "alpha", "url": a.url}, {"name": "beta", "url": b.url}],
        **extra,
    }


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize("mode", MODES)
async def test_prefix_strategy_lists_and_routes(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, mode: str
) -> None:
    gw = await gateway(two(*alpha_beta))
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"alpha_echo", "beta_echo", "alpha_alpha_only", "beta_beta_only"} <= names
        assert "echo" not in names
        assert text(await c.call_tool("alpha_echo", {"text": "x"})) == "alpha:x"
        assert text(await c.call_tool("beta_echo", {"text": "y"})) == "beta:y"
        # Prompts are merged with the same strategy and routed back to the original name.
        prompts = {p.name for p in (await c.list_prompts()).prompts}
        assert {"alpha_greet", "beta_greet"} <= prompts
        got = await c.get_prompt("beta_greet", {"who": "Ann"})
        assert "Hello Ann from beta" in json.dumps(got.model_dump(mode="json"))
        # Resources and templates are merged; reads route by URI.
        uris = {str(r.uri) for r in (await c.list_resources()).resources}
        assert {"mem://alpha/info", "mem://beta/info"} <= uris
        templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
        assert "mem://beta/items/{item}" in templates
        read = await c.read_resource("mem://beta/items/42")
        assert "beta item 42" in json.dumps(read.model_dump(mode="json"))
        # A tool error stays a tool error.
        failed = await c.call_tool("alpha_fail", {"message": "nope"})
        assert failed.is_error and "nope" in text(failed)


async def test_priority_strategy_keeps_names_and_prefixes_unlisted(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, served: Any
) -> None:
    a, b = alpha_beta
    g = await served(sdk_backend("gamma").streamable_http_app())
    cfg = two(
        a,
        b,
        aggregation={
            "conflictResolution": "priority",
            "conflictResolutionConfig": {"priorityOrder": ["beta", "alpha"]},
        },
    )
    cfg["backends"].append({"name": "gamma", "url": g.url})
    gw = await gateway(cfg)
    async with Client(gw.url, mode="legacy") as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "echo" in names and "alpha_echo" not in names and "beta_echo" not in names
        assert "gamma_echo" in names  # unlisted backend: prefixed
        assert "alpha_only" in names and "gamma_only" in names  # no conflict: name kept
        assert text(await c.call_tool("echo", {"text": "p"})) == "beta:p"
        assert text(await c.call_tool("gamma_echo", {"text": "q"})) == "gamma:q"


async def test_manual_strategy_fails_start_listing_conflicts(alpha_beta: tuple[Served, Served]) -> None:
    a, b = alpha_beta
    cfg = parse_config(two(a, b, aggregation={"conflictResolution": "manual"}))
    gw = Gateway(cfg, StaticBackendSource([BackendSpec("alpha", a.url), BackendSpec("beta", b.url)]))
    with pytest.raises(ConflictError) as err:
        await gw.start()
    msg = str(err.value)
    for name in ("'echo'", "'upper'", "'fail'", "'slow'", "'grow'"):
        assert name in msg
    assert "alpha" in msg and "beta" in msg


async def test_manual_strategy_with_overrides_and_filters(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    a, b = alpha_beta
    overrides = {
        "echo": {"name": "echo_b", "description": "Beta's echo"},
        "upper": {"name": "upper_b"},
        "fail": {"name": "fail_b"},
        "slow": {"name": "slow_b"},
        "grow": {"name": "grow_b"},
    }
    cfg = two(
        a,
        b,
        aggregation={
            "conflictResolution": "manual",
            "tools": [
                {"workload": "beta", "overrides": overrides},
                {"workload": "alpha", "filter": ["echo", "alpha_only"]},
            ],
        },
    )
    gw = await gateway(cfg)
    async with Client(gw.url, mode="legacy") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert {"echo", "alpha_only", "echo_b", "upper_b", "beta_only"} <= set(tools)
        assert "upper" not in tools  # alpha's upper is filtered out (hidden)
        assert tools["echo_b"].description == "Beta's echo"
        assert text(await c.call_tool("echo_b", {"text": "m"})) == "beta:m"
        assert text(await c.call_tool("echo", {"text": "m"})) == "alpha:m"
        hidden = await c.call_tool("upper", {"text": "m"})
        assert hidden.is_error  # hidden tools are not callable by clients


async def test_tool_config_ref_and_exclude_all(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    a, b = alpha_beta
    cfg = two(
        a,
        b,
        toolConfigs={"only-upper": {"toolsFilter": ["upper"], "toolsOverride": {"upper": {"name": "shout"}}}},
        aggregation={
            "conflictResolution": "priority",
            "conflictResolutionConfig": {"priorityOrder": ["alpha"]},
            "tools": [
                {"workload": "alpha", "toolConfigRef": {"name": "only-upper"}},
                {"workload": "beta", "excludeAll": True},
            ],
        },
    )
    gw = await gateway(cfg)
    async with Client(gw.url, mode="legacy") as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names == {"shout"}
        assert text(await c.call_tool("shout", {"text": "hey"})) == "HEY"


async def test_default_tool_visibility_deny(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    cfg = two(
        *alpha_beta,
        aggregation={"defaultToolVisibility": "deny", "tools": [{"workload": "beta", "filter": ["upper"]}]},
        compositeTools=[
            {"name": "via_alpha", "steps": [{"id": "s", "tool": "alpha.echo", "arguments": {"text": "x"}}]}
        ],
    )
    gw = await gateway(cfg)
    async with Client(gw.url, mode="legacy") as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names == {"beta_upper", "via_alpha"}  # alpha has no tools entry: none of its tools shown
        assert (await c.call_tool("alpha_echo", {"text": "m"})).is_error
        assert "alpha:x" in text(await c.call_tool("via_alpha", {}))  # ... but composite steps reach them


async def test_failing_list_call_keeps_other_capabilities(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, served: Any
) -> None:
    a, _ = alpha_beta
    broken = JsonRpcBackend("broken", tools=["lonely"], fail_prompts_list=True)
    s = await served(broken)
    gw = await gateway({"backends": [{"name": "alpha", "url": a.url}, {"name": "broken", "url": s.url}]})
    async with Client(gw.url, mode="legacy") as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "broken_lonely" in names and "alpha_echo" in names
        assert "broken:lonely" in text(await c.call_tool("broken_lonely", {"a": 1}))
    async with aiohttp.ClientSession() as h, h.get(gw.base + "/status") as r:
        st = await r.json()
    b = next(x for x in st["backends"] if x["name"] == "broken")
    assert b["state"] == "ready" and "prompts/list" in b["listErrors"]
    assert b["counts"]["tools"] == 1


async def test_upstream_connection_is_reused(gateway: GatewayFactory, served: Any) -> None:
    be = JsonRpcBackend("solo")
    s = await served(be)
    gw = await gateway({"backends": [{"name": "solo", "url": s.url}]})
    async with Client(gw.url, mode="legacy") as c:
        for i in range(5):
            await c.call_tool("solo_echo", {"i": i})
    async with Client(gw.url, mode="2026-07-28") as c:
        await c.call_tool("solo_echo", {"i": 9})
    assert be.calls["initialize"] == 1  # one upstream handshake for every client and call
    assert be.calls["tools/call"] == 6


@pytest.mark.parametrize("mode", MODES)
async def test_backends_of_each_era_serve_clients_of_each_era(
    gateway: GatewayFactory, served: Any, mode: str
) -> None:
    old = JsonRpcBackend("old", tools=["ping_old"])  # 2025-11-25 only (initialize + Mcp-Session-Id)
    new = JsonRpcBackend("new", tools=["ping_new"], modern_only=True)  # 2026-07-28 only (sessionless)
    so, sn = await served(old), await served(new)
    gw = await gateway({"backends": [{"name": "old", "url": so.url}, {"name": "new", "url": sn.url}]})
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        assert {t.name for t in (await c.list_tools()).tools} == {"old_ping_old", "new_ping_new"}
        assert text(await c.call_tool("old_ping_old", {"v": 1})).startswith("old:ping_old")
        assert text(await c.call_tool("new_ping_new", {"v": 2})).startswith("new:ping_new")
    # One initialize probe at connect (refused with -32022), then everything sessionless.
    assert new.calls.get("initialize", 0) <= 1 and new.calls["server/discover"] >= 1
    assert old.calls["initialize"] == 1
    assert "mcp-session-id" not in new.headers_by_method["tools/call"]
    assert old.headers_by_method["tools/call"]["mcp-session-id"] == "s-old"


async def _next_notification(
    resp: aiohttp.ClientResponse, method: str, time_limit: float = 5.0
) -> dict[str, Any]:
    async def scan() -> dict[str, Any]:
        buf = b""
        async for chunk in resp.content.iter_any():
            buf += chunk
            while b"\n\n" in buf:
                frame, buf = buf.split(b"\n\n", 1)
                for line in frame.split(b"\n"):
                    if line.startswith(b"data:"):
                        msg = json.loads(line[5:])
                        if msg.get("method") == method:
                            return msg  # type: ignore[no-any-return]
        raise AssertionError("stream ended")

    return await asyncio.wait_for(scan(), time_limit)


async def test_list_changed_reaches_clients_of_both_eras(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    gw = await gateway(two(*alpha_beta))
    hdr = dict(STREAMABLE_HTTP_HEADERS)
    async with aiohttp.ClientSession() as h:
        init = initialize_request()
        async with h.post(gw.url, json=init, headers=hdr) as r:
            sid = r.headers["mcp-session-id"]
        get_stream = await h.get(
            gw.url,
            headers={
                "accept": "text/event-stream",
                "mcp-session-id": sid,
                "mcp-protocol-version": "2025-11-25",
            },
        )
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        listen = {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
        }
        listen_stream = await h.post(
            gw.url,
            json=listen,
            headers={**hdr, "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"},
        )
        ack = await _next_notification(listen_stream, "notifications/subscriptions/acknowledged")
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        async with Client(gw.url, mode="legacy") as c:
            assert "beta_fresh" not in {t.name for t in (await c.list_tools()).tools}
            await c.call_tool("beta_grow", {"tool": "fresh"})
            legacy_note = await _next_notification(get_stream, "notifications/tools/list_changed")
            modern_note = await _next_notification(listen_stream, "notifications/tools/list_changed")
            assert modern_note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 77
            assert legacy_note["method"] == "notifications/tools/list_changed"
            # The cached list was invalidated: the new tool is listed and callable.
            assert "beta_fresh" in {t.name for t in (await c.list_tools()).tools}
            assert text(await c.call_tool("beta_fresh", {})) == "grown"
        get_stream.close()
        listen_stream.close()


async def test_backend_set_changes_live(alpha_beta: tuple[Served, Served], served: Any) -> None:
    a, b = alpha_beta
    source = QueueBackendSource([BackendSpec("alpha", a.url)])
    cfg = parse_config({"name": "live"})
    gw = Gateway(cfg, source)
    from mcpfleet.vmcp.app import VMCPApp

    s = await served(VMCPApp(gw))
    async with Client(s.url, mode="legacy") as c:
        assert "alpha_echo" in {t.name for t in (await c.list_tools()).tools}
        source.push([BackendSpec("alpha", a.url), BackendSpec("beta", b.url)])
        for _ in range(100):
            if "beta_echo" in {t.name for t in (await c.list_tools()).tools}:
                break
            await asyncio.sleep(0.05)
        assert text(await c.call_tool("beta_echo", {"text": "z"})) == "beta:z"
        # URL change: "alpha" now points at beta's server.
        source.push([BackendSpec("alpha", b.url)])
        for _ in range(100):
            names = {t.name for t in (await c.list_tools()).tools}
            if "beta_echo" not in names and "alpha_beta_only" in names:
                break
            await asyncio.sleep(0.05)
        assert text(await c.call_tool("alpha_echo", {"text": "z"})) == "beta:z"
        assert set(gw.backends) == {"alpha"}
    await gw.stop()


class _HeldDiscover:
    """An ASGI wrapper holding every 2026-era `server/discover` until `release` is set (a stdio
    proxy starting its 2026-era server takes seconds to answer the first one)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.release = asyncio.Event()
        self.held = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b'"server/discover"' in body:
            self.held += 1
            await self.release.wait()
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def test_a_backend_joining_a_serving_gateway_is_published_on_its_2025_session_first(
    served: Any,
) -> None:
    """A backend that joins while the gateway serves is listed and reported as soon as its
    2025-era session is connected; its slow 2026-era probe does not hold that up, and its lists
    in that era follow once it answers."""
    held = _HeldDiscover(sdk_backend("beta").streamable_http_app())
    a = await served(sdk_backend("alpha").streamable_http_app())
    b = await served(held)
    source = QueueBackendSource([BackendSpec("alpha", a.url)])
    gw = Gateway(parse_config({"name": "live"}), source)
    await gw.start()
    try:
        source.push([BackendSpec("alpha", a.url), BackendSpec("beta", b.url)])

        def beta() -> dict[str, Any] | None:
            return next((x for x in gw.status()["backends"] if x["name"] == "beta"), None)

        for _ in range(200):
            if (x := beta()) is not None and x["connected"] and held.held:
                break  # connected, and its 2026-era probe is waiting for an answer
            await asyncio.sleep(0.05)
        reported = beta()
        assert reported is not None and reported["connected"] and reported["state"] == "ready"
        assert reported["protocolEras"] == ["2025-11-25"] and held.held == 1
        # Listed in both eras' aggregates meanwhile (the 2026 era served through the 2025 session).
        for era in ("legacy", "modern"):
            assert "beta_echo" in {t["name"] for t in gw.aggs[era].tools}, era
        held.release.set()
        for _ in range(200):
            if (x := beta()) is not None and len(x["protocolEras"]) == 2:
                break
            await asyncio.sleep(0.05)
        assert beta()["protocolEras"] == ["2025-11-25", "2026-07-28"]  # type: ignore[index]
        assert gw.backends["beta"].lists.get("modern") is not None
        assert "beta_echo" in {t["name"] for t in gw.aggs["modern"].tools}
    finally:
        held.release.set()
        await gw.stop()


async def test_composite_tool_dag(alpha_beta: tuple[Served, Served], gateway: GatewayFactory) -> None:
    composite = {
        "name": "shout_both",
        "description": "Upper-case with alpha, echo through both, in parallel where possible",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}, "skip": {"type": "boolean", "default": False}},
        },
        "steps": [
            {"id": "up", "tool": "alpha.upper", "arguments": {"text": "{{.params.text}}"}},
            {
                "id": "a",
                "tool": "alpha.echo",
                "arguments": {"text": "{{.steps.up.output.result}}"},
                "dependsOn": ["up"],
            },
            {
                "id": "b",
                "tool": "beta.echo",
                "arguments": {"text": "{{.steps.up.output.result}}!"},
                "dependsOn": ["up"],
            },
            {
                "id": "maybe",
                "tool": "beta.echo",
                "arguments": {"text": "never"},
                "condition": "{{.params.skip}}",
                "defaultResults": {"result": "skipped"},
            },
            {
                "id": "bad",
                "tool": "alpha.fail",
                "onError": {"action": "continue"},
                "defaultResults": {"result": "fallback"},
            },
        ],
        "output": {
            "properties": {
                "a": {"type": "string", "value": "{{.steps.a.output.result}}"},
                "b": {"type": "string", "value": "{{.steps.b.output.result}}"},
                "maybe": {"type": "string", "value": "{{.steps.maybe.output.result}}"},
                "bad": {"type": "string", "value": "{{.steps.bad.output.result}}"},
            }
        },
    }
    cfg = two(
        *alpha_beta,
        compositeTools=[composite],
        aggregation={"tools": [{"workload": "alpha", "excludeAll": True}]},
    )
    gw = await gateway(cfg)
    async with Client(gw.url, mode="legacy") as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "shout_both" in names and not any(n.startswith("alpha_") for n in names)
        res = await c.call_tool("shout_both", {"text": "hi"})
        assert not res.is_error, text(res)
        assert res.structured_content == {
            "a": "alpha:HI",
            "b": "beta:HI!",
            "maybe": "skipped",
            "bad": "fallback",
        }


async def test_composite_parallel_abort_and_timeout(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    composites = [
        {
            "name": "two_slow",
            "steps": [
                {"id": "s1", "tool": "alpha.slow", "arguments": {"seconds": 0.6}},
                {"id": "s2", "tool": "beta.slow", "arguments": {"seconds": 0.6}},
            ],
        },
        {
            "name": "aborts",
            "steps": [
                {"id": "x", "tool": "alpha.fail", "arguments": {"message": "kaput"}},
                {"id": "y", "tool": "beta.echo", "arguments": {"text": "after"}, "dependsOn": ["x"]},
            ],
        },
        {
            "name": "too_slow",
            "timeout": "200ms",
            "steps": [{"id": "s", "tool": "alpha.slow", "arguments": {"seconds": 2}}],
        },
        {
            "name": "retries",
            "steps": [
                {
                    "id": "r",
                    "tool": "alpha.fail",
                    "onError": {"action": "retry", "retryCount": 2, "retryDelay": "10ms"},
                }
            ],
        },
    ]
    gw = await gateway(two(*alpha_beta, compositeTools=composites))
    async with Client(gw.url, mode="2026-07-28") as c:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        res = await c.call_tool("two_slow", {})
        assert not res.is_error and loop.time() - t0 < 1.1  # the two 0.6 s steps overlapped
        aborted = await c.call_tool("aborts", {})
        assert aborted.is_error and "kaput" in text(aborted)
        slow = await c.call_tool("too_slow", {})
        assert slow.is_error and "timed out" in text(slow)
        retried = await c.call_tool("retries", {})
        assert retried.is_error
    assert gw.app.gateway.metrics.child("alpha", "tools/call")._err._value.get() >= 0  # type: ignore[attr-defined]


async def test_composite_for_each_and_structured_output(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    """forEach steps (ToolHive's shape) and the typed `output`: the tool advertises an outputSchema and
    answers structuredContent that the SDK client validates against it."""
    loop = {
        "name": "shout_all",
        "parameters": {
            "type": "object",
            "properties": {"words": {"type": "array", "items": {"type": "string"}}},
        },
        "steps": [
            {
                "id": "loop",
                "type": "forEach",
                "collection": "{{.params.words}}",
                "itemVar": "w",
                "maxParallel": 2,
                "step": {"tool": "alpha.upper", "arguments": {"text": "{{.forEach.w}}-{{.forEach.index}}"}},
            }
        ],
        "output": {
            "properties": {
                "count": {"type": "integer", "value": "{{.steps.loop.output.count}}", "description": "items"},
                "first": {"type": "string", "value": "{{.steps.loop.output.iterations.0.output.text}}"},
                "all": {"type": "array", "value": "{{.steps.loop.output.iterations}}"},
                "summary": {
                    "type": "object",
                    "properties": {"failed": {"type": "integer", "value": "{{.steps.loop.output.failed}}"}},
                },
                "absent": {"type": "string", "value": "{{.steps.loop.output.nothing}}"},
            },
            "required": ["count", "first"],
        },
    }
    slow = {
        "name": "slow_all",
        "steps": [
            {
                "id": "loop",
                "type": "forEach",
                "collection": "[0.3, 0.3, 0.3, 0.3]",
                "maxParallel": 2,
                "step": {"tool": "alpha.slow", "arguments": {"seconds": "{{.forEach.item}}"}},
            }
        ],
    }
    failing = {
        "name": "fail_all",
        "steps": [
            {
                "id": "loop",
                "type": "forEach",
                "collection": '["x", "y"]',
                "step": {"tool": "alpha.fail", "arguments": {"message": "no {{.forEach.item}}"}},
            }
        ],
    }
    tolerant = {
        "name": "fail_tolerated",
        "steps": [{**failing["steps"][0], "onError": {"action": "continue"}}],  # type: ignore[index]
        "output": {"properties": {"failed": {"type": "integer", "value": "{{.steps.loop.output.failed}}"}}},
    }
    too_many = {
        "name": "too_many",
        "steps": [{**failing["steps"][0], "collection": "[1, 2, 3]", "maxIterations": 2}],  # type: ignore[index]
    }
    gw = await gateway(two(*alpha_beta, compositeTools=[loop, slow, failing, tolerant, too_many]))
    async with Client(gw.url, mode="legacy") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        schema = tools["shout_all"].output_schema
        assert schema is not None and schema["required"] == ["count", "first"]
        assert schema["properties"]["count"] == {"type": "integer", "description": "items"}
        assert schema["properties"]["summary"]["properties"] == {"failed": {"type": "integer"}}
        assert tools["slow_all"].output_schema is None

        res = await c.call_tool("shout_all", {"words": ["a", "b", "c"]})
        assert not res.is_error, text(res)
        out = res.structured_content
        assert out is not None
        assert out["count"] == 3 and out["first"] == "A-0" and out["summary"] == {"failed": 0}
        assert [i["output"]["text"] for i in out["all"]] == ["A-0", "B-1", "C-2"]
        assert "absent" not in out  # rendered no value, not required: left out

        started = asyncio.get_running_loop().time()
        assert not (await c.call_tool("slow_all", {})).is_error
        assert asyncio.get_running_loop().time() - started >= 0.55  # 4 items, 2 at a time: two rounds

        failed = await c.call_tool("fail_all", {})
        assert failed.is_error and "2 of 2 items failed" in text(failed) and "no x" in text(failed)
        tolerated = await c.call_tool("fail_tolerated", {})
        assert not tolerated.is_error and tolerated.structured_content == {"failed": 2}
        refused = await c.call_tool("too_many", {})
        assert refused.is_error and "more than maxIterations 2" in text(refused)
