"""The optimizer (find_tool / call_tool) and code mode (execute_tool_script) through the gateway,
with the MCP SDK client of both protocol eras against real SDK backends over HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from mcpfleet.vmcp.hashembed import create_app as embeddings_app
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import Served

MODES = ["legacy", "2026-07-28"]


def config(a: Served, b: Served, **extra: Any) -> dict[str, Any]:
    return {
        "name": "opt",
        "backends": [{"name": "alpha", "url": a.url}, {"name": "beta", "url": b.url}],
        **extra,
    }


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def found(c: Client, description: str, keywords: Any = None) -> list[str]:
    args: dict[str, Any] = {"tool_description": description}
    if keywords is not None:
        args["tool_keywords"] = keywords
    res = await c.call_tool("find_tool", args)
    assert not res.is_error, text(res)
    tools = res.structured_content["tools"]
    assert all("inputSchema" in t and "description" in t for t in tools)
    return [t["name"] for t in tools]


@pytest.mark.parametrize("mode", MODES)
async def test_find_and_call_in_both_eras(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, mode: str
) -> None:
    gw = await gateway(config(*alpha_beta, optimizer={"maxToolsToReturn": 3}))
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        # Only the meta-tools are advertised.
        assert {t.name for t in (await c.list_tools()).tools} == {"find_tool", "call_tool"}
        names = await found(c, "convert text to upper case")
        assert names[0] in ("alpha_upper", "beta_upper") and len(names) <= 3
        names = await found(c, "a tool only beta has", keywords=["beta"])
        assert names[0] == "beta_beta_only"
        res = await c.call_tool("call_tool", {"tool_name": "alpha_upper", "parameters": {"text": "abc"}})
        assert text(res) == "ABC"
        # A tool error stays a tool error through call_tool; an unknown tool is one too.
        res = await c.call_tool("call_tool", {"tool_name": "alpha_fail", "parameters": {"message": "nope"}})
        assert res.is_error and "nope" in text(res)
        res = await c.call_tool("call_tool", {"tool_name": "no_such_tool"})
        assert res.is_error and "Unknown tool" in text(res)


async def test_filters_overrides_and_authorization_hide_tools(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    aggregation = {
        "tools": [
            {
                "workload": "alpha",
                "filter": ["echo", "upper"],
                "overrides": {"upper": {"name": "shout", "description": "Shout the words loudly"}},
            },
        ]
    }
    gw = await gateway(config(*alpha_beta, aggregation=aggregation, optimizer={}))
    async with Client(gw.url, mode="legacy") as c:
        names = await found(c, "shout words loudly")
        assert names[0] == "alpha_shout"
        # alpha's unlisted tools are filtered out: never found, not callable through call_tool.
        assert "alpha_alpha_only" not in await found(c, "a tool only alpha has", "alpha only")
        res = await c.call_tool("call_tool", {"tool_name": "alpha_alpha_only"})
        assert res.is_error and "Unknown tool" in text(res)
        # Authorization decides per caller: a forbidden tool is never found.
        gw.app.gateway.dispatcher.tool_allowed = lambda name, ctx: name != "beta_beta_only"
        assert "beta_beta_only" not in await found(c, "a tool only beta has", "beta only")
        assert "beta_upper" in await found(c, "upper case text")


@pytest.mark.parametrize("mode", MODES)
async def test_index_follows_list_changed(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, mode: str
) -> None:
    gw = await gateway(config(*alpha_beta, optimizer={}))
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        assert "beta_forecast_weather" not in await found(c, "forecast weather")
        res = await c.call_tool(
            "call_tool", {"tool_name": "beta_grow", "parameters": {"tool": "forecast_weather"}}
        )
        assert text(res) == "grew"
        for _ in range(100):
            if (await found(c, "forecast weather"))[:1] == ["beta_forecast_weather"]:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the grown tool never became findable")


async def test_expose_all_tools_advertises_both(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    gw = await gateway(config(*alpha_beta, optimizer={"exposeAllTools": True}))
    async with Client(gw.url, mode="2026-07-28") as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"find_tool", "call_tool", "alpha_echo", "beta_upper"} <= names
        assert text(await c.call_tool("alpha_echo", {"text": "x"})) == "alpha:x"


@pytest.mark.parametrize("provider", ["openai", "tei"])
async def test_hybrid_ranking_with_a_real_embeddings_endpoint(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, served: Any, provider: str
) -> None:
    emb = await served(embeddings_app(256))
    base = f"{emb.base}/v1" if provider == "openai" else emb.base
    opt = {"embeddingService": base, "embeddingProvider": provider, "hybridSearchSemanticRatio": "0.5"}
    if provider == "openai":
        opt["embeddingModel"] = "hash-embedding"
    gw = await gateway(config(*alpha_beta, optimizer=opt))
    async with Client(gw.url, mode="2026-07-28") as c:
        names = await found(c, "upper case the text")
        assert names[0] in ("alpha_upper", "beta_upper")
    await gw.app.gateway.finder.embedded()
    status = gw.app.gateway.status()["optimizer"]
    assert status["embeddings"]["state"] == "ready" and status["ranking"] == "hybrid", status
    finder = gw.app.gateway.finder
    index = await finder.index("modern")
    assert index is not None and index.vectors is not None and index.vectors.shape == (len(index), 256)


async def test_embedding_service_down_falls_back_to_keywords(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    opt = {"embeddingService": "http://127.0.0.1:9/v1", "embeddingProvider": "openai", "embeddingModel": "m"}
    gw = await gateway(config(*alpha_beta, optimizer=opt))
    async with Client(gw.url, mode="legacy") as c:
        assert (await found(c, "upper case the text"))[0].endswith("_upper")
    await gw.app.gateway.finder.embedded()
    embeddings = gw.app.gateway.status()["optimizer"]["embeddings"]
    assert embeddings["state"] == "failed" and "unreachable" in embeddings["cause"], embeddings


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("find_tool", {}, "arguments.tool_description"),
        ("find_tool", {"tool_description": 5}, "arguments.tool_description"),
        ("find_tool", {"tool_description": "x" * 5000}, "arguments.tool_description"),
        ("find_tool", {"tool_description": "x", "tool_keywords": [1]}, "arguments.tool_keywords"),
        ("find_tool", {"tool_description": "x", "limit": 3}, "arguments.limit"),
        ("call_tool", {}, "arguments.tool_name"),
        ("call_tool", {"tool_name": "alpha_echo", "parameters": [1]}, "arguments.parameters"),
        ("call_tool", {"tool_name": "call_tool"}, "arguments.tool_name"),
        ("execute_tool_script", {}, "arguments.script"),
        ("execute_tool_script", {"script": 7}, "arguments.script"),
        ("execute_tool_script", {"script": "x = 1\n" * 20000}, "arguments.script"),
        ("execute_tool_script", {"script": "1", "other": 1}, "arguments.other"),
    ],
)
async def test_bad_arguments_are_jsonrpc_errors_naming_the_field(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, tool: str, arguments: Any, field: str
) -> None:
    gw = await gateway(config(*alpha_beta, optimizer={}, codeMode={"enabled": True}))
    async with Client(gw.url, mode="legacy") as c:
        with pytest.raises(MCPError) as err:
            await c.call_tool(tool, arguments)
        assert err.value.error.code == -32602
        assert field in err.value.error.message


SCRIPT = """
results = parallel([
    lambda: alpha_upper(text="a"),
    lambda: beta_upper(text="b"),
    lambda: {"echo": alpha_echo(text="c")},
])
total = 0
for i in range(10):
    total += i
return {"results": results, "total": total, "own": call_tool("beta_beta_only", {"x": 2})}
"""


@pytest.mark.parametrize("mode", MODES)
async def test_code_mode_runs_a_script(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, mode: str
) -> None:
    gw = await gateway(config(*alpha_beta, codeMode={"enabled": True}))
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        assert "execute_tool_script" in {t.name for t in (await c.list_tools()).tools}
        res = await c.call_tool("execute_tool_script", {"script": SCRIPT})
        assert not res.is_error, text(res)
        assert res.structured_content == {
            "results": ["A", "B", {"echo": "alpha:c"}],
            "total": 45,
            "own": "beta own 2",
        }
        # The value of the last expression is the result too.
        res = await c.call_tool("execute_tool_script", {"script": "x = alpha_upper(text='q')\n[x, x]"})
        assert res.structured_content == {"result": ["Q", "Q"]}


async def test_parallel_calls_run_concurrently(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    gw = await gateway(config(*alpha_beta, codeMode={"enabled": True}))
    script = "parallel([lambda: alpha_slow(seconds=1.0) for _ in range(5)])"
    async with Client(gw.url, mode="legacy") as c:
        t0 = asyncio.get_running_loop().time()
        res = await c.call_tool("execute_tool_script", {"script": script})
        elapsed = asyncio.get_running_loop().time() - t0
        assert res.structured_content == {"result": ["slept"] * 5}
        assert elapsed < 4.0, elapsed  # five 1 s calls one after another would take 5 s


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            "x = 1\ny = alpha_fail(message='bad thing')\n",
            "script line 2: tool alpha_fail failed: error executing tool fail: bad thing",
        ),
        ("x = 1\n\ny = x + 'a'\n", "script line 3:"),
        ("x = = 1\n", "script line 1: Parse error"),
        ("def f():\n    return 1\nreturn f() + nope\n", "script line 3:"),
        ("n = 0\nfor i in range(100000000):\n    n += i\n", "step limit exceeded"),
        ("def r(n):\n    return r(n + 1)\nr(0)\n", "script line 2:"),
        ("x = 'a' * 2000000000\n", "memory"),
        ("['x' * 1000 for _ in range(5000)]\n", "codeMode.maxOutputBytes"),
        ("load('other.star', 'x')\n", "script line 1:"),
        ("open('/etc/passwd')\n", "script line 1:"),
        ("alpha_echo(1, 2)\n", "pass arguments by name"),
        ("[alpha_echo(text='x') for _ in range(101)]\n", "codeMode.maxToolCalls"),
        ("execute_tool_script(script='1')\n", "script line 1:"),
        ("call_tool('execute_tool_script', {'script': '1'})\n", "cannot be called from a script"),
        ("alpha_slow(seconds=3)\n", "codeMode.toolCallTimeout"),
    ],
)
async def test_script_errors_and_limits(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, script: str, expected: str
) -> None:
    code = {"enabled": True, "maxOutputBytes": 100000, "toolCallTimeout": "1s", "stepLimit": 1000000}
    gw = await gateway(config(*alpha_beta, codeMode=code))
    async with Client(gw.url, mode="legacy") as c:
        res = await c.call_tool("execute_tool_script", {"script": script})
        assert res.is_error, text(res)
        assert expected.lower() in text(res).lower(), text(res)


async def test_script_time_limit(alpha_beta: tuple[Served, Served], gateway: GatewayFactory) -> None:
    code = {"enabled": True, "scriptTimeout": "1s", "stepLimit": 100000000}
    gw = await gateway(config(*alpha_beta, codeMode=code))
    async with Client(gw.url, mode="legacy") as c:
        res = await c.call_tool(
            # Nested small ranges: a long run with flat memory (one huge range would hit the memory limit).
            "execute_tool_script",
            {"script": "n = 0\nfor i in range(100000):\n    for j in range(100000):\n        n += 1\n"},
        )
        assert res.is_error and "time limit exceeded" in text(res)
        # The gateway still answers at once afterwards.
        assert text(await c.call_tool("execute_tool_script", {"script": "alpha_upper(text='ok')"})) == '"OK"'


@pytest.mark.parametrize("mode", MODES)
async def test_code_mode_with_the_optimizer(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, mode: str
) -> None:
    gw = await gateway(config(*alpha_beta, optimizer={}, codeMode={"enabled": True}))
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        assert {t.name for t in (await c.list_tools()).tools} == {"find_tool", "call_tool"}
        assert (await found(c, "run a script that calls several tools"))[0] == "execute_tool_script"
        script = "hits = find_tool(tool_description='upper case text')\n[alpha_upper(text='z'), len(hits['tools']) > 0]"
        res = await c.call_tool(
            "call_tool", {"tool_name": "execute_tool_script", "parameters": {"script": script}}
        )
        assert not res.is_error, text(res)
        assert json.loads(text(res)) == ["Z", True]
