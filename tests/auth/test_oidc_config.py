"""Incoming-auth settings that must be refused or checked: the audience is required (or the resource
URL stands in for it), the discovery document must name the configured issuer, an introspected token
must be active and issued for us, and the client credentials are form-encoded (RFC 6749 2.3.1)."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from typing import Any

import pytest

from mcpfleet.auth.oidc import (
    AuthConfigError,
    AuthError,
    IncomingAuthSettings,
    OIDCAuthenticator,
    OIDCSettings,
    client_secret_basic,
    load_auth_config,
)
from mcpfleet.vmcp.config import ConfigError, parse_config
from tests.auth.test_token_corpus import local_issuer


def authenticator(issuer_base: str, **extra: Any) -> OIDCAuthenticator:
    cfg = OIDCSettings.model_validate({"issuer": issuer_base, "insecureAllowHTTP": True, **extra})
    return OIDCAuthenticator(cfg)


def test_audience_is_required_at_start_up(tmp_path: Any) -> None:
    no_audience = {"type": "oidc", "oidc": {"issuer": "https://idp.example"}}
    with pytest.raises(AuthConfigError, match=r"oidc\.audience: required"):
        IncomingAuthSettings.model_validate(no_audience).resolved()
    path = tmp_path / "auth.json"
    path.write_text('{"type": "oidc", "oidc": {"issuer": "https://idp.example"}}')
    with pytest.raises(AuthConfigError, match=r"auth\.json: oidc\.audience: required"):
        load_auth_config(path)
    with pytest.raises(AuthConfigError, match=r"oidc\.audience: required"):
        OIDCAuthenticator(OIDCSettings(issuer="https://idp.example"))
    # The vMCP refuses its config, naming the field.
    with pytest.raises(ConfigError, match=r"incomingAuth\.oidc\.audience: required"):
        parse_config({"backends": [], "incomingAuth": no_audience})
    # The resource URL is an audience too.
    with_resource = {"type": "oidc", "oidc": {"issuer": "https://idp.example", "resource": "https://me/mcp"}}
    assert (
        IncomingAuthSettings.model_validate(with_resource).resolved().oidc.expected_audience
        == "https://me/mcp"
    )  # type: ignore[union-attr]


async def test_resource_url_is_the_audience_when_none_is_given() -> None:
    async with local_issuer() as issuer:
        auth = authenticator(issuer.base, resource="https://me.example/mcp")
        try:
            claims = await auth.authenticate("Bearer " + issuer.token("r1", aud="https://me.example/mcp"))
            assert claims is not None and claims["sub"] == "user-1"
            with pytest.raises(AuthError, match="Audience"):
                await auth.authenticate("Bearer " + issuer.token("r1", aud="https://other.example/mcp"))
        finally:
            await auth.close()


async def test_discovery_document_must_name_the_configured_issuer(caplog: pytest.LogCaptureFixture) -> None:
    async with local_issuer() as issuer:
        issuer.advertised_issuer = "https://evil.example"
        auth = authenticator(issuer.base, audience="a")
        try:
            with pytest.raises(AuthError, match="discovery document names another issuer"):
                await auth.authenticate("Bearer " + issuer.token("r1", aud="a"))
            assert issuer.jwks_hits == 0  # its keys were never fetched
            assert any(
                "https://evil.example" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
            )
            issuer.advertised_issuer = None
            await asyncio.sleep(1.05)  # failed fetches are retried at most once a second
            assert await auth.authenticate("Bearer " + issuer.token("r1", aud="a"))
        finally:
            await auth.close()


async def test_introspection_checks_active_audience_and_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORPUS_CLIENT_SECRET", "p@ss:w/rd +")
    async with local_issuer() as issuer:
        now = int(time.time())
        issuer.opaque = {
            "good": {"active": True, "aud": "a", "iss": issuer.base},
            "good-list": {"active": True, "aud": ["x", "a"]},
            "inactive": {"active": False, "aud": "a"},
            "active-string": {"active": "true", "aud": "a"},
            "no-audience": {"active": True},
            "other-audience": {"active": True, "aud": "b"},
            "expired": {"active": True, "aud": "a", "exp": now - 3600},
            "not-yet": {"active": True, "aud": "a", "nbf": now + 3600},
            "other-issuer": {"active": True, "aud": "a", "iss": "https://evil.example"},
        }
        auth = authenticator(
            issuer.base,
            audience="a",
            introspectionUrl=issuer.base + "/introspect",
            clientId="my client",
            clientSecretEnv="CORPUS_CLIENT_SECRET",
        )
        try:
            for token in ("good", "good-list"):
                assert await auth.authenticate(f"Bearer {token}")
            for token in (
                "unknown",
                "inactive",
                "active-string",
                "no-audience",
                "other-audience",
                "expired",
                "not-yet",
                "other-issuer",
            ):
                with pytest.raises(AuthError):
                    await auth.authenticate(f"Bearer {token}")
        finally:
            await auth.close()
    # RFC 6749 2.3.1: id and secret are form-urlencoded before the Basic encoding.
    expected = base64.b64encode(b"my+client:p%40ss%3Aw%2Frd+%2B").decode()
    assert set(issuer.introspection_auth) == {f"Basic {expected}"}
    assert client_secret_basic("proxy", "pw") == "Basic cHJveHk6cHc="


@pytest.mark.parametrize("platform", ["kubernetes", "local"])
def test_an_inline_oidc_config_without_audience_fails_the_workload(platform: str) -> None:
    """The renderers say it before anything starts, naming the spec field (both platforms)."""
    from mcpfleet.reconcile import mcpremoteproxy
    from mcpfleet.reconcile.model import World
    from tests.reconcile.conftest import obj

    inline = "oidcConfig: {type: inline, inline: {issuer: 'https://idp.example'}}"
    proxy = obj(
        f"kind: MCPRemoteProxy\nmetadata: {{name: r}}\nspec: {{remoteURL: 'https://x/mcp', {inline}}}"
    )
    plan = mcpremoteproxy.plan(proxy, World(platform=platform, namespace="team"))  # type: ignore[arg-type]
    assert any(p.startswith("spec.oidcConfig.inline.audience: required") for p in plan.problems), (
        plan.problems
    )
    with_resource = inline.replace("type: inline,", "type: inline, resourceUrl: 'https://r.example/mcp',")
    proxy = obj(
        f"kind: MCPRemoteProxy\nmetadata: {{name: r}}\nspec: {{remoteURL: 'https://x/mcp', {with_resource}}}"
    )
    assert mcpremoteproxy.plan(proxy, World(platform=platform, namespace="team")).problems == ()  # type: ignore[arg-type]


def test_the_proxy_refuses_to_start_without_an_audience(tmp_path: Any) -> None:
    import subprocess
    import sys

    path = tmp_path / "auth.json"
    path.write_text('{"type": "oidc", "oidc": {"issuer": "https://idp.example"}}')
    cmd = [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--port", "0", "--auth-config", str(path)]
    done = subprocess.run([*cmd, "--", "true"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "oidc.audience: required" in done.stderr, done.stderr
