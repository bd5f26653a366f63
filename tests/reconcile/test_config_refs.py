"""The workloads' references to the kinds ToolHive added, on both platforms: `oidcConfigRef` naming an
MCPOIDCConfig, `telemetryConfigRef`, `authzConfigRef` and VirtualMCPServer `embeddingServerRef` each
change what runs (no cluster: the reconcile rules only)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
import yaml

from mcpfleet.api.kinds import ManifestError
from mcpfleet.api.meta import ConfigStatus, ProxyWorkloadStatus
from mcpfleet.api.virtualmcpserver import VirtualMCPServerStatus
from mcpfleet.reconcile import configkinds, kinds, mcpremoteproxy, mcpserver, virtualmcpserver
from mcpfleet.reconcile.embeddingserver import embedding_urls
from mcpfleet.reconcile.model import Platform, WorkloadObservation, WorkloadPlan, World
from tests.proxy_config import proxy_config
from tests.reconcile.conftest import obj

PLATFORMS: tuple[Platform, ...] = ("local", "kubernetes")

IDP = (
    "kind: MCPOIDCConfig\nmetadata: {name: idp}\nspec: {type: inline, inline: {issuer: 'https://{issuer}',"
    " jwksUrl: 'https://auth.example.com/jwks', clientId: c, clientSecretRef: {name: idp-secret, key: k}}}"
)
SERVER = "kind: MCPServer\nmetadata: {name: time}\nspec: {image: 'uvx://mcp-server-time', {extra}}"
PROXY = (
    "kind: MCPRemoteProxy\nmetadata: {name: rp}\nspec: {remoteURL: 'https://mcp.example.com/mcp', {extra}}"
)


def _idp(issuer: str = "auth.example.com") -> Any:
    return obj(IDP.replace("{issuer}", issuer))


def _server(extra: str) -> Any:
    return obj(SERVER.replace("{extra}", extra))


def _proxy(extra: str) -> Any:
    return obj(PROXY.replace("{extra}", extra))


def _file(plan: WorkloadPlan, name: str) -> dict[str, Any]:
    found = [f for f in plan.config_files if f.filename == name]
    assert found, f"{name} not rendered: {[f.filename for f in plan.config_files]}"
    document: dict[str, Any] = json.loads(found[0].content)
    return document


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("kind", ["MCPServer", "MCPRemoteProxy"])
def test_oidc_config_ref_naming_an_mcpoidcconfig_is_enforced_and_an_edit_rolls(
    platform: Platform, kind: str
) -> None:
    ref = "oidcConfigRef: {name: idp, audience: time, scopes: [mcp], resourceUrl: 'https://time.example.com/mcp'}"
    workload = _server(ref) if kind == "MCPServer" else _proxy(ref)
    rules = mcpserver if kind == "MCPServer" else mcpremoteproxy

    def plan(issuer: str) -> WorkloadPlan:
        world = World(platform=platform, namespace="team", oidc_configs={"idp": _idp(issuer)})
        return rules.plan(workload, world)

    first = plan("auth.example.com")
    assert not first.problems
    oidc = _file(first, "auth.json")["oidc"]
    assert oidc["issuer"] == "https://auth.example.com" and oidc["audience"] == "time"
    assert oidc["scopes"] == ["mcp"] and oidc["resource"] == "https://time.example.com/mcp"
    assert proxy_config(first)["authConfig"] == "auth.json"
    proxy = next(c for c in first.containers if c.name == "proxy")
    # The client secret travels as secretKeyRef env only.
    assert [(s.env_name, s.secret.name) for s in proxy.secret_env] == [
        ("MCPFLEET_OIDC_CLIENT_SECRET", "idp-secret")
    ]
    assert "idp-secret" not in json.dumps(_file(first, "auth.json"))
    edited = plan("other.example.com")
    assert _file(edited, "auth.json")["oidc"]["issuer"] == "https://other.example.com"
    assert edited.rollout_checksum != first.rollout_checksum


@pytest.mark.parametrize("platform", PLATFORMS)
def test_vmcp_oidc_config_ref_naming_an_mcpoidcconfig_is_enforced(platform: Platform) -> None:
    vmcp = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g},"
        " incomingAuth: {type: oidc, oidcConfigRef: {name: idp, audience: gw}}}"
    )
    group = obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")
    world = World(platform=platform, namespace="team", groups={"g": group}, oidc_configs={"idp": _idp()})
    plan = virtualmcpserver.plan(vmcp, world)
    assert not plan.problems
    rendered = json.dumps([f.content for f in plan.config_files])
    assert "https://auth.example.com" in rendered and "idp-secret" not in rendered


def test_oidc_config_ref_naming_no_mcpoidcconfig_keeps_the_config_map_form() -> None:
    server = _server("oidcConfigRef: {name: team-oidc, audience: time}")
    plan = mcpserver.plan(server, World(platform="kubernetes", namespace="team"))
    assert [f.config_map.name for f in plan.config_map_files] == ["team-oidc"]


OTEL = (
    "kind: MCPTelemetryConfig\nmetadata: {name: otel}\nspec: {openTelemetry: {enabled: true,"
    " endpoint: 'collector:4318', insecure: true, headers: {x-team: a},"
    " sensitiveHeaders: [{name: authorization, secretKeyRef: {name: otlp, key: token}}]}}"
)


def _workloads() -> list[tuple[Any, Any, str]]:
    """(rules, object, the container that gets the telemetry) for each workload kind."""
    ref = "telemetryConfigRef: {name: otel, serviceName: svc}"
    vmcp = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g}, incomingAuth: {type: anonymous},"
        " telemetryConfigRef: {name: otel}}"
    )
    return [
        (mcpserver, _server(ref), "proxy"),
        (mcpremoteproxy, _proxy(ref), "proxy"),
        (virtualmcpserver, vmcp, "vmcp"),
    ]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_telemetry_config_ref_puts_the_otel_env_on_the_data_plane_container(platform: Platform) -> None:
    group = obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")
    world = World(
        platform=platform,
        namespace="team",
        groups={"g": group},
        telemetry_configs={"otel": obj(OTEL)},
        otlp_endpoint="http://platform-collector:4318",
    )
    for rules, workload, target in _workloads():
        plan = rules.plan(workload, world)
        assert not plan.problems, (workload.kind, plan.problems)
        container = next(c for c in plan.containers if c.name == target)
        env = dict(container.env)
        # The referenced config wins over the platform's tracing env; each name appears once.
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4318", workload.kind
        assert len(container.env) == len(env)
        assert env["OTEL_SERVICE_NAME"] == ("gw" if workload.kind == "VirtualMCPServer" else "svc")
        assert env["MCPFLEET_OTLP_SECRET_HEADERS"] == "authorization=MCPFLEET_OTLP_HEADER_0"
        # The sensitive header only as Secret env: never a value in env or a config file.
        assert ("MCPFLEET_OTLP_HEADER_0", "otlp", "token") in [
            (s.env_name, s.secret.name, s.secret.key) for s in container.secret_env
        ]
        assert "token" not in json.dumps([*container.env, *(f.content for f in plan.config_files)])


def test_missing_telemetry_config_is_a_problem_naming_the_field() -> None:
    plan = mcpserver.plan(
        _server("telemetryConfigRef: {name: nope}"), World(platform="local", namespace="team")
    )
    assert "spec.telemetryConfigRef: MCPTelemetryConfig nope not found" in plan.problems


POLICY = (
    "kind: MCPAuthzConfig\nmetadata: {name: pol}\nspec: {type: cedarv1, config: {policies:"
    " ['{policy}'], entities_json: '[]', group_claim_name: teams}}"
)
PERMIT_ECHO = 'permit(principal, action == Action::"call_tool", resource == Tool::"echo");'


def _policy(text: str = PERMIT_ECHO) -> Any:
    return obj(POLICY.replace("{policy}", text))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_authz_config_ref_renders_the_document_the_inline_form_gives_and_applies_live(
    platform: Platform,
) -> None:
    inline = _server(
        f"authzConfig: {{type: inline, groupClaimName: teams, inline: {{policies: ['{PERMIT_ECHO}']}}}}"
    )
    by_ref = _server("authzConfigRef: {name: pol}")
    world = World(platform=platform, namespace="team", authz_configs={"pol": _policy()})
    expected = mcpserver.plan(inline, world)
    plan = mcpserver.plan(by_ref, world)
    assert not plan.problems
    assert _file(plan, "authz.json") == _file(expected, "authz.json")
    assert _file(plan, "authz.json")["group_claim_name"] == "teams"
    assert proxy_config(plan)["authzConfig"] == "authz.json"
    # An edit of the MCPAuthzConfig changes the live file only: the pods do not roll.
    edited_world = World(
        platform=platform,
        namespace="team",
        authz_configs={"pol": _policy("permit(principal, action, resource);")},
    )
    edited = mcpserver.plan(by_ref, edited_world)
    assert _file(edited, "authz.json") != _file(plan, "authz.json")
    assert edited.rollout_checksum == plan.rollout_checksum
    # The remote proxy and the gateway enforce it too.
    proxy = mcpremoteproxy.plan(_proxy("authzConfigRef: {name: pol}"), world)
    assert _file(proxy, "authz.json") == _file(expected, "authz.json")
    group = obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")
    vmcp = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g},"
        " incomingAuth: {type: anonymous, authzConfigRef: {name: pol}}}"
    )
    gateway = virtualmcpserver.plan(
        vmcp,
        World(platform=platform, namespace="team", groups={"g": group}, authz_configs={"pol": _policy()}),
    )
    assert not gateway.problems
    assert "call_tool" in gateway.config_files[0].content


@pytest.mark.parametrize(
    ("world_configs", "problem"),
    [
        ({}, "spec.authzConfigRef: MCPAuthzConfig pol not found"),
        (
            {
                "pol": obj(
                    "kind: MCPAuthzConfig\nmetadata: {name: pol}\nspec: {type: httpv1,"
                    " config: {http: {url: 'https://pdp.example.com'}}}"
                )
            },
            "spec.authzConfigRef: MCPAuthzConfig pol has type httpv1",
        ),
        ({"pol": _policy("not cedar")}, "spec.authzConfigRef (MCPAuthzConfig pol).inline.policies[0]"),
    ],
)
def test_authz_config_ref_that_cannot_be_enforced_stops_the_workload(
    world_configs: dict[str, Any], problem: str
) -> None:
    plan = mcpserver.plan(
        _server("authzConfigRef: {name: pol}"),
        World(platform="local", namespace="team", authz_configs=world_configs),
    )
    assert any(p.startswith(problem) for p in plan.problems), plan.problems
    assert plan.containers == ()


def test_authz_config_and_authz_config_ref_are_mutually_exclusive() -> None:
    with pytest.raises(
        ManifestError,
        match=re.escape("spec.authzConfigRef: authzConfig and authzConfigRef are mutually exclusive"),
    ):
        _server(
            f"authzConfigRef: {{name: pol}}, authzConfig: {{type: inline, inline: {{policies: ['{PERMIT_ECHO}']}}}}"
        )


def test_oidc_config_ref_resource_url_reaches_the_config_map_form_too() -> None:
    server = _server(
        "oidcConfigRef: {name: team-oidc, audience: time, resourceUrl: 'https://time.example.com/mcp'}"
    )
    plan = mcpserver.plan(server, World(platform="kubernetes", namespace="team"))
    assert _file(plan, "auth.json")["oidc"]["resource"] == "https://time.example.com/mcp"


GATEWAY_WITH_EMBEDDINGS = (
    "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g, optimizer: {maxToolsToReturn: 5}},"
    " incomingAuth: {type: anonymous}, embeddingServerRef: {name: emb}}"
)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_embedding_server_ref_fills_the_optimizer_embedding_service(platform: Platform) -> None:
    group = obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")
    vmcp = obj(GATEWAY_WITH_EMBEDDINGS)

    def plan(urls: dict[str, str | None]) -> WorkloadPlan:
        world = World(platform=platform, namespace="team", groups={"g": group}, embedding_urls=urls)
        return virtualmcpserver.plan(vmcp, world)

    ready = plan({"emb": "http://emb.team.svc:8080"})
    assert not ready.problems
    optimizer = yaml.safe_load(ready.config_files[0].content)["optimizer"]
    assert optimizer["embeddingService"] == "http://emb.team.svc:8080"
    assert optimizer["embeddingProvider"] == "tei" and optimizer["maxToolsToReturn"] == 5
    assert plan({"emb": None}).problems == ("spec.embeddingServerRef: EmbeddingServer emb is not Ready yet",)
    assert plan({}).problems == ("spec.embeddingServerRef: EmbeddingServer emb not found",)


def test_embedding_server_urls_come_from_ready_servers_only() -> None:
    urls = embedding_urls(
        [
            {"metadata": {"name": "a"}, "status": {"phase": "Ready", "url": "http://a:8080"}},
            {"metadata": {"name": "b"}, "status": {"phase": "Pending", "url": "http://b:8080"}},
            {"metadata": {"name": "c"}},
        ]
    )
    assert urls == {"a": "http://a:8080", "b": None, "c": None}


def test_embedding_server_ref_refuses_a_second_embedding_source() -> None:
    both = GATEWAY_WITH_EMBEDDINGS.replace("maxToolsToReturn: 5", "embeddingService: 'http://x'")
    with pytest.raises(
        ManifestError, match=re.escape("spec.embeddingServerRef: set one of embeddingServerRef")
    ):
        obj(both)
    openai = GATEWAY_WITH_EMBEDDINGS.replace("maxToolsToReturn: 5", "embeddingProvider: openai")
    with pytest.raises(
        ManifestError, match=re.escape("spec.embeddingServerRef: embeddingServerRef is a TEI server")
    ):
        obj(openai)


HOOKS = (
    "kind: MCPWebhookConfig\nmetadata: {name: hooks}\nspec: {"
    "mutating: [{name: rewrite, url: 'https://hooks.example.com/m', timeout: 3s,"
    " hmacSecretRef: {name: hook-keys, key: hmac}}],"
    " validating: [{name: gate, url: '{gate}', failurePolicy: ignore,"
    " tlsConfig: {caSecretRef: {name: hook-tls, key: ca.crt}, clientCertSecretRef: {name: hook-tls, key: tls.crt},"
    " clientKeySecretRef: {name: hook-tls, key: tls.key}}}]}"
)


def _hooks(gate: str = "https://hooks.example.com/v") -> Any:
    return obj(HOOKS.replace("{gate}", gate))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_webhook_config_ref_renders_the_proxy_file_with_secrets_as_files(platform: Platform) -> None:
    """webhooks.json holds every Secret as a file path (mounted Secret keys), never a value; the proxy
    gets --webhook-config; an http server gets the proxy in front; an edit rolls the pods."""
    from mcpfleet.platform.kubernetes.render import Owner, render
    from mcpfleet.reconcile.model import secret_file_path

    world = World(platform=platform, namespace="team", webhook_configs={"hooks": _hooks()})
    plan = mcpserver.plan(_server("webhookConfigRef: {name: hooks}"), world)
    assert not plan.problems
    document = _file(plan, "webhooks.json")
    assert document["serverName"] == "time" and document["namespace"] == "team"
    assert document["mutating"][0]["hmacSecretFile"] == secret_file_path(platform, "webhook-rewrite-hmac")
    assert document["mutating"][0]["timeout"] == "3s"
    tls = document["validating"][0]["tlsConfig"]
    assert tls["caFile"] == secret_file_path(platform, "webhook-gate-ca.crt")
    assert tls["clientKeyFile"] == secret_file_path(platform, "webhook-gate-tls.key")
    assert document["validating"][0]["failurePolicy"] == "ignore"
    assert {(f.filename, f.secret.name, f.secret.key) for f in plan.secret_files} == {
        ("webhook-rewrite-hmac", "hook-keys", "hmac"),
        ("webhook-gate-ca.crt", "hook-tls", "ca.crt"),
        ("webhook-gate-tls.crt", "hook-tls", "tls.crt"),
        ("webhook-gate-tls.key", "hook-tls", "tls.key"),
    }
    assert proxy_config(plan)["webhookConfig"] == "webhooks.json"
    # An edit of the MCPWebhookConfig rolls the pods (the proxy reads the file at start).
    edited = mcpserver.plan(
        _server("webhookConfigRef: {name: hooks}"),
        World(
            platform=platform,
            namespace="team",
            webhook_configs={"hooks": _hooks("https://other.example.com/v")},
        ),
    )
    assert edited.rollout_checksum != plan.rollout_checksum
    # An http server runs behind the proxy, which alone sees the Secret files.
    http = mcpserver.plan(
        _server("transport: streamable-http, mcpPort: 9000, webhookConfigRef: {name: hooks}"), world
    )
    assert not http.problems
    assert proxy_config(http)["webhookConfig"] == "webhooks.json"
    if platform == "kubernetes":
        manifests = render(http, Owner("MCPServer", "time", "team", "uid-1"), world.images)
        deployment = next(m for m in manifests if m["kind"] == "Deployment")
        containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
        mounted = {c: [v["mountPath"] for v in containers[c].get("volumeMounts", [])] for c in containers}
        assert "/etc/mcpfleet/secrets" in mounted["proxy"]
        assert "/etc/mcpfleet/secrets" not in mounted["mcp"]
        assert "hook-keys" not in json.dumps([m for m in manifests if m["kind"] == "ConfigMap"])
    # The remote proxy takes the same reference.
    remote = mcpremoteproxy.plan(_proxy("webhookConfigRef: {name: hooks}"), world)
    assert _file(remote, "webhooks.json")["validating"][0]["name"] == "gate"
    assert remote.secret_files == plan.secret_files


@pytest.mark.parametrize(
    ("configs", "problem"),
    [
        ({}, "spec.webhookConfigRef: MCPWebhookConfig hooks not found"),
        (
            {"hooks": _hooks("http://hooks.example.com/v")},
            "spec.webhookConfigRef: MCPWebhookConfig hooks spec.validating[0].url: gate uses http://",
        ),
    ],
)
def test_webhook_config_ref_that_cannot_be_used_stops_the_workload(
    configs: dict[str, Any], problem: str
) -> None:
    plan = mcpserver.plan(
        _server("webhookConfigRef: {name: hooks}"),
        World(platform="local", namespace="team", webhook_configs=configs),
    )
    assert any(p.startswith(problem) for p in plan.problems), plan.problems
    assert plan.containers == ()


@pytest.mark.parametrize("platform", PLATFORMS)
def test_status_config_hashes_name_the_version_of_each_referenced_configuration(platform: Platform) -> None:
    """ToolHive's `*ConfigHash` status fields: each equals the referenced object's own configHash,
    changes with an edit of it, and is unset without the reference (or when it names nothing)."""
    tools = obj("kind: MCPToolConfig\nmetadata: {name: tc}\nspec: {toolsFilter: [get_current_time]}")
    world = World(
        platform=platform, namespace="team", oidc_configs={"idp": _idp()}, tool_configs={"tc": tools}
    )
    server = _server(
        "oidcConfigRef: {name: idp, audience: time}, toolConfigRef: {name: tc}, authzConfigRef: {name: x}"
    )
    observation = WorkloadObservation(desired_replicas=1, ready_replicas=1, url="http://time")
    status = kinds.status(ProxyWorkloadStatus(), server, kinds.plan(server, world), observation, world)
    assert isinstance(status, ProxyWorkloadStatus)
    assert (
        status.oidc_config_hash
        == configkinds.config_hash(_idp())
        == configkinds.config_status(ConfigStatus(), obj=_idp(), refs=[], deleting=False).config_hash
    )
    assert status.tool_config_hash == configkinds.config_hash(tools)
    assert status.authz_config_hash is None and status.telemetry_config_hash is None  # x names nothing
    edited = dataclasses.replace(world, oidc_configs={"idp": _idp("other.example.com")})
    again = kinds.status(status, server, kinds.plan(server, edited), observation, edited)
    assert isinstance(again, ProxyWorkloadStatus) and again.oidc_config_hash != status.oidc_config_hash
    assert "oidcConfigHash" in again.dump() and "webhookConfigHash" not in again.dump()

    group = obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")
    vmcp = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g},"
        " incomingAuth: {type: oidc, oidcConfigRef: {name: idp, audience: gw}}}"
    )
    gw_world = dataclasses.replace(world, groups={"g": group})
    gw = kinds.status(VirtualMCPServerStatus(), vmcp, kinds.plan(vmcp, gw_world), None, gw_world)
    assert isinstance(gw, VirtualMCPServerStatus)
    assert gw.oidc_config_hash == configkinds.config_hash(_idp()) and gw.authz_config_hash is None
