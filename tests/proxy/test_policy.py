"""Cedar authorization and audit in `mcpfleet proxy` (`--authz-config`, `--audit-config`), run as the
CLI runs it, in front of real stdio servers: ToolHive's example policy files enforced as written,
denied calls never reach the server (it counts what it serves), lists filtered per caller, a policy
edit applied on the same session, one audit line per request with no secret in it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from mcpfleet.policy.guard import FORBIDDEN
from tests.conformance import harness
from tests.oidc import Issuer
from tests.proxy.conftest import VENV_BIN, serve_app, wait_healthy

REFERENCE = Path(__file__).parents[2] / "reference" / "toolhive" / "examples-misc"
SERVER = Path(__file__).parents[1] / "policy" / "example_server.py"
AUDIENCE = "policy-proxy"


@contextlib.contextmanager
def proxy_process(args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    port = harness.free_port()
    cmd = [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--port", str(port), *args]
    log = (tmp_path / f"proxy-{port}.log").open("wb")
    import os

    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()
        log.close()


@contextlib.asynccontextmanager
async def issuer() -> AsyncIterator[Issuer]:
    iss = Issuer()
    async with serve_app(iss) as base:
        iss.base = base
        iss.add_rsa("k")
        yield iss


def client(url: str, token: str | None, mode: str = "legacy") -> Client:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(url, http_client=http), mode=mode)  # type: ignore[arg-type]


def served_calls(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_toolhive_example_policies_enforced_through_the_proxy(tmp_path: Path) -> None:
    """authz-config-with-entities.json as written: owners call their own tools, prompts by visibility,
    admins everything; lists show only what each caller may use; a denied call is never served."""
    calls = tmp_path / "calls.jsonl"
    audit_file = tmp_path / "audit.jsonl"
    authz = tmp_path / "authz.json"
    shutil.copy(REFERENCE / "authz-config-with-entities.json", authz)
    (tmp_path / "audit.json").write_text(json.dumps({"enabled": True, "logFile": str(audit_file)}))
    async with issuer() as iss:
        auth = {"type": "oidc", "oidc": {"issuer": iss.base, "audience": AUDIENCE, "insecureAllowHTTP": True}}
        (tmp_path / "auth.json").write_text(json.dumps(auth))
        args = [
            "--auth-config",
            str(tmp_path / "auth.json"),
            "--authz-config",
            str(authz),
            "--audit-config",
            str(tmp_path / "audit.json"),
            "--",
            sys.executable,
            str(SERVER),
        ]
        with proxy_process(args, tmp_path, {"POLICY_SERVER_CALLS": str(calls)}) as base:
            await wait_healthy(base)
            url = f"{base}/mcp"
            owner = iss.token("k", aud=AUDIENCE, sub="user123", extra={"roles": ["user"]})
            other = iss.token("k", aud=AUDIENCE, sub="user456")
            admin = iss.token("k", aud=AUDIENCE, sub="boss", extra={"roles": ["admin"]})
            for mode in ("legacy", "2026-07-28"):
                async with client(url, owner, mode) as c:
                    assert {t.name for t in (await c.list_tools()).tools} == {"weather"}
                    assert {p.name for p in (await c.list_prompts()).prompts} == {"greeting", "farewell"}
                    assert not (await c.call_tool("weather", {"city": "Oslo"})).is_error
                    with pytest.raises(MCPError) as denied:
                        await c.call_tool("calculator", {"a": 1, "b": 2})
                    assert denied.value.error.code == FORBIDDEN
                    assert "calculator" in denied.value.error.message
                async with client(url, other, mode) as c:
                    assert {t.name for t in (await c.list_tools()).tools} == {"calculator"}
                    assert {p.name for p in (await c.list_prompts()).prompts} == {"greeting"}
                    with pytest.raises(MCPError) as denied:
                        await c.get_prompt("farewell", {"who": "x"})
                    assert denied.value.error.code == FORBIDDEN
                    await c.get_prompt("greeting", {"who": "x"})
                async with client(url, admin, mode) as c:
                    assert {t.name for t in (await c.list_tools()).tools} == {
                        "weather",
                        "calculator",
                        "translator",
                    }
                    assert not (await c.call_tool("translator", {"text": "abc"})).is_error
            served = [(c["kind"], c["name"]) for c in served_calls(calls)]
            # Exactly the permitted calls reached the server, in both eras; no denied one did.
            assert sorted(served) == sorted(
                [("tool", "weather"), ("prompt", "greeting"), ("tool", "translator")] * 2
            )
    events = [orjson.loads(line) for line in audit_file.read_text().splitlines()]
    denied_events = [e for e in events if e["outcome"] == "denied"]
    assert {(e["subject"]["sub"], e["target"]["name"]) for e in denied_events} == {
        ("user123", "calculator"),
        ("user456", "farewell"),
    }
    weather = next(e for e in events if e.get("target", {}).get("name") == "weather")
    assert weather["outcome"] == "success" and weather["arguments"] == {"city": "[redacted]"}
    assert weather["eventType"] == "mcp_tool_call" and weather["durationMs"] >= 0
    assert any(e["eventType"] == "mcp_initialize" and e["client"].get("name") for e in events)
    raw = audit_file.read_text()
    assert "Oslo" not in raw and owner not in raw and admin not in raw


def test_toolhive_authz_config_json_is_refused_with_the_policy_named(tmp_path: Path) -> None:
    """ToolHive's authz-config.json writes `resource in Tool::["calculator", "translator"]`, which Cedar
    does not parse: the proxy does not start, and says which policy and why."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpfleet.cli.main",
            "proxy",
            "--port",
            "0",
            "--authz-config",
            str(REFERENCE / "authz-config.json"),
            "--",
            sys.executable,
            str(SERVER),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "cedar.policies[3]" in proc.stderr and "unexpected token" in proc.stderr


async def test_policy_edit_applies_on_the_same_session(tmp_path: Path) -> None:
    """The authz file is followed: a rewrite (as `mcpfleet up` and the kubelet do) applies to the open
    session; a broken rewrite keeps the current policies."""
    calls = tmp_path / "calls.jsonl"
    authz = tmp_path / "authz.json"
    policy = {"version": "1.0", "type": "cedarv1", "cedar": {"policies": [], "entities_json": "[]"}}

    def write(policies: list[str]) -> None:
        policy["cedar"]["policies"] = policies  # type: ignore[index]
        tmp = authz.with_suffix(".tmp")
        tmp.write_text(json.dumps(policy))
        tmp.replace(authz)

    write(['permit(principal, action == Action::"call_tool", resource == Tool::"weather");'])
    args = ["--authz-config", str(authz), "--", sys.executable, str(SERVER)]
    with proxy_process(args, tmp_path, {"POLICY_SERVER_CALLS": str(calls)}) as base:
        await wait_healthy(base)
        async with client(f"{base}/mcp", None) as c:
            assert {t.name for t in (await c.list_tools()).tools} == {"weather"}
            with pytest.raises(MCPError):
                await c.call_tool("calculator", {})
            write(['permit(principal, action == Action::"call_tool", resource) when { context.arg_a == 5 };'])
            for _ in range(40):
                await asyncio.sleep(0.25)
                if {t.name for t in (await c.list_tools()).tools} != {"weather"}:
                    break
            # Arguments are in the condition: a == 5 passes, a == 1 does not.
            assert not (await c.call_tool("calculator", {"a": 5, "b": 1})).is_error
            with pytest.raises(MCPError):
                await c.call_tool("calculator", {"a": 1, "b": 1})
            write(["permit(principal, action"])  # broken: ignored
            await asyncio.sleep(1.5)
            assert not (await c.call_tool("calculator", {"a": 5, "b": 2})).is_error
        assert [(c["name"], c["arguments"]["a"]) for c in served_calls(calls)] == [("calculator", 5)] * 2


async def test_real_time_server_behind_a_permit_list(tmp_path: Path) -> None:
    """mcp-server-time from PyPI: only get_current_time is permitted; convert_time is hidden and refused."""
    authz = tmp_path / "authz.json"
    authz.write_text(
        json.dumps(
            {
                "version": "1.0",
                "type": "cedarv1",
                "cedar": {
                    "policies": [
                        'permit(principal, action == Action::"call_tool", resource == Tool::"get_current_time");'
                    ]
                },
            }
        )
    )
    args = ["--authz-config", str(authz), "--", str(VENV_BIN / "mcp-server-time"), "--local-timezone", "UTC"]
    with proxy_process(args, tmp_path) as base:
        await wait_healthy(base)
        async with client(f"{base}/mcp", None) as c:
            assert {t.name for t in (await c.list_tools()).tools} == {"get_current_time"}
            assert not (await c.call_tool("get_current_time", {"timezone": "UTC"})).is_error
            with pytest.raises(MCPError) as denied:
                await c.call_tool(
                    "convert_time", {"source_timezone": "UTC", "time": "10:00", "target_timezone": "UTC"}
                )
            assert denied.value.error.code == FORBIDDEN


@pytest.mark.parametrize("detect", [True, False])
async def test_audit_response_data_and_application_errors(tmp_path: Path, detect: bool) -> None:
    """ToolHive's `includeResponseData` and `detectApplicationErrors` on the proxy's audit: the answer
    logged (cut at maxDataSize), an error inside a 200 answer counted only when answers are read."""
    audit_file = tmp_path / "audit.jsonl"
    audit = {
        "enabled": True,
        "logFile": str(audit_file),
        "includeResponseData": True,
        "maxDataSize": 2000,
        "detectApplicationErrors": detect,
    }
    (tmp_path / "audit.json").write_text(json.dumps(audit))
    args = ["--audit-config", str(tmp_path / "audit.json"), "--", sys.executable, str(SERVER)]
    with proxy_process(args, tmp_path, {"POLICY_SERVER_CALLS": str(tmp_path / "calls.jsonl")}) as base:
        await wait_healthy(base)
        async with client(f"{base}/mcp", None) as c:
            assert not (await c.call_tool("weather", {"city": "Oslo"})).is_error
            with contextlib.suppress(MCPError):
                assert (await c.call_tool("no_such_tool", {})).is_error
    events = [orjson.loads(line) for line in audit_file.read_text().splitlines()]
    weather = next(e for e in events if e.get("target", {}).get("name") == "weather")
    assert weather["outcome"] == "success" and "Oslo" in weather["response"]
    assert weather["arguments"] == {"city": "[redacted]"}  # request data stays off
    failed = next(e for e in events if e.get("target", {}).get("name") == "no_such_tool")
    assert failed["outcome"] in (("error", "tool_error") if detect else ("success",))
    assert "no_such_tool" in failed["response"]
