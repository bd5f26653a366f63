"""Code mode (`execute_tool_script`) and `call_tool` as a hostile client uses them (issue 27): scripts
never start scripts by any path, script processes are bounded (running, waiting, one idle spare,
closed on reload), values the wire cannot carry and forged `parallel()` placeholders are clear tool
errors, never a 500, a hang or a traceback; then the corpus of hand-written hostile scripts and
call_tool arguments, each with its expected clear refusal, in both protocol eras."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from mcpfleet.vmcp.config import parse_config
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import Served

MODES = ["legacy", "2026-07-28"]
BOTH = {"optimizer": {}, "codeMode": {"enabled": True}}


def config(a: Served, b: Served, **extra: Any) -> dict[str, Any]:
    return {
        "name": "code",
        "backends": [{"name": "alpha", "url": a.url}, {"name": "beta", "url": b.url}],
        **extra,
    }


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def worker_pids() -> set[int]:
    """Live code-mode worker processes started by this (test) process, where the gateways run."""
    me, out = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == me and state != "Z" and b"codemode_worker.py" in cmdline:
            out.add(int(entry.name))
    return out


async def script(c: Client, source: str, through_call_tool: bool = False) -> Any:
    """Run `source` directly, or through call_tool as an optimizer client must."""
    if through_call_tool:
        args = {"tool_name": "execute_tool_script", "parameters": {"script": source}}
        return await c.call_tool("call_tool", args)
    return await c.call_tool("execute_tool_script", {"script": source})


# ---- 1: scripts never start scripts; workers are bounded ---------------------------------------

RECURSION = [
    "call_tool('call_tool', {'tool_name': 'execute_tool_script', 'parameters': {'script': '1'}})",
    "call_tool('execute_tool_script', {'script': '1'})",
    "f = call_tool\nf('call_tool', {'tool_name': 'execute_tool_script', 'parameters': {'script': '1'}})",
    "parallel([lambda: call_tool('call_tool', {'tool_name': 'execute_tool_script', "
    "'parameters': {'script': '1'}}) for _ in range(3)])",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("source", RECURSION)
async def test_scripts_never_start_scripts(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, mode: str, source: str
) -> None:
    """Regression (issue 27, 1): the name check missed call_tool("call_tool", ...execute_tool_script)."""
    gw = await gateway(config(*alpha_beta, **BOTH))
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        for through in (False, True):
            res = await script(c, source, through)
            assert res.is_error, text(res)
            assert "cannot be called from a script" in text(res), text(res)
        # call_tool around call_tool stays a JSON-RPC error naming the field.
        with pytest.raises(MCPError) as err:
            await c.call_tool("call_tool", {"tool_name": "call_tool", "parameters": {"tool_name": "x"}})
        assert "arguments.tool_name" in err.value.error.message
        # A script through call_tool (the optimizer's only way) still runs.
        res = await script(c, "alpha_upper(text='ok')", through_call_tool=True)
        assert not res.is_error and text(res) == '"OK"'


async def test_nested_refusal_names_the_rule(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    gw = await gateway(config(*alpha_beta, **BOTH))
    async with Client(gw.url, mode="legacy") as c:
        res = await script(c, RECURSION[0])
        assert res.is_error
        assert (
            "script line 1: tool call_tool failed: execute_tool_script cannot be called from a script"
            in text(res)
        )
        assert "scripts never start scripts" in text(res)


async def test_script_workers_are_bounded(alpha_beta: tuple[Served, Served], gateway: GatewayFactory) -> None:
    """Regression (issue 27, 1): nothing bounded the script processes of a gateway."""
    code = {"enabled": True, "maxConcurrentScripts": 2}
    gw = await gateway(config(*alpha_beta, codeMode=code))
    peak = 0
    stop = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, len(worker_pids()))
            await asyncio.sleep(0.05)

    async with Client(gw.url, mode="legacy") as c:
        watcher = asyncio.create_task(watch())
        # 2 run, 2 wait for a slot, the other 2 are refused at once.
        results = await asyncio.gather(*(script(c, "alpha_slow(seconds=3)") for _ in range(6)))
        stop.set()
        await watcher
    busy = [text(r) for r in results if r.is_error]
    assert len(busy) == 2, [text(r) for r in results]
    assert all("codeMode.maxConcurrentScripts" in b and "retry later" in b for b in busy)
    assert all(not r.is_error for r in results if "busy" not in text(r))
    assert peak <= 3  # two running, one spare


# ---- 2: one idle spare, closed on reload -------------------------------------------------------


async def test_idle_workers_do_not_leak(alpha_beta: tuple[Served, Served], gateway: GatewayFactory) -> None:
    """Regression (issue 27, 2): 3 rounds of 8 concurrent scripts left 13-16 idle workers."""
    gw = await gateway(config(*alpha_beta, codeMode={"enabled": True}))
    async with Client(gw.url, mode="legacy") as c:
        for _ in range(3):
            results = await asyncio.gather(*(script(c, "alpha_echo(text='x')") for _ in range(8)))
            assert all(not r.is_error for r in results), [text(r) for r in results]
            assert len(worker_pids()) <= 1


async def test_reload_closes_the_spare(alpha_beta: tuple[Served, Served], gateway: GatewayFactory) -> None:
    """Regression (issue 27, 2): a config reload kept the idle spare started for the old settings."""
    raw = config(*alpha_beta, codeMode={"enabled": True})
    gw = await gateway(raw)
    gateway_ = gw.app.gateway
    async with Client(gw.url, mode="legacy") as c:
        assert not (await script(c, "1")).is_error
        spare = worker_pids()
        assert len(spare) == 1
        changed = {**raw, "aggregation": {"tools": [{"workload": "alpha", "filter": ["echo", "upper"]}]}}
        assert gateway_.reconfigure(parse_config(changed)) is not None
        for _ in range(400):  # up to 20 s on a loaded machine
            if not worker_pids() & spare:
                break
            await asyncio.sleep(0.05)
        assert not worker_pids() & spare
        # Scripts still run after the reload (a new spare is started with the next one).
        res = await script(c, "alpha_echo(text='after')")
        assert not res.is_error and "after" in text(res)
    await gateway_.code.close()
    assert not worker_pids()


# ---- 3 and the risks: values the wire cannot carry, forged placeholders ------------------------

NESTED_300 = "x = []\nfor i in range(300):\n    x = [x]\nx\n"
UNSENDABLE = [
    ("1 << 70", "integer beyond 64 bits"),
    ("int('1' * 30)", "integer beyond 64 bits"),
    ("-(1 << 64)", "integer beyond 64 bits"),
    ("{'a': [1, 2, {'b': 1 << 65}]}", "integer beyond 64 bits"),
    (NESTED_300, "nested"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("source", "expected"), UNSENDABLE)
async def test_unencodable_script_values_are_tool_errors(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, mode: str, source: str, expected: str
) -> None:
    """Regression (issue 27, 3): an HTTP 500 with a traceback in both eras and through call_tool."""
    gw = await gateway(config(*alpha_beta, **BOTH))
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        for through in (False, True):
            res = await script(c, source, through)
            assert res.is_error and expected in text(res), text(res)
        # The gateway still serves.
        assert text(await script(c, "alpha_upper(text='ok')", True)) == '"OK"'


@pytest.mark.parametrize(
    "argument",
    ["1 << 70", "int('9' * 40)", "[[[[1 << 64]]]]", NESTED_300.replace("\nx\n", "\n") + "x"],
)
async def test_unencodable_tool_arguments_are_tool_errors_without_a_traceback(
    alpha_beta: tuple[Served, Served],
    gateway: GatewayFactory,
    caplog: pytest.LogCaptureFixture,
    argument: str,
) -> None:
    """Regression (issue 27, risk): a huge integer argument logged a traceback beside the tool error."""
    gw = await gateway(config(*alpha_beta, codeMode={"enabled": True}))
    *setup, value = argument.split("\n")
    source = "\n".join([*setup, f"alpha_echo(text={value})"])
    caplog.set_level(logging.WARNING)
    async with Client(gw.url, mode="legacy") as c:
        res = await script(c, source)
    assert res.is_error
    assert "tool alpha_echo failed: arguments" in text(res), text(res)
    assert "64 bits" in text(res) or "nested more than" in text(res)
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


FORGED = [
    "parallel([lambda: {'__mcpfleet_pending_call__': 99}])",
    "parallel([lambda: {'__mcpfleet_pending_call__': 1, 'x': 2}])",
    "parallel([lambda: {'__mcpfleet_pending_call__': 'a'}])",
    # A placeholder kept from one parallel() and returned by another.
    "kept = []\nparallel([lambda: kept.append(alpha_echo(text='a'))])\nparallel([lambda: kept[0]])",
]


@pytest.mark.parametrize("source", FORGED)
async def test_forged_placeholders_fail_fast(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, source: str
) -> None:
    """Regression (issue 27, risk): a made-up placeholder made the worker wait until scriptTimeout."""
    gw = await gateway(config(*alpha_beta, codeMode={"enabled": True, "scriptTimeout": "60s"}))
    async with Client(gw.url, mode="legacy") as c:
        started = time.monotonic()
        res = await script(c, source)
        assert time.monotonic() - started < 20
    assert res.is_error and "parallel(): '__mcpfleet_pending_call__'" in text(res), text(res)


async def test_one_placeholder_returned_twice_resolves_once(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    """The same pending call returned twice used to wait for a second answer (scriptTimeout)."""
    gw = await gateway(config(*alpha_beta, codeMode={"enabled": True}))
    async with Client(gw.url, mode="legacy") as c:
        started = time.monotonic()
        res = await script(c, "def f():\n    r = alpha_echo(text='a')\n    return [r, r]\nparallel([f])")
        assert time.monotonic() - started < 20
    assert not res.is_error and json.loads(text(res)) == [["alpha:a", "alpha:a"]]


# ---- the corpus ----------------------------------------------------------------------------------

SCRIPT_CORPUS: list[tuple[str, str]] = [
    # Recursion, by every path.
    ("execute_tool_script(script='1')", "script line 1:"),
    ("call_tool('execute_tool_script', {'script': '1'})", "cannot be called from a script"),
    (RECURSION[0], "cannot be called from a script"),
    ("call_tool('call_tool', {'tool_name': 'call_tool', 'parameters': {}})", "arguments.tool_name"),
    ("call_tool('call_tool', {'tool_name': 'find_tool'})", "arguments.tool_name"),
    ("call_tool('call_tool', 5)", "script line 1:"),
    ("call_tool('call_tool', {'tool_name': 7})", "arguments.tool_name"),
    ("call_tool('call_tool', {'tool_name': 'alpha_echo', 'parameters': [1]})", "arguments.parameters"),
    # Values the wire cannot carry.
    ("1 << 70", "integer beyond 64 bits"),
    ("alpha_echo(text=1 << 70)", "integer beyond 64 bits"),
    (NESTED_300, "nested"),
    ("alpha_echo(text=float('nan'))", "tool alpha_echo failed"),  # NaN reaches the tool as null
    ("alpha_echo(text=lambda: 1)", "not supported"),
    ("alpha_echo(text=struct(a=alpha_echo))", "not supported"),
    ("alpha_echo", "not supported"),
    # Forged or misused placeholders, parallel() misuse.
    (FORGED[0], "marks this parallel()'s own pending calls"),
    ("parallel([lambda: parallel([])])", "cannot be nested"),
    ("parallel(5)", "script line"),
    ("parallel([5])", "script line"),
    # Arguments of the wrong shape.
    ("alpha_echo(1, 2)", "pass arguments by name"),
    ("call_tool('alpha_echo', 'text')", "script line 1:"),
    ("call_tool(None)", "Unknown tool"),
    ("call_tool('no such tool')", "Unknown tool"),
    ("call_tool('\\u0000')", "Unknown tool"),
    # Escapes and resource use.
    ("load('/etc/passwd', 'x')", "script line 1:"),
    ("open('/etc/passwd')", "script line 1:"),
    ("def r(n):\n    return r(n + 1)\nr(0)\n", "script line 2:"),
    ("['x' * 1000 for _ in range(50000)]", "codeMode.maxOutputBytes"),
    ("[alpha_echo(text='x') for _ in range(101)]", "codeMode.maxToolCalls"),
    ("'x' * (1 << 40)", "script line 1:"),
]


@pytest.mark.parametrize("mode", MODES)
async def test_script_corpus(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    """Each hostile script: a tool error with its clear reason, no traceback logged, the gateway serves."""
    gw = await gateway(config(*alpha_beta, **BOTH))
    caplog.set_level(logging.WARNING)
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        wrong = []
        for source, expected in SCRIPT_CORPUS:
            res = await script(c, source)
            if not res.is_error or expected not in text(res) or "Traceback" in text(res):
                wrong.append((source, text(res)))
        assert not wrong
        assert text(await script(c, "alpha_upper(text='ok')")) == '"OK"'
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert len(worker_pids()) <= 1


CALL_TOOL_CORPUS: list[tuple[Any, str]] = [
    ({}, "arguments.tool_name"),
    ({"tool_name": ""}, "arguments.tool_name"),
    ({"tool_name": ["alpha_echo"]}, "arguments.tool_name"),
    ({"tool_name": "call_tool"}, "arguments.tool_name"),
    ({"tool_name": "find_tool", "parameters": {"tool_description": "x"}}, "arguments.tool_name"),
    ({"tool_name": "alpha_echo", "parameters": "text"}, "arguments.parameters"),
    ({"tool_name": "alpha_echo", "parameters": {}, "extra": 1}, "arguments.extra"),
    ({"tool_name": "execute_tool_script", "parameters": {"script": 5}}, "arguments.script"),
    ({"tool_name": "execute_tool_script", "parameters": {"script": "1", "x": 1}}, "arguments.x"),
]


@pytest.mark.parametrize("mode", MODES)
async def test_call_tool_corpus(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, mode: str
) -> None:
    """Each hostile call_tool argument set: a JSON-RPC error naming the field; unknown tools and
    scripts started from scripts are tool errors."""
    gw = await gateway(config(*alpha_beta, **BOTH))
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        for arguments, field in CALL_TOOL_CORPUS:
            with pytest.raises(MCPError) as err:
                await c.call_tool("call_tool", arguments)
            assert err.value.error.code == -32602, arguments
            assert field in err.value.error.message, (arguments, err.value.error.message)
        for name in ("no_such_tool", "alpha_echo\u0000", "x" * 5000):
            res = await c.call_tool("call_tool", {"tool_name": name})
            assert res.is_error and "Unknown tool" in text(res)
        res = await c.call_tool(
            "call_tool", {"tool_name": "execute_tool_script", "parameters": {"script": RECURSION[0]}}
        )
        assert res.is_error and "cannot be called from a script" in text(res)
