"""Client ID Metadata Documents: with `cimd.enabled`, an https `client_id` names its own metadata,
fetched over TLS (the dev-cluster PKI's CA here), validated like a registration and cached; a
document naming another client_id, or an unreachable one, is `invalid_client`, never a 5xx."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
from aiohttp import web

from mcpfleet.auth.authserver.server import AuthServer
from mcpfleet.devcluster.pki import ensure_pki
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
    settings = unreachable_upstream_settings(cimd_enabled=True)
    verify = ssl.create_default_context(cafile=str(pki.ca_cert))
    server = AuthServer(settings, resource=ISSUER + "/mcp", http=httpx.AsyncClient(verify=verify, timeout=5))
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
