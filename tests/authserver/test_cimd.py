"""Client ID Metadata Documents: with `cimd.enabled`, an https `client_id` names its own metadata,
fetched over TLS (the dev-cluster PKI's CA here), validated like a registration and cached; a
document naming another client_id, or an unreachable one, is `invalid_client`, never a 5xx.

The fetch is behind the request-forgery guard: by default a document on a non-public address
(loopback here, any spelling of it, or a name resolving to it) is refused without a connection, and
the error names client_id; `cimd.allowPrivateIP` lets the loopback document server of these tests
through."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import httpx
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.auth.authserver.server import AuthServer
from mcpfleet.devcluster.pki import ensure_pki
from mcpfleet.netguard import BLOCKED
from tests.authserver.flow import ISSUER, REDIRECT, pkce, unreachable_upstream_settings


async def test_cimd_client_is_resolved_over_https(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki")
    fetched: list[str] = []

    async def document(request: web.Request) -> web.Response:
        fetched.append(request.path)
        own = f"https://127.0.0.1:{request.url.port}{request.path}"
        client_id = own if request.path == "/client.json" else "https://elsewhere.example/client.json"
        return web.json_response({"client_id": client_id, "redirect_uris": [REDIRECT], "client_name": "cimd"})

    app = web.Application()
    app.router.add_get("/client.json", document)
    app.router.add_get("/impostor.json", document)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(pki.serving_cert), str(pki.serving_key))
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    settings = unreachable_upstream_settings(cimd_enabled=True, cimd_allow_private_ip=True)
    verify = ssl.create_default_context(cafile=str(pki.ca_cert))
    server = AuthServer(settings, resource=ISSUER + "/mcp", cimd_verify=verify)
    _, challenge = pkce()
    client_id = f"https://127.0.0.1:{port}/client.json"
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    transport = httpx.ASGITransport(app=server)  # type: ignore[arg-type]
    try:
        async with httpx.AsyncClient(transport=transport, base_url=ISSUER) as http:
            metadata = (await http.get("/.well-known/oauth-authorization-server")).json()
            assert metadata["client_id_metadata_document_supported"] is True
            for _ in range(2):
                answer = await http.get("/oauth/authorize", params=params)
                assert answer.status_code == 302, answer.text
                assert answer.headers["location"].startswith("http://127.0.0.1:2/authorize?")
            assert fetched == ["/client.json"]  # cached
            impostor = await http.get(
                "/oauth/authorize", params={**params, "client_id": f"https://127.0.0.1:{port}/impostor.json"}
            )
            assert impostor.status_code == 401 and impostor.json()["error"] == "invalid_client"
            missing = await http.get(
                "/oauth/authorize", params={**params, "client_id": f"https://127.0.0.1:{port}/none"}
            )
            assert missing.status_code == 401 and missing.json()["error"] == "invalid_client"
            wrong_uri = await http.get(
                "/oauth/authorize", params={**params, "redirect_uri": "http://127.0.0.1:9/x"}
            )
            assert wrong_uri.status_code == 400
    finally:
        await server.aclose()
        await runner.cleanup()


async def _document_server(tmp_path: Path, fetched: list[str]) -> tuple[web.AppRunner, int, ssl.SSLContext]:
    """A TLS document server on loopback that records every request it gets."""
    pki = ensure_pki(tmp_path / "pki")

    async def document(request: web.Request) -> web.Response:
        fetched.append(request.path)
        return web.json_response({"client_id": str(request.url), "redirect_uris": [REDIRECT]})

    app = web.Application()
    app.router.add_get("/{name}", document)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(pki.serving_cert), str(pki.serving_key))
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port, ssl.create_default_context(cafile=str(pki.ca_cert))


def _authorize_params(client_id: str) -> dict[str, str]:
    return {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "s",
        "code_challenge": pkce()[1],
        "code_challenge_method": "S256",
    }


async def test_non_public_document_address_is_refused_by_default(tmp_path: Path) -> None:
    """Issue 27 item 9: an unauthenticated /oauth/authorize made the server connect to any address
    named in client_id. Now the loopback document server, reached by literal, by other spellings of
    127.0.0.1 and by a name resolving to it, gets no request, and the answer names client_id."""
    fetched: list[str] = []
    runner, port, verify = await _document_server(tmp_path, fetched)
    server = AuthServer(
        unreachable_upstream_settings(cimd_enabled=True), resource=ISSUER + "/mcp", cimd_verify=verify
    )
    transport = httpx.ASGITransport(app=server)  # type: ignore[arg-type]
    try:
        async with httpx.AsyncClient(transport=transport, base_url=ISSUER) as http:
            for host in ("127.0.0.1", "localhost", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]", "[::1]"):
                client_id = f"https://{host}:{port}/client.json"
                answer = await http.get("/oauth/authorize", params=_authorize_params(client_id))
                assert answer.status_code == 401, (host, answer.status_code, answer.text)
                body = answer.json()
                assert body["error"] == "invalid_client", body
                assert body["error_description"].startswith("client_id: "), body
                assert "non-public address" in body["error_description"], body
        assert fetched == []
    finally:
        await server.aclose()
        await runner.cleanup()


@settings(max_examples=40, deadline=None)
@given(
    network=st.sampled_from(BLOCKED),
    offset=st.integers(min_value=0, max_value=2**32),
    path=st.from_regex(r"/[a-z0-9]{1,12}\.json", fullmatch=True),
)
def test_any_blocked_address_is_refused_without_5xx(network: object, offset: int, path: str) -> None:
    """Property: a client_id on any address of any blocked range is an invalid_client (401) naming
    client_id, decided before any connection (no address of these ranges is reachable from a test)."""
    import ipaddress

    assert isinstance(network, ipaddress.IPv4Network | ipaddress.IPv6Network)
    address = network[offset % network.num_addresses]
    host = f"[{address}]" if address.version == 6 else str(address)

    async def run() -> httpx.Response:
        server = AuthServer(unreachable_upstream_settings(cimd_enabled=True), resource=ISSUER + "/mcp")
        transport = httpx.ASGITransport(app=server)  # type: ignore[arg-type]
        try:
            async with httpx.AsyncClient(transport=transport, base_url=ISSUER) as http:
                return await http.get("/oauth/authorize", params=_authorize_params(f"https://{host}{path}"))
        finally:
            await server.aclose()

    answer = asyncio.run(run())
    assert answer.status_code == 401, (host, answer.status_code, answer.text)
    assert answer.json()["error_description"].startswith("client_id: "), answer.text
