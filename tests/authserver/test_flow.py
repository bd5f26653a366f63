"""The embedded authorization server in a real `mcpfleet proxy --remote` (`proxy.assemble.build_proxy`), with the
test OIDC issuer as the upstream IdP and a recording MCP backend: the whole OAuth flow, the JWT the
proxy accepts, the upstream token it injects (or the credentials it strips), replay and rotation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from mcpfleet.proxy.assemble import build_proxy
from mcpfleet.proxy.config import ProxyConfig
from tests.authserver.flow import REDIRECT, authorize, login, register, token
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.vmcp.servers import JsonRpcBackend, Served, free_port


async def start_proxy(
    tmp_path: Path, backend_url: str, idp: Issuer, **overrides: Any
) -> tuple[Served, dict[str, Any]]:
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    secret = tmp_path / "client-secret"
    secret.write_text("upstream-secret\n")
    hmac_key = tmp_path / "hmac"
    hmac_key.write_bytes(b"h" * 40)
    document: dict[str, Any] = {
        "issuer": issuer,
        "upstream": {
            "name": "test-idp",
            "type": "oidc",
            "issuerUrl": idp.base,
            "clientId": "mcpfleet",
            "clientSecretFile": str(secret),
        },
        "hmacSecretFiles": [str(hmac_key)],
        **overrides,
    }
    config = tmp_path / "authserver.json"
    config.write_text(json.dumps(document))
    app, _ = build_proxy(ProxyConfig(remote=backend_url, authserver_config=str(config)))
    return await Served(app, port).start(), document


@pytest.fixture
async def idp() -> Any:
    issuer = Issuer()
    issuer.add_ec("idp-key")
    issuer.clients["mcpfleet"] = "upstream-secret"
    served = await Served(issuer).start()
    issuer.base = served.base
    yield issuer
    await served.stop()


async def test_full_flow_injects_the_upstream_token(tmp_path: Path, idp: Issuer) -> None:
    backend = JsonRpcBackend("backend")
    backend_served = await Served(backend).start()
    proxy, document = await start_proxy(tmp_path, backend_served.url, idp)
    mcp_url = proxy.url
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            done = await login(http, mcp_url)
            access = done.tokens["access_token"]
            claims = jwt.decode(access, options={"verify_signature": False})
            assert claims["iss"] == document["issuer"] and claims["aud"] == mcp_url
            assert claims["sub"] == "user-1" and claims["client_id"] == done.client_id
            # The JWT's signature checks against the published JWKS.
            jwks = (await http.get(done.metadata["jwks_uri"])).json()
            key = jwt.PyJWKSet.from_dict(jwks).keys[0]
            jwt.decode(access, key.key, algorithms=["ES256"], audience=mcp_url, issuer=document["issuer"])

            answer = await http.post(
                mcp_url,
                json=initialize_request(),
                headers={**STREAMABLE_HTTP_HEADERS, "Authorization": f"Bearer {access}", "Cookie": "a=b"},
            )
            assert answer.status_code == 200, answer.text
            seen = backend.headers_by_method["initialize"]
            upstream = seen["authorization"].removeprefix("Bearer ")
            assert idp.access_tokens[upstream] == "user-1", seen
            assert "cookie" not in seen

            # A replayed code is refused, and ends the login it started.
            replay = await token(
                http,
                done.metadata,
                {
                    "grant_type": "authorization_code",
                    "code": done.code,
                    "redirect_uri": REDIRECT,
                    "client_id": done.client_id,
                    "code_verifier": done.verifier,
                },
            )
            assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
            ended = await token(
                http,
                done.metadata,
                {
                    "grant_type": "refresh_token",
                    "refresh_token": done.tokens["refresh_token"],
                    "client_id": done.client_id,
                },
            )
            assert ended.status_code == 400 and ended.json()["error"] == "invalid_grant", ended.text

            # A fresh login: refresh tokens rotate, the old one is refused.
            again = await login(http, mcp_url)
            form = {
                "grant_type": "refresh_token",
                "refresh_token": again.tokens["refresh_token"],
                "client_id": again.client_id,
            }
            rotated = await token(http, again.metadata, form)
            assert rotated.status_code == 200, rotated.text
            assert rotated.json()["refresh_token"] != again.tokens["refresh_token"]
            reused = await token(http, again.metadata, form)
            assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"

            # Tokens of another issuer (the IdP's own ID token) are refused by the proxy.
            foreign = idp.token("idp-key", aud=mcp_url)
            refused = await http.post(
                mcp_url,
                json=initialize_request(),
                headers={**STREAMABLE_HTTP_HEADERS, "Authorization": f"Bearer {foreign}"},
            )
            assert refused.status_code == 401
    finally:
        await proxy.stop()
        await backend_served.stop()


async def test_disable_upstream_token_injection_strips_credentials(tmp_path: Path, idp: Issuer) -> None:
    backend = JsonRpcBackend("backend")
    backend_served = await Served(backend).start()
    proxy, _ = await start_proxy(tmp_path, backend_served.url, idp, disableUpstreamTokenInjection=True)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            done = await login(http, proxy.url)
            headers = {
                **STREAMABLE_HTTP_HEADERS,
                "Authorization": f"Bearer {done.tokens['access_token']}",
                "Cookie": "s=1",
            }
            answer = await http.post(proxy.url, json=initialize_request(), headers=headers)
            assert answer.status_code == 200, answer.text
            seen = backend.headers_by_method["initialize"]
            assert "authorization" not in seen and "cookie" not in seen, seen
    finally:
        await proxy.stop()
        await backend_served.stop()


async def test_confidential_registration_only_when_allowed(tmp_path: Path, idp: Issuer) -> None:
    backend_served = await Served(JsonRpcBackend("backend")).start()
    proxy, document = await start_proxy(tmp_path, backend_served.url, idp)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            metadata = (await http.get(document["issuer"] + "/.well-known/oauth-authorization-server")).json()
            assert metadata["token_endpoint_auth_methods_supported"] == ["none"]
            assert metadata["code_challenge_methods_supported"] == ["S256"]
            answer = await http.post(
                metadata["registration_endpoint"],
                json={
                    "redirect_uris": ["https://app.example.com/cb"],
                    "token_endpoint_auth_method": "client_secret_basic",
                },
            )
            assert answer.status_code == 400 and answer.json()["error"] == "invalid_client_metadata"
            # A wrong redirect URI is never redirected to.
            client_id = await register(http, metadata)
            bad = await http.get(
                metadata["authorization_endpoint"],
                params={
                    "client_id": client_id,
                    "redirect_uri": "http://127.0.0.1:9/other",
                    "response_type": "code",
                },
            )
            assert bad.status_code == 400 and "location" not in bad.headers
            code, verifier = await authorize(http, metadata, client_id)
            wrong = await token(
                http,
                metadata,
                {
                    "grant_type": "authorization_code",
                    "code": code,
                    "client_id": client_id,
                    "code_verifier": verifier[:-1] + "x",
                },
            )
            assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    finally:
        await proxy.stop()
        await backend_served.stop()


async def test_expired_upstream_token_is_refreshed_before_injection(tmp_path: Path, idp: Issuer) -> None:
    idp.access_token_lifetime = 5  # inside the 30 s margin: every use refreshes it first
    backend = JsonRpcBackend("backend")
    backend_served = await Served(backend).start()
    proxy, _ = await start_proxy(tmp_path, backend_served.url, idp)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            done = await login(http, proxy.url)
            first_upstream = next(iter(idp.access_tokens))
            headers = {**STREAMABLE_HTTP_HEADERS, "Authorization": f"Bearer {done.tokens['access_token']}"}
            answer = await http.post(proxy.url, json=initialize_request(), headers=headers)
            assert answer.status_code == 200, answer.text
        injected = backend.headers_by_method["initialize"]["authorization"].removeprefix("Bearer ")
        assert injected != first_upstream and idp.access_tokens[injected] == "user-1"
        assert [r["grant_type"] for r in idp.token_requests] == ["authorization_code", "refresh_token"]
    finally:
        await proxy.stop()
        await backend_served.stop()


@pytest.mark.parametrize("kind", ["oauth2", "oidc"])
async def test_userinfo_gives_the_identity(tmp_path: Path, idp: Issuer, kind: str) -> None:
    """ToolHive's `userInfo` (oauth2: who the user is, from non-standard fields, with extra headers and
    POST) and `userInfoOverride` (oidc: name and email from the discovered userinfo endpoint, the subject
    the ID token's; an answer about someone else fails the login)."""
    mapping = {"subjectFields": ["missing", "id"], "nameFields": ["login"], "emailFields": ["mail"]}
    if kind == "oauth2":
        upstream: dict[str, Any] = {
            "name": "test-idp",
            "type": "oauth2",
            "authorizationEndpoint": idp.base + "/authorize",
            "tokenEndpoint": idp.base + "/token",
            "clientId": "mcpfleet",
            "userinfo": {
                "url": idp.base + "/userinfo",
                "method": "POST",
                "headers": {"X-Api-Version": "2022-11-28"},
                "subjectFields": mapping["subjectFields"],
                "nameFields": mapping["nameFields"],
                "emailFields": mapping["emailFields"],
            },
        }
    else:
        upstream = {
            "name": "test-idp",
            "type": "oidc",
            "issuerUrl": idp.base,
            "clientId": "mcpfleet",
            "userinfo": {"subjectFields": ["id"], "nameFields": ["login"], "emailFields": ["mail"]},
        }
    secret = tmp_path / "client-secret"
    secret.write_text("upstream-secret\n")
    upstream["clientSecretFile"] = str(secret)
    backend_served = await Served(JsonRpcBackend("backend")).start()
    proxy, _ = await start_proxy(tmp_path, backend_served.url, idp, upstream=upstream)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            done = await login(http, proxy.url)
            claims = jwt.decode(done.tokens["access_token"], options={"verify_signature": False})
            assert claims["sub"] == "user-1"
            assert claims["name"] == "user-1-login" and claims["email"] == "user-1@example.com"
            method, headers = idp.userinfo_requests[-1]
            assert headers["authorization"].startswith("Bearer upstream-at-")
            if kind == "oauth2":
                assert method == "POST" and headers["x-api-version"] == "2022-11-28"
            else:
                assert method == "GET"
                idp.userinfo_subject = "someone-else"  # userinfo must describe the ID token's subject
                with pytest.raises(KeyError, match="code"):  # the redirect carries error=, no code
                    await login(http, proxy.url)
    finally:
        await proxy.stop()
        await backend_served.stop()
