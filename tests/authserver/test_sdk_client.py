"""The MCP Python SDK's own OAuth client (`OAuthClientProvider`) against a proxy with the embedded
authorization server: it discovers the server from the 401 (RFC 9728 -> RFC 8414), registers (RFC
7591), runs the authorization code flow with PKCE through the upstream IdP (the "browser" here
follows the redirects), checks `iss`, exchanges the code and calls tools with the JWT."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
from mcp.client.auth import OAuthClientProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.authserver.flow import REDIRECT
from tests.authserver.test_flow import idp, start_proxy  # noqa: F401 - the fixture
from tests.oidc import Issuer
from tests.vmcp.servers import JsonRpcBackend, Served


class MemoryTokens:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_mcp_sdk_oauth_client_logs_in_and_calls_tools(tmp_path: Path, idp: Issuer) -> None:  # noqa: F811
    backend = JsonRpcBackend("backend")
    backend_served = await Served(backend).start()
    proxy, _ = await start_proxy(tmp_path, backend_served.url, idp)
    came_back: list[AuthorizationCodeResult] = []

    async def browser(url: str) -> None:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            answer = await http.get(url)
            while answer.status_code == 302:
                location = answer.headers["location"]
                if location.startswith(REDIRECT):
                    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
                    came_back.append(
                        AuthorizationCodeResult(
                            code=query["code"], state=query.get("state"), iss=query.get("iss")
                        )
                    )
                    return
                answer = await http.get(location)
        raise AssertionError(f"the login did not come back: {answer.status_code} {answer.text}")

    async def callback() -> AuthorizationCodeResult:
        return came_back[-1]

    storage = MemoryTokens()
    provider = OAuthClientProvider(
        server_url=proxy.url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT],
            client_name="mcp sdk",
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser,
        callback_handler=callback,
    )
    try:
        transport = streamable_http_client(proxy.url, http_client=create_mcp_http_client(auth=provider))
        async with Client(transport, mode="legacy") as client:
            tools = await client.list_tools()
        assert [t.name for t in tools.tools] == ["echo"]
        assert storage.tokens is not None and storage.client is not None
        upstream = backend.headers_by_method["tools/list"]["authorization"].removeprefix("Bearer ")
        assert idp.access_tokens[upstream] == "user-1"
    finally:
        await proxy.stop()
        await backend_served.stop()
