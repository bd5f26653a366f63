"""Refresh-token reuse detection (issue 27 item 11; OAuth 2.1 section 4.3.1, RFC 9700 section 4.14.2):
refresh tokens rotate on every use, and a rotated token presented again means two parties hold the
family, so the whole family (the login session) is revoked: the newest refresh token stops working
too. Checked on both storage backends (memory, and a real Redis from `tests/redis_server.py`), through
a real `mcpfleet proxy --remote` with the test OIDC IdP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.authserver.flow import login, token
from tests.authserver.test_flow import idp, start_proxy  # noqa: F401 - the fixture
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.redis_server import RedisServer, redis_server  # noqa: F401 - the fixture
from tests.vmcp.servers import JsonRpcBackend, Served


def _storage(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if backend == "memory":
        return {}
    served: RedisServer = request.getfixturevalue("redis_server")
    (tmp_path / "redis-password").write_text(served.password + "\n")
    return {
        "storage": "redis",
        "redis": {"addr": served.address, "passwordFile": str(tmp_path / "redis-password")},
    }


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_replayed_refresh_token_revokes_its_family(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    idp: Issuer,  # noqa: F811
) -> None:
    served_backend = await Served(JsonRpcBackend("backend")).start()
    proxy, _ = await start_proxy(tmp_path, served_backend.url, idp, **_storage(backend, request, tmp_path))
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            done = await login(http, proxy.url)
            other = await login(http, proxy.url)  # another login of the same user: not in the family

            def form(refresh: str, client_id: str = done.client_id) -> dict[str, str]:
                return {"grant_type": "refresh_token", "refresh_token": refresh, "client_id": client_id}

            first = done.tokens["refresh_token"]
            rotated = await token(http, done.metadata, form(first))
            assert rotated.status_code == 200, rotated.text
            second = rotated.json()["refresh_token"]
            newer = await token(http, done.metadata, form(second))
            assert newer.status_code == 200, newer.text
            newest = newer.json()["refresh_token"]

            # The first token again (an attacker's copy, or the client's): refused ...
            replay = await token(http, done.metadata, form(first))
            assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant", replay.text
            # ... and the family is revoked: the newest token of that login no longer works,
            ended = await token(http, done.metadata, form(newest))
            assert ended.status_code == 400 and ended.json()["error"] == "invalid_grant", ended.text
            # nor does the access token issued to it,
            refused = await http.post(
                proxy.url,
                json=initialize_request(),
                headers={
                    **STREAMABLE_HTTP_HEADERS,
                    "Authorization": f"Bearer {newer.json()['access_token']}",
                },
            )
            assert refused.status_code == 401, refused.text
            # while another login is untouched.
            unrelated = await token(
                http, other.metadata, form(other.tokens["refresh_token"], other.client_id)
            )
            assert unrelated.status_code == 200, unrelated.text
            # Replaying again is refused the same way, never a 5xx.
            again = await token(http, done.metadata, form(second))
            assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text
    finally:
        await proxy.stop()
        await served_backend.stop()
