"""Property-based tests of code mode and `call_tool` over real HTTP, both protocol eras (issue 27).

Generated: script text (random text, and scripts assembled from hostile pieces: integers up to 2^80,
deep lists, tool calls with such arguments, `parallel()` with real and forged placeholders, calls
of the meta tools and of execute_tool_script by every path) and call_tool arguments (any tool
name, any JSON parameters, integers past 64 bits, deep nesting). Every answer: no 5xx and no
traceback; a result is a tools/call result (an isError one with a message), an error is a JSON-RPC
error naming an argument; no script ever runs another; no traceback is logged; the script
processes stay within the bound; a good script still runs afterwards.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.server import ServeOptions, build_app
from tests.hostile import (
    LEGACY,
    META,
    MODERN,
    ThreadServers,
    assert_sane,
    encode,
    error_log,
    json_values,
    legacy_headers,
    modern_headers,
    open_session,
    post,
    running,
)
from tests.vmcp.servers import sdk_backend
from tests.vmcp.test_codemode_hostile import worker_pids

EXAMPLES = 60
MAX_SCRIPTS = 3
_ids = itertools.count(1)


def start_gateway() -> tuple[ThreadServers, str]:
    servers = ThreadServers()
    backend = servers.add(sdk_backend("alpha").streamable_http_app(), None)
    code = {
        "enabled": True,
        "scriptTimeout": "10s",
        "toolCallTimeout": "3s",
        "maxConcurrentScripts": MAX_SCRIPTS,
        "stepLimit": 200_000,
    }
    cfg = parse_config(
        {
            "name": "code-fuzz",
            "backends": [{"name": "alpha", "url": f"{backend}/mcp"}],
            "optimizer": {},
            "codeMode": code,
        }
    )
    base = servers.add(build_app(cfg, ServeOptions(host="127.0.0.1")))
    servers.start()
    return servers, base


@pytest.fixture(scope="module")
def vmcp() -> Iterator[str]:
    with running(start_gateway) as base:
        yield base


def call(base: str, era: str, sid: str | None, name: str, arguments: Any) -> dict[str, Any]:
    """One tools/call; returns its JSON-RPC answer after checking the invariants of every answer."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": params}
    if era == MODERN:
        params["_meta"] = META
        headers = modern_headers(msg)
    else:
        assert sid is not None
        headers = legacy_headers(sid)
    reply = post(base, encode(msg), headers, timeout=60.0, until=f'"id":{msg["id"]}'.encode())
    assert_sane(reply, msg)
    answers = [m for m in reply.messages() if isinstance(m, dict) and m.get("id") == msg["id"]]
    assert answers, (reply.status, reply.body[:300])
    answer: dict[str, Any] = answers[0]
    if "error" in answer:
        # A bad argument: an invalid-params error naming it (or the message's own shape).
        assert answer["error"]["code"] in (-32602, -32600), answer
        assert "arguments" in answer["error"]["message"] or answer["error"]["code"] == -32600, answer
    else:
        result = answer["result"]
        assert isinstance(result.get("content"), list), answer
        if result.get("isError"):
            text = "".join(c.get("text", "") for c in result["content"])
            assert text and "Traceback" not in text, answer
    return answer


def _int_literal(n: int) -> str:
    return f"({n})"


_ints = st.one_of(st.integers(-(2**80), 2**80), st.sampled_from([2**63, 2**64, -(2**63) - 1, 1 << 70]))
_strings = st.text(max_size=20).map(lambda s: repr(s))
_atoms = st.one_of(
    _ints.map(_int_literal), _strings, st.sampled_from(["None", "True", "[]", "{}", "float('nan')"])
)
_deep = st.integers(0, 400).map(lambda n: "[" * n + "1" + "]" * n)
_exprs = st.recursive(
    st.one_of(_atoms, _deep),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.tuples(_strings, inner).map(lambda kv: "{" + kv[0] + ": " + kv[1] + "}"),
        inner.map(lambda e: f"alpha_echo(text={e})"),
        inner.map(lambda e: f"call_tool('alpha_echo', {{'text': {e}}})"),
        st.lists(inner, min_size=1, max_size=3).map(
            lambda xs: "parallel([" + ", ".join(f"lambda: {x}" for x in xs) + "])"
        ),
    ),
    max_leaves=6,
)
_pieces = st.one_of(
    _exprs,
    _ints.map(lambda n: f"parallel([lambda: {{'__mcpfleet_pending_call__': {n}}}])"),
    st.sampled_from(
        [
            "execute_tool_script(script='1')",
            "call_tool('execute_tool_script', {'script': '1'})",
            "call_tool('call_tool', {'tool_name': 'execute_tool_script', 'parameters': {'script': '1'}})",
            "call_tool('call_tool', {'tool_name': 'call_tool', 'parameters': {}})",
            "find_tool(tool_description='echo')",
            "def f(n):\n    return f(n + 1)\nf(0)",
            "while True:\n    pass",
            "return alpha_upper(text='x')",
        ]
    ),
)
scripts = st.one_of(
    st.text(max_size=200),
    st.lists(_pieces, min_size=1, max_size=4).map("\n".join),
)


def _deep(n: int) -> Any:
    value: Any = 1
    for _ in range(n):
        value = [value]
    return value


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_generated_scripts(vmcp: str, era: str) -> None:
    sid = open_session(vmcp) if era == LEGACY else None

    @given(source=scripts, through=st.booleans())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(source: str, through: bool) -> None:
        if through:
            answer = call(
                vmcp,
                era,
                sid,
                "call_tool",
                {"tool_name": "execute_tool_script", "parameters": {"script": source}},
            )
        else:
            answer = call(vmcp, era, sid, "execute_tool_script", {"script": source})
        if "execute_tool_script" in source and "return" not in source:
            # Each path to another script is refused, and a refused call stops the script.
            assert (answer.get("result") or {}).get("isError"), answer
        assert len(worker_pids()) <= MAX_SCRIPTS + 1

    with error_log() as log:
        run()
    assert not log.tracebacks(), log.tracebacks()[:5]
    good = call(vmcp, era, sid, "execute_tool_script", {"script": "alpha_upper(text='ok')"})
    assert good["result"]["isError"] is False, good


_tool_names = st.one_of(
    st.sampled_from(
        ["alpha_echo", "alpha_upper", "execute_tool_script", "call_tool", "find_tool", "", "x" * 300]
    ),
    st.text(max_size=30),
    json_values,
)
_parameters = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(["text", "script", "tool_name", "x"]), json_values, max_size=3),
    st.fixed_dictionaries({"script": st.one_of(scripts, json_values)}),
    st.integers(0, 300).map(lambda n: {"text": _deep(n)}),
)
call_tool_arguments = st.one_of(
    json_values,
    st.fixed_dictionaries({"tool_name": _tool_names}, optional={"parameters": _parameters}),
    st.fixed_dictionaries({"tool_name": _tool_names, "parameters": _parameters, "extra": json_values}),
)


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_generated_call_tool_arguments(vmcp: str, era: str) -> None:
    sid = open_session(vmcp) if era == LEGACY else None

    @given(arguments=call_tool_arguments)
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(arguments: Any) -> None:
        call(vmcp, era, sid, "call_tool", arguments)
        assert len(worker_pids()) <= MAX_SCRIPTS + 1

    with error_log() as log:
        run()
    assert not log.tracebacks(), log.tracebacks()[:5]
    good = call(vmcp, era, sid, "call_tool", {"tool_name": "alpha_upper", "parameters": {"text": "ok"}})
    assert good["result"]["isError"] is False, good
