"""The gateway's `/status`: credentials redacted, the `/mcp` Host / Origin policy, and what a caller
without a token sees on a gateway with incoming auth (issue 27, defect 8). With its hostile suite:
a corpus of hostile requests (tokens, Host, Origin, methods) and a property test over Host, Origin
and Authorization values against an OIDC gateway: never a 5xx or a credential, the whole document
only with a valid token.

Before: backend URL credentials (`user:pw@`, query values) were shown verbatim, a foreign `Host`
was served, and an OIDC gateway showed everything to anyone.
"""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.server import ServeOptions, build_app
from mcpfleet.vmcp.status import SUMMARY_KEYS
from tests.hostile import TEST_LIMITS, ThreadServers
from tests.oidc import Issuer
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend
from tests.vmcp.test_auth import issuer as issuer  # the fixture

SECRETS = ("hunter2", "sekrit-token", "other-secret")


def _secret_url(port: int) -> str:
    return f"http://alice:hunter2@127.0.0.1:{port}/mcp?token=sekrit-token&plain=other-secret"


async def _get(h: aiohttp.ClientSession, url: str, **headers: str) -> tuple[int, str]:
    async with h.get(url, headers=headers) as r:
        return r.status, await r.text()


async def test_status_redacts_backend_credentials(
    gateway: GatewayFactory, served: Any, tmp_path: Path
) -> None:
    s = await served(JsonRpcBackend("be"))
    status_file = tmp_path / "status.json"
    gw = await gateway(
        {"backends": [{"name": "be", "url": _secret_url(s.port)}]}, status_file=str(status_file)
    )
    async with aiohttp.ClientSession() as h:
        code, text = await _get(h, gw.base + "/status")
    assert code == 200
    for secret in SECRETS:
        assert secret not in text, text
    (backend,) = json.loads(text)["backends"]
    assert backend["url"] == f"http://***@127.0.0.1:{s.port}/mcp?token=***&plain=***", backend
    assert backend["state"] == "ready"  # the credentials still reach the backend; only the view is masked
    # The status file (and so a VirtualMCPServer's status) carries the same masked URL.
    gw.app.gateway.reporter.mark_dirty()
    for _ in range(100):
        if status_file.exists():
            break
        await asyncio.sleep(0.05)
    assert not any(secret in status_file.read_text() for secret in SECRETS)


async def test_status_applies_the_host_and_origin_policy(gateway: GatewayFactory, served: Any) -> None:
    s = await served(JsonRpcBackend("be"))
    gw = await gateway({"backends": [{"name": "be", "url": s.url}]})
    async with aiohttp.ClientSession() as h:
        assert (await _get(h, gw.base + "/status", Host="evil.example"))[0] == 421
        assert (await _get(h, gw.base + "/status", Origin="http://evil.example"))[0] == 403
        assert (await _get(h, gw.base + "/status", Origin="http://localhost:1234"))[0] == 200


async def test_status_without_a_token_is_a_summary_on_an_authenticated_gateway(
    gateway: GatewayFactory, served: Any, issuer: Any
) -> None:
    s = await served(JsonRpcBackend("be"))
    issuer.add_rsa("k")
    auth = {"type": "oidc", "oidc": {"issuer": issuer.base, "audience": "vmcp", "insecureAllowHTTP": True}}
    gw = await gateway({"backends": [{"name": "be", "url": _secret_url(s.port)}], "incomingAuth": auth})
    async with aiohttp.ClientSession() as h:
        code, text = await _get(h, gw.base + "/status")
        assert code == 200
        summary = json.loads(text)
        assert set(summary) == set(SUMMARY_KEYS), summary
        assert "be" not in json.dumps(summary["name"]) and "backends" not in summary
        code, _ = await _get(h, gw.base + "/status", Authorization="Bearer not-a-jwt")
        assert code == 401
        code, text = await _get(h, gw.base + "/status", Authorization="Bearer " + issuer.token("k"))
        assert code == 200
        full = json.loads(text)
        assert [b["name"] for b in full["backends"]] == ["be"]
        assert not any(secret in text for secret in SECRETS)


# ---- hostile suite: corpus + property test against a thread-served OIDC gateway --------------


def _start_oidc() -> tuple[ThreadServers, str, Issuer]:
    servers = ThreadServers()
    issuer = Issuer()
    issuer.base = servers.add(issuer, None)
    issuer.add_rsa("k")
    backend_base = servers.add(JsonRpcBackend("be"), None)
    port = int(backend_base.rsplit(":", 1)[1])
    auth = {"type": "oidc", "oidc": {"issuer": issuer.base, "audience": "vmcp", "insecureAllowHTTP": True}}
    cfg = parse_config(
        {"name": "st", "backends": [{"name": "be", "url": _secret_url(port)}], "incomingAuth": auth}
    )
    base = servers.add(build_app(cfg, ServeOptions(host="127.0.0.1")), TEST_LIMITS)
    servers.start()
    return servers, base, issuer


@pytest.fixture(scope="module")
def oidc_gateway() -> Iterator[tuple[str, Issuer]]:
    servers, base, issuer = _start_oidc()
    try:
        yield base, issuer
    finally:
        servers.stop()


def _status(base: str, method: str = "GET", path: str = "/status", **headers: str) -> tuple[int, bytes]:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest(method, path, skip_host="host" in {k.lower() for k in headers})
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _check_status_answer(code: int, body: bytes, token_ok: bool) -> None:
    assert code in (200, 401, 403, 421), (code, body[:200])
    for marker in (b"Traceback", b"hunter2", b"sekrit-token", b"other-secret"):
        assert marker not in body, body[:300]
    if code == 200:
        doc = json.loads(body)
        assert ("backends" in doc) == token_ok, doc
        if not token_ok:
            assert set(doc) == set(SUMMARY_KEYS), doc


STATUS_CORPUS: list[tuple[str, dict[str, str], int, bool]] = [
    ("no token", {}, 200, False),
    ("empty authorization", {"Authorization": ""}, 401, False),
    ("basic scheme", {"Authorization": "Basic YTpi"}, 401, False),
    ("bearer garbage", {"Authorization": "Bearer x.y.z"}, 401, False),
    ("bearer alg none", {"Authorization": "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."}, 401, False),
    ("foreign host", {"Host": "evil.example"}, 421, False),
    ("host with a loopback prefix", {"Host": "127.0.0.1.evil.example"}, 421, False),
    ("foreign origin", {"Origin": "http://evil.example"}, 403, False),
    ("null origin", {"Origin": "null"}, 403, False),
    ("foreign host and a valid token", {"Host": "evil.example", "Authorization": "VALID"}, 421, False),
    ("valid token", {"Authorization": "VALID"}, 200, True),
]


@pytest.mark.parametrize(
    ("headers", "code", "full"), [c[1:] for c in STATUS_CORPUS], ids=[c[0] for c in STATUS_CORPUS]
)
def test_status_corpus(
    oidc_gateway: tuple[str, Issuer], headers: dict[str, str], code: int, full: bool
) -> None:
    base, issuer = oidc_gateway
    sent = {k: ("Bearer " + issuer.token("k") if v == "VALID" else v) for k, v in headers.items()}
    got, body = _status(base, **sent)
    assert got == code, (got, body[:200])
    _check_status_answer(got, body, full)


def test_status_other_methods_and_queries(oidc_gateway: tuple[str, Issuer]) -> None:
    base, _ = oidc_gateway
    for method in ("POST", "DELETE", "HEAD", "OPTIONS"):
        code, body = _status(base, method)
        assert code < 500 and b"hunter2" not in body
    code, body = _status(base, path="/status?verbose=1&backends=all")
    _check_status_answer(code, body, False)


_header_text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40)


@given(
    host=st.one_of(st.none(), _header_text, st.sampled_from(["127.0.0.1", "localhost:1", "[::1]:9"])),
    origin=st.one_of(st.none(), _header_text, st.sampled_from(["http://localhost:3", "http://evil"])),
    auth=st.one_of(st.none(), _header_text.map(lambda t: "Bearer " + t), st.just("VALID")),
)
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_status_property(
    oidc_gateway: tuple[str, Issuer], host: str | None, origin: str | None, auth: str | None
) -> None:
    base, issuer = oidc_gateway
    headers: dict[str, str] = {}
    if host is not None:
        headers["Host"] = host
    if origin is not None:
        headers["Origin"] = origin
    if auth is not None:
        headers["Authorization"] = "Bearer " + issuer.token("k") if auth == "VALID" else auth
    code, body = _status(base, **headers)
    _check_status_answer(code, body, code == 200 and auth == "VALID")
