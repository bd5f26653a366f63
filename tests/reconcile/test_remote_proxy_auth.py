"""MCPRemoteProxy's `externalAuthConfigRef` is applied by the proxy itself on both platforms (headers
from Secret refs as env, never inline), credentials in `remoteURL` stay out of the run config, and a
VirtualMCPServer over the proxy's group no longer sends the remote's secret to the proxy."""

from __future__ import annotations

import json

import pytest
import yaml

from mcpfleet.reconcile import mcpremoteproxy, virtualmcpserver
from mcpfleet.reconcile.model import World
from tests.proxy_config import proxy_config

from .conftest import obj

HEADER = (
    "kind: MCPExternalAuthConfig\nmetadata: {name: ea}\nspec: {type: headerInjection,"
    " headerInjection: {headerName: X-API-Key, valueSecretRef: {name: remote-credentials, key: api-key}}}"
)
BEARER = (
    "kind: MCPExternalAuthConfig\nmetadata: {name: ea}\nspec: {type: bearerToken,"
    " bearerToken: {tokenSecretRef: {name: remote-token, key: token}}}"
)
EXCHANGE = (
    "kind: MCPExternalAuthConfig\nmetadata: {name: ea}\nspec: {type: tokenExchange,"
    " tokenExchange: {tokenUrl: 'https://auth.example/token', audience: remote}}"
)
PROXY = (
    "kind: MCPRemoteProxy\nmetadata: {name: r}\nspec: {remoteURL: 'https://u:hunter2@mcp.example/mcp?key=KEY-1',"
    " groupRef: tools, externalAuthConfigRef: {name: ea}, headerForward: {addPlaintextHeaders: {X-Tenant: t}}}"
)


def world(platform: str, auth: str) -> World:
    return World(
        platform=platform,  # type: ignore[arg-type]
        namespace="team",
        groups={"tools": obj("kind: MCPGroup\nmetadata: {name: tools}")},
        remote_proxies=(obj(PROXY),),
        external_auth_configs={"ea": obj(auth)},
        backend_urls={"r": "http://r.team.svc.cluster.local:8080/mcp"},
    )


@pytest.mark.parametrize("platform", ["kubernetes", "local"])
@pytest.mark.parametrize(
    ("auth", "fields", "secret"),
    [
        (
            HEADER,
            {"headersFromEnv": {"X-API-Key": "MCPFLEET_EXTERNAL_AUTH", "X-Tenant": "MCPFLEET_HEADER_0"}},
            ("remote-credentials", "api-key"),
        ),
        (
            BEARER,
            {
                "bearerTokenFromEnv": "MCPFLEET_EXTERNAL_AUTH",
                "headersFromEnv": {"X-Tenant": "MCPFLEET_HEADER_0"},
            },
            ("remote-token", "token"),
        ),
    ],
)
def test_the_proxy_applies_header_and_bearer_auth(
    platform: str, auth: str, fields: dict[str, object], secret: tuple[str, str]
) -> None:
    plan = mcpremoteproxy.plan(obj(PROXY), world(platform, auth))
    assert plan.problems == ()
    (container,) = plan.containers
    config = proxy_config(plan)
    assert {key: config.get(key) for key in fields} == fields
    (env,) = [s for s in container.secret_env if s.env_name == "MCPFLEET_EXTERNAL_AUTH"]
    assert (env.secret.name, env.secret.key) == secret
    # The plaintext headerForward header is still there, through its own variable (above); no
    # value of a header or of the URL is in the proxy's config or command line.
    rendered = next(f.content for f in plan.config_files if f.filename == "proxy.json")
    for secret_value in ("hunter2", "KEY-1", "mcp.example"):
        assert secret_value not in rendered and secret_value not in " ".join(container.command)
    run_config = json.loads(plan.config_files[0].content)
    assert run_config["remoteURL"] == "https://***@mcp.example/mcp?key=***"
    assert run_config["externalAuthConfig"]["name"] == "ea"
    assert "hunter2" not in plan.config_files[0].content and "KEY-1" not in plan.config_files[0].content


@pytest.mark.parametrize(
    "auth", [EXCHANGE, "kind: MCPExternalAuthConfig\nmetadata: {name: ea}\nspec: {type: unauthenticated}"]
)
def test_token_exchange_and_unauthenticated_add_nothing_to_the_proxy(auth: str) -> None:
    plan = mcpremoteproxy.plan(obj(PROXY), world("kubernetes", auth))
    (container,) = plan.containers
    config = proxy_config(plan)
    assert "bearerTokenFromEnv" not in config and config["headersFromEnv"] == {
        "X-Tenant": "MCPFLEET_HEADER_0"
    }
    assert not any(s.env_name == "MCPFLEET_EXTERNAL_AUTH" for s in container.secret_env)


VMCP = """
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config: {groupRef: tools}
  incomingAuth: {type: anonymous}
"""


@pytest.mark.parametrize(("auth", "gateway_applies"), [(HEADER, False), (BEARER, False), (EXCHANGE, True)])
def test_the_gateway_leaves_header_auth_of_a_remote_proxy_to_the_proxy(
    auth: str, gateway_applies: bool
) -> None:
    plan = virtualmcpserver.plan(obj(VMCP), world("kubernetes", auth))
    assert plan.problems == ()
    document = yaml.safe_load(plan.config_files[0].content)
    backends = document["outgoingAuth"]["backends"]
    assert ("r" in backends) == gateway_applies, backends


@pytest.mark.parametrize("platform", ["kubernetes", "local"])
def test_the_examples_claim_holds(platform: str) -> None:
    """examples/kinds/remote-proxy.yaml: "adding a header from a Secret" - by the proxy itself."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "kinds" / "remote-proxy.yaml"
    auth, proxy = (obj(yaml.safe_dump(d)) for d in yaml.safe_load_all(path.read_text()))
    plan = mcpremoteproxy.plan(
        proxy,
        World(platform=platform, namespace="team", external_auth_configs={auth.name: auth}),  # type: ignore[arg-type]
    )
    assert plan.problems == ()
    (container,) = plan.containers
    assert proxy_config(plan)["headersFromEnv"]["X-API-Key"] == "MCPFLEET_EXTERNAL_AUTH"
    (env,) = [s for s in container.secret_env if s.env_name == "MCPFLEET_EXTERNAL_AUTH"]
    assert (env.secret.name, env.secret.key) == ("remote-credentials", "api-key")
