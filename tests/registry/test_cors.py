"""CORS (issue 32 item 1): preflights answered as the official registry answers them (204, `*`, the
method, the echoed request headers, a max-age, `Vary`), `Vary: Origin` and the allow-origin header on
every answer, configurable origins, CORS off with `allowedOrigins: []`; and hostile preflights."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.registry.config import ConfigError, parse_config
from tests.registry.conftest import running, server_doc, write_json

ORIGIN = "https://console.example.com"


def _config(tmp_path: Path, **extra: Any) -> Any:
    source = write_json(tmp_path / "s.json", [server_doc("io.example/one")])
    return parse_config(
        {
            "registryName": "cors",
            "sources": [{"name": "s", "file": {"path": str(source)}}],
            "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"},
            **extra,
        }
    )


def _preflight(method: str = "GET", headers: str | None = "Content-Type, X-Custom") -> dict[str, str]:
    out = {"origin": ORIGIN, "access-control-request-method": method}
    if headers is not None:
        out["access-control-request-headers"] = headers
    return out


async def test_default_cors_is_the_officials(tmp_path: Path) -> None:
    async with running(_config(tmp_path), tmp_path) as h:
        await h.sync()
        for route, method in [
            ("/v0.1/servers", "GET"),
            ("/v0.1/servers/io.example%2Fone/versions/latest", "GET"),
            ("/v0.1/publish", "POST"),
            ("/v0/servers/io.example%2Fone/status", "PATCH"),
        ]:
            r = await h.client.options(route, headers=_preflight(method))
            assert r.status_code == 204, (route, r.text)
            assert r.headers["access-control-allow-origin"] == "*"
            assert r.headers["access-control-allow-methods"] == method
            assert r.headers["access-control-allow-headers"] == "Content-Type, X-Custom"
            assert r.headers["access-control-max-age"] == "86400"
            assert "Origin" in r.headers["vary"] and r.content == b""
        r = await h.get("/v0.1/servers", headers={"origin": ORIGIN})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
        assert r.headers["vary"] == "Origin"
        assert "Content-Type" in r.headers["access-control-expose-headers"]
        # No Origin: only Vary, as the official.
        r = await h.get("/v0.1/servers")
        assert r.headers["vary"] == "Origin" and "access-control-allow-origin" not in r.headers
        # Problem answers carry them too (a browser must be able to read the error).
        r = await h.get("/v0.1/servers?limit=0", headers={"origin": ORIGIN})
        assert r.status_code == 422 and r.headers["access-control-allow-origin"] == "*"
        r = await h.client.post("/v0.1/publish", json={}, headers={"origin": ORIGIN})
        assert r.status_code == 405 and r.headers["access-control-allow-origin"] == "*"


async def test_configured_origins(tmp_path: Path) -> None:
    cors = {"allowedOrigins": [ORIGIN, "https://*.acme.com"], "allowedMethods": ["GET"], "maxAge": 60}
    async with running(_config(tmp_path, cors=cors), tmp_path) as h:
        r = await h.client.options("/v0.1/servers", headers=_preflight())
        assert r.status_code == 204 and r.headers["access-control-allow-origin"] == ORIGIN
        assert r.headers["access-control-max-age"] == "60"
        wild = {**_preflight(), "origin": "https://ui.acme.com"}
        assert (await h.client.options("/v0.1/servers", headers=wild)).headers[
            "access-control-allow-origin"
        ] == "https://ui.acme.com"
        for refused in (
            {**_preflight(), "origin": "https://evil.example"},
            {**_preflight(), "origin": "https://acme.com.evil.example"},
            _preflight("DELETE"),  # a method not allowed
        ):
            r = await h.client.options("/v0.1/servers", headers=refused)
            assert r.status_code == 204 and "access-control-allow-origin" not in r.headers
            assert "access-control-allow-methods" not in r.headers
        r = await h.get("/v0.1/servers", headers={"origin": "https://evil.example"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


async def test_cors_off(tmp_path: Path) -> None:
    async with running(_config(tmp_path, cors={"allowedOrigins": []}), tmp_path) as h:
        r = await h.client.options("/v0.1/servers", headers=_preflight())
        assert r.status_code in (404, 405) and "access-control-allow-origin" not in r.headers
        r = await h.get("/v0.1/servers", headers={"origin": ORIGIN})
        assert "access-control-allow-origin" not in r.headers and "vary" not in r.headers


def test_cors_config_errors(tmp_path: Path) -> None:
    for cors in (
        {"allowedOrigins": ["a, b"]},
        {"allowedHeaders": [""]},
        {"maxAge": -1},
        {"allowedOrigins": "*"},
    ):
        with pytest.raises(ConfigError, match="cors"):
            _config(tmp_path, cors=cors)


_HEADER_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    origin=st.none() | _HEADER_TEXT,
    method=_HEADER_TEXT,
    asked=st.none() | _HEADER_TEXT,
    path=st.sampled_from(["/v0.1/servers", "/v0.1/publish", "/nowhere", "/health", "/v0.1/validate"]),
)
def test_any_preflight_is_a_204_never_an_error(
    tmp_path_factory: pytest.TempPathFactory, origin: str | None, method: str, asked: str | None, path: str
) -> None:
    async def run() -> None:
        tmp = tmp_path_factory.mktemp("cors")
        cors = {"allowedOrigins": [ORIGIN, "https://*.acme.com"]}
        async with running(_config(tmp, cors=cors), tmp) as h:
            headers = {"access-control-request-method": method}
            if origin is not None:
                headers["origin"] = origin
            if asked is not None:
                headers["access-control-request-headers"] = asked
            r = await h.client.options(path, headers=headers)
            assert r.status_code == 204 and r.content == b""
            allowed = r.headers.get("access-control-allow-origin")
            assert allowed is None or (allowed == origin and origin is not None)
            if allowed is not None:
                assert origin == ORIGIN or (origin.startswith("https://") and origin.endswith(".acme.com"))

    asyncio.run(run())


async def test_preflight_needs_no_token_where_reads_do(tmp_path: Path) -> None:
    # Browsers send preflights without credentials: answered before the reader-auth guard, while
    # the actual request still needs its token (and its 401 carries the CORS headers, so a browser
    # app can read why).
    auth = {"type": "oidc", "oidc": {"issuer": "https://idp.example.com", "audience": "registry"}}
    async with running(_config(tmp_path, auth=auth), tmp_path) as h:
        r = await h.client.options("/v0.1/servers", headers=_preflight("GET", "Authorization"))
        assert r.status_code == 204 and r.headers["access-control-allow-headers"] == "Authorization"
        r = await h.get("/v0.1/servers", headers={"origin": ORIGIN})
        assert r.status_code == 401 and r.headers["access-control-allow-origin"] == "*"
