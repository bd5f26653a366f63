"""MCPWebhookConfig enforced by the proxy (`--webhook-config`), against real HTTP webhook servers and
a real stdio MCP server behind the proxy (which records every call it serves):

* a validating webhook allows and denies (JSON-RPC FORBIDDEN naming it and its message; the denied
  call never reaches the server);
* a mutating webhook's JSON Patch rewrites tool arguments, which the server receives, and the
  validating webhook sees the rewritten request;
* every payload is signed: the webhook server verifies `X-ToolHive-Signature` with its key;
* hostile answers (huge, not JSON, wrong shape, 5xx, 422, too slow, a patch out of scope, changing the
  id, growing the request past 1 MiB) give a clear JSON-RPC error with failurePolicy fail — an
  HTTP 200, never a 5xx — and are skipped with ignore; 422 denies whatever the policy;
* an unreachable webhook refuses (fail) or is skipped (ignore);
* TLS: a webhook requiring a client certificate, verified with the configured CA bundle.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from mcpfleet.devcluster.pki import ensure_pki
from mcpfleet.policy.guard import FORBIDDEN, Policy, load_audit
from mcpfleet.proxy.serve import build_stdio_app, with_auth
from mcpfleet.webhook.asgi import WEBHOOK_FAILED
from mcpfleet.webhook.config import WebhookConfigError, load_webhook_config
from tests.conformance import harness
from tests.hostile import META, MODERN
from tests.local_http import serving
from tests.proxy.conftest import serve_app
from tests.webhook.webhook_server import WebhookServer

SERVER = Path(__file__).parents[1] / "policy" / "example_server.py"
KEY = b"webhook-test-hmac-key"


def client(url: str, mode: str = "legacy") -> Client:
    return Client(streamable_http_client(url, http_client=create_mcp_http_client()), mode=mode)  # type: ignore[arg-type]


def served(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def hook(
    name: str, url: str, policy: str, *, hmac_file: Path | None = None, timeout: str = "2s"
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "url": url,
        "failurePolicy": policy,
        "timeout": timeout,
        "tlsConfig": {"insecureSkipVerify": True},  # plain http: allowed only when said explicitly
    }
    if hmac_file is not None:
        entry["hmacSecretFile"] = hmac_file.name  # relative: resolved against the file's folder
    return entry


@contextlib.asynccontextmanager
async def proxy(
    tmp_path: Path, name: str, document: dict[str, Any], calls: Path, policy: Policy | None = None
) -> AsyncIterator[str]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"serverName": name, "transport": "stdio", **document}))
    app = build_stdio_app(
        [sys.executable, str(SERVER)], host="127.0.0.1", env={"POLICY_SERVER_CALLS": str(calls), "PATH": ""}
    )
    served_app = with_auth(app, None, webhooks=load_webhook_config(path), policy=policy)
    async with serve_app(served_app) as base:
        yield f"{base}/mcp"


async def raw_call(url: str, arguments: dict[str, Any], name: str = "weather") -> tuple[int, dict[str, Any]]:
    """One sessionless (2026-07-28 era) tools/call POST: the HTTP status and the JSON-RPC answer."""
    params = {"name": name, "arguments": arguments, "_meta": META}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    headers = {
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
        "Accept": "application/json, text/event-stream",
    }
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as resp:
        text = await resp.text()
        if resp.content_type == "text/event-stream":
            data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            return resp.status, json.loads(data[-1])
        return resp.status, json.loads(text)


@pytest.fixture
async def webhook_server() -> AsyncIterator[tuple[WebhookServer, str]]:
    server = WebhookServer(KEY)
    async with serving(server.app()) as base:
        yield server, base


async def test_validating_and_mutating_webhooks_with_hmac(
    tmp_path: Path, webhook_server: tuple[WebhookServer, str]
) -> None:
    server, base = webhook_server
    (tmp_path / "hmac").write_bytes(KEY + b"\n")
    calls = tmp_path / "calls.jsonl"
    document = {
        "mutating": [hook("rewrite", f"{base}/mutate", "fail", hmac_file=tmp_path / "hmac")],
        "validating": [hook("gate", f"{base}/validate", "fail", hmac_file=tmp_path / "hmac")],
    }
    server.modes.update(mutate="patch", validate="deny-calculator")
    audit_file = tmp_path / "audit.jsonl"
    (tmp_path / "audit.json").write_text(json.dumps({"enabled": True, "logFile": str(audit_file)}))
    policy = Policy(audit=load_audit(str(tmp_path / "audit.json"), "proxy"))
    async with proxy(tmp_path, "hooked", document, calls, policy) as url:
        for mode in ("legacy", "2026-07-28"):
            async with client(url, mode) as c:
                result = await c.call_tool("weather", {"city": "Oslo"})
                assert not result.is_error
                assert "sunny in Patched-Oslo" in str(result.content)
                with pytest.raises(MCPError) as denied:
                    await c.call_tool("calculator", {"a": 1, "b": 2})
                assert denied.value.error.code == FORBIDDEN
                assert "gate" in denied.value.error.message and "no math today" in denied.value.error.message
    # Refused by a webhook, so never seen by the policy layer: audited here, the webhook named.
    events = [json.loads(line) for line in audit_file.read_text().splitlines()]
    calls_audited = [(e["target"]["name"], e["outcome"]) for e in events if e["method"] == "tools/call"]
    assert sorted(calls_audited) == sorted([("weather", "success"), ("calculator", "denied")] * 2)
    denial = next(e for e in events if e["outcome"] == "denied")
    assert denial["reason"].startswith("webhook gate: Request denied by validating webhook gate")
    # The server received the rewritten arguments, never the denied call.
    assert [c["name"] for c in served(calls)] == ["weather", "weather"]
    assert {c["arguments"]["city"] for c in served(calls)} == {"Patched-Oslo"}
    # Every call was signed with the key and verified by the webhook server.
    assert server.calls and all(c.signed and c.signature_ok for c in server.calls)
    # The validating webhook judged the request as rewritten; the payload has ToolHive's shape.
    validated = [
        c.payload
        for c in server.calls
        if c.path == "validate" and c.payload["mcp_request"]["method"] == "tools/call"
    ]
    weather = [p for p in validated if p["mcp_request"]["params"]["name"] == "weather"]
    assert weather and all(p["mcp_request"]["params"]["arguments"]["city"] == "Patched-Oslo" for p in weather)
    sample = weather[0]
    assert sample["version"] == "v0.1.0" and sample["uid"] and sample["timestamp"].endswith("Z")
    assert sample["principal"] is None  # anonymous: no identity, and never a token
    assert sample["context"]["server_name"] == "hooked" and sample["context"]["transport"] == "stdio"
    assert sample["context"]["source_ip"].startswith("127.0.0.1:")
    assert len({c.payload["uid"] for c in server.calls}) == len(server.calls)


HOSTILE = ("huge", "notjson", "wrongshape", "array", "500", "slow", "scope", "idchange", "bigpatch")


async def test_hostile_answers_follow_the_failure_policy(
    tmp_path: Path, webhook_server: tuple[WebhookServer, str]
) -> None:
    server, base = webhook_server
    calls = tmp_path / "calls.jsonl"
    strict = {
        "mutating": [hook("m", f"{base}/mutate", "fail", timeout="1s")],
        "validating": [hook("v", f"{base}/validate", "fail", timeout="1s")],
    }
    lenient = {
        "mutating": [hook("m", f"{base}/mutate", "ignore", timeout="1s")],
        "validating": [hook("v", f"{base}/validate", "ignore", timeout="1s")],
    }
    async with (
        proxy(tmp_path, "strict", strict, calls) as strict_url,
        proxy(tmp_path, "lenient", lenient, calls) as lenient_url,
    ):
        for mode in HOSTILE:
            for kind in ("mutate", "validate"):
                if kind == "validate" and mode in ("scope", "idchange", "bigpatch"):
                    continue  # patches mean nothing to a validating webhook
                server.modes.update(mutate="allow", validate="allow")
                server.modes[kind] = mode
                status, body = await raw_call(strict_url, {"city": mode})
                assert status == 200, (mode, kind, status, body)
                error = body.get("error")
                assert error is not None and error["code"] == WEBHOOK_FAILED, (mode, kind, body)
                hook_name = "m" if kind == "mutate" else "v"
                assert f"webhook {hook_name} failed" in error["message"], error
                assert "secret stack trace" not in json.dumps(body) and "oops" not in json.dumps(body)
                status, body = await raw_call(lenient_url, {"city": mode})
                assert status == 200 and "result" in body, (mode, kind, body)
                assert f"sunny in {mode}" in json.dumps(body)
        # HTTP 422 denies whatever the failure policy.
        server.modes.update(mutate="allow", validate="422")
        for url in (strict_url, lenient_url):
            status, body = await raw_call(url, {"city": "x"})
            assert status == 200 and body["error"]["code"] == FORBIDDEN, body
    reached = [c["arguments"]["city"] for c in served(calls)]
    # Only the lenient proxy's calls reached the server, each with its arguments untouched.
    assert sorted(reached) == sorted(
        [
            m
            for m in HOSTILE
            for _ in ("mutate", "validate")
            if not (_ == "validate" and m in ("scope", "idchange", "bigpatch"))
        ]
    )


async def test_unreachable_webhook_fail_and_ignore(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    gone = f"http://127.0.0.1:{harness.free_port()}/validate"
    async with proxy(tmp_path, "closed", {"validating": [hook("gone", gone, "fail")]}, calls) as url:
        status, body = await raw_call(url, {"city": "A"})
        assert status == 200 and body["error"]["code"] == WEBHOOK_FAILED
        assert "webhook gone failed: unreachable" in body["error"]["message"]
    async with proxy(tmp_path, "open", {"validating": [hook("gone", gone, "ignore")]}, calls) as url:
        status, body = await raw_call(url, {"city": "B"})
        assert status == 200 and "sunny in B" in json.dumps(body)
    assert [c["arguments"]["city"] for c in served(calls)] == ["B"]


async def test_webhook_over_mutual_tls(tmp_path: Path) -> None:
    """The CA bundle verifies the webhook; the client certificate is required by it; without the
    client certificate the call fails (and failurePolicy fail refuses)."""
    pki = ensure_pki(tmp_path / "pki")
    server = WebhookServer(KEY)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    tls.load_cert_chain(str(pki.serving_cert), str(pki.serving_key))
    tls.verify_mode = ssl.CERT_REQUIRED
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    calls = tmp_path / "calls.jsonl"
    url = f"https://127.0.0.1:{port}/validate"
    with_cert = {
        "name": "mtls",
        "url": url,
        "tlsConfig": {
            "caFile": str(pki.ca_cert),
            "clientCertFile": str(pki.client_cert("admin")),
            "clientKeyFile": str(pki.client_key("admin")),
        },
    }
    without_cert = {"name": "nocert", "url": url, "tlsConfig": {"caFile": str(pki.ca_cert)}}
    try:
        server.modes["validate"] = "deny-calculator"
        async with proxy(tmp_path, "mtls", {"validating": [with_cert]}, calls) as proxied:
            status, body = await raw_call(proxied, {"city": "T"})
            assert status == 200 and "sunny in T" in json.dumps(body), body
            status, body = await raw_call(proxied, {"a": 1}, name="calculator")
            assert body["error"]["code"] == FORBIDDEN
        async with proxy(tmp_path, "nocert", {"validating": [without_cert]}, calls) as proxied:
            status, body = await raw_call(proxied, {"city": "U"})
            assert status == 200 and body["error"]["code"] == WEBHOOK_FAILED, body
    finally:
        await runner.cleanup()
    assert [c["arguments"]["city"] for c in served(calls)] == ["T"]


def test_plain_http_needs_insecure_skip_verify(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"validating": [{"name": "v", "url": "http://example.invalid/x"}]}))
    with pytest.raises(WebhookConfigError, match=r"validating\[0\]\.url: v uses http://"):
        load_webhook_config(path)
