"""`mcpfleet proxy --remote` hardening: the stdio mode's DNS-rebinding policy (foreign Host / Origin
are refused before anything is relayed, `--allowed-host` extends it), credentials in the remote URL
never shown (`/health`, logs, errors, run config), and the configured headers replace the client's
whatever their case."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import aiohttp
import httpx
import pytest

from mcpfleet.proxy.http_app import security_for
from mcpfleet.proxy.remote import RemoteProxyApp
from mcpfleet.redact import redact_text, redact_url
from tests.conformance import harness
from tests.proxy.conftest import serve_app, wait_healthy

SECRETS = ("hunter2", "KEY-123", "TOK-456", "frag-789")


class Upstream:
    """Records the headers of every request it gets and answers 200."""

    def __init__(self) -> None:
        self.seen: list[list[tuple[str, str]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.seen.append([(k.decode(), v.decode()) for k, v in scope["headers"]])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"x/y")]})
        await send({"type": "http.response.body", "body": b"relayed"})


def test_redaction_masks_userinfo_query_values_and_fragment() -> None:
    url = "https://user:hunter2@mcp.example:8443/mcp?api_key=KEY-123&token=TOK-456&flag#frag-789"
    shown = redact_url(url)
    assert shown == "https://***@mcp.example:8443/mcp?api_key=***&token=***&***#***"
    assert redact_url("http://127.0.0.1:9/mcp") == "http://127.0.0.1:9/mcp"  # nothing to hide
    assert redact_url("https://TOK-456@mcp.example/mcp") == "https://***@mcp.example/mcp"
    assert redact_url("http://[::1/broken?k=TOK-456") == "http://***"
    text = redact_text(f"starting: mcpfleet proxy --remote {url} --port 1; error at {url}.")
    assert not any(s in text for s in SECRETS) and text.count("https://***@mcp.example:8443/mcp") == 2


async def test_foreign_host_and_origin_are_refused_before_relaying() -> None:
    upstream = Upstream()
    async with serve_app(upstream) as remote:
        app = RemoteProxyApp(
            remote + "/mcp", {"X-Secret": "s"}, security=security_for("127.0.0.1", ["proxy.internal:8080"])
        )
        async with serve_app(app) as base, aiohttp.ClientSession() as http:
            cases = {
                "foreign host": ({"Host": "evil.example"}, 421),
                "foreign host with a loopback port": ({"Host": "evil.example:8080"}, 421),
                "foreign origin": ({"Origin": "http://evil.example"}, 403),
                "foreign origin on an allowed host": (
                    {"Host": "proxy.internal:8080", "Origin": "https://evil.example"},
                    403,
                ),
                "loopback": ({}, 200),
                "loopback origin": ({"Origin": base}, 200),
                "allowed host (--allowed-host)": ({"Host": "proxy.internal:8080"}, 200),
                "allowed host and its origin": (
                    {"Host": "proxy.internal:8080", "Origin": "https://proxy.internal:8080"},
                    200,
                ),
            }
            for why, (headers, expected) in cases.items():
                before = len(upstream.seen)
                async with http.post(f"{base}/mcp", data=b"{}", headers=headers) as r:
                    assert r.status == expected, (why, r.status, await r.text())
                assert len(upstream.seen) == before + (expected == 200), why
            # /health stays reachable for probes (it relays nothing).
            async with http.get(f"{base}/health", headers={"Host": "10.0.0.7:8080"}) as r:
                assert r.status == 200


async def test_configured_headers_replace_the_clients_whatever_their_case() -> None:
    upstream = Upstream()
    async with serve_app(upstream) as remote:
        app = RemoteProxyApp(remote + "/mcp", {"Authorization": "Bearer configured", "X-Api-Key": "k"})
        async with serve_app(app) as base, aiohttp.ClientSession() as http:
            headers = {"authorization": "Bearer client", "x-api-key": "client", "X-Other": "1"}
            async with http.post(f"{base}/mcp", data=b"{}", headers=headers) as r:
                assert r.status == 200
    (seen,) = upstream.seen
    auth = [v for k, v in seen if k == "authorization"]
    keys = [v for k, v in seen if k == "x-api-key"]
    assert auth == ["Bearer configured"] and keys == ["k"] and ("x-other", "1") in seen


async def test_client_headers_that_normalise_to_a_configured_one_are_dropped() -> None:
    """Regression (issue 27, --remote risk): `X_Api_Key` from the client went upstream beside the
    configured `X-Api-Key`; a CGI-style remote reads both as HTTP_X_API_KEY. Hop-by-hop names
    spelled with `_` are dropped too."""
    upstream = Upstream()
    async with serve_app(upstream) as remote:
        app = RemoteProxyApp(remote + "/mcp", {"X-Api-Key": "k", "Authorization": "Bearer configured"})
        async with serve_app(app) as base, httpx.AsyncClient() as http:
            spoofed = [
                ("X_Api_Key", "client-1"),
                ("x_api-key", "client-2"),
                ("X-API_KEY", "client-3"),
                ("Authorization", "Bearer client"),
                ("Transfer_Encoding", "chunked"),
                ("Content_Length", "999"),
                ("X_Other", "kept"),
            ]
            r = await http.post(f"{base}/mcp", content=b"{}", headers=spoofed)
            assert r.status_code == 200
    (seen,) = upstream.seen

    def spelled(name: str) -> list[str]:
        return [v for k, v in seen if k.lower().replace("_", "-") == name]

    assert spelled("x-api-key") == ["k"] and spelled("authorization") == ["Bearer configured"]
    assert spelled("transfer-encoding") == [] and spelled("content-length") == ["2"]
    assert ("x_other", "kept") in seen


async def test_cli_remote_honours_allowed_host_and_redacts_credentials(tmp_path: Any) -> None:
    upstream = Upstream()
    async with serve_app(upstream) as remote:
        port = harness.free_port()
        remote_url = remote.replace("http://", "http://user:hunter2@") + "/mcp?api_key=KEY-123#frag-789"
        env = {**os.environ, "REMOTE_TOKEN": "TOK-456\n"}
        cmd = [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--remote", remote_url]
        cmd += ["--port", str(port), "--allowed-host", f"proxy.internal:{port}"]
        cmd += ["--bearer-token-from-env", "REMOTE_TOKEN", "--log-level", "info"]
        log = tmp_path / "proxy.log"
        with log.open("wb") as stderr:
            proc = await asyncio.create_subprocess_exec(*cmd, stderr=stderr, env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            await wait_healthy(base)
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{base}/health") as r:
                    health = await r.text()
                async with http.post(f"{base}/mcp", data=b"{}", headers={"Host": "evil.example"}) as r:
                    assert r.status == 421
                assert upstream.seen == []
                async with http.post(
                    f"{base}/mcp", data=b"{}", headers={"Host": f"proxy.internal:{port}"}
                ) as r:
                    assert r.status == 200 and await r.text() == "relayed"
        finally:
            proc.terminate()
            await proc.wait()
    (seen,) = upstream.seen
    assert dict(seen)["authorization"] == "Bearer TOK-456"  # the bearer token, stripped, from the env
    assert not any(s in health for s in SECRETS), health
    assert "http://***@127.0.0.1" in health and "api_key=***" in health
    # Unreachable now: the error lands in /health and the log, redacted.
    proc = await asyncio.create_subprocess_exec(*cmd, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        await wait_healthy(base)
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/mcp", data=b"{}") as r:
                assert r.status == 502
            async with http.get(f"{base}/health") as r:
                health = await r.text()
    finally:
        proc.terminate()
        _, stderr_bytes = await proc.communicate()
    logged = log.read_text() + stderr_bytes.decode()
    assert "unreachable" in logged and '"lastError":' in health
    for where, text in (("health", health), ("log", logged)):
        assert not any(s in text for s in SECRETS), (where, text)


async def test_cli_refuses_a_missing_bearer_variable() -> None:
    cmd = [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--remote", "https://u:hunter2@x.example/mcp"]
    cmd += ["--bearer-token-from-env", "NOT_SET_ANYWHERE"]
    env = {k: v for k, v in os.environ.items() if k != "NOT_SET_ANYWHERE"}
    proc = await asyncio.create_subprocess_exec(*cmd, stderr=asyncio.subprocess.PIPE, env=env)
    _, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode != 0 and "NOT_SET_ANYWHERE is not set" in stderr.decode()
    assert "hunter2" not in stderr.decode()


@pytest.mark.parametrize("url", ["ftp://u:hunter2@x/mcp?k=KEY-123", "not a url?token=TOK-456"])
def test_a_bad_remote_url_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(ValueError) as info:
        RemoteProxyApp(url)
    assert not any(s in str(info.value) for s in SECRETS)


async def test_url_credentials_become_a_basic_header_not_a_500() -> None:
    upstream = Upstream()
    async with serve_app(upstream) as remote:
        url = remote.replace("http://", "http://us%40er:hun%3Ater2@") + "/mcp?api_key=KEY-123"
        app = RemoteProxyApp(url)
        async with serve_app(app) as base, aiohttp.ClientSession() as http:
            # A client's own Authorization would clash with the URL's credentials: ours win.
            async with http.post(f"{base}/mcp", data=b"{}", headers={"Authorization": "Bearer c"}) as r:
                assert r.status == 200
    (seen,) = upstream.seen
    assert [v for k, v in seen if k == "authorization"] == ["Basic dXNAZXI6aHVuOnRlcjI="]  # us@er:hun:ter2
