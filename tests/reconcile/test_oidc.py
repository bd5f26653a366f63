"""Incoming OIDC in the reconcile rules: each form (inline, configMap, oidcConfigRef, kubernetes) of
MCPServer, MCPRemoteProxy and VirtualMCPServer on both platforms, and what Kubernetes renders for it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from mcpfleet.auth.oidc import IncomingAuthSettings
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import mcpremoteproxy, mcpserver, virtualmcpserver
from mcpfleet.reconcile.model import Container, WorkloadPlan, World
from mcpfleet.vmcp.config import VMCPConfig
from tests.proxy_config import proxy_config

from .conftest import obj


def k8s(**kw: Any) -> World:
    return World(platform="kubernetes", namespace="team", **kw)


def local(**kw: Any) -> World:
    return World(platform="local", namespace="team", **kw)


INLINE = (
    "oidcConfig: {type: inline, resourceUrl: 'https://time.example/mcp', inline: {issuer: 'https://idp.example',"
    " audience: time, jwksUrl: 'https://idp.example/keys', clientId: time-proxy, scopes: [mcp],"
    " introspectionUrl: 'https://idp.example/introspect', clientSecretRef: {name: idp, key: secret}}}"
)
CONFIG_MAP = "oidcConfig: {type: configMap, configMap: {name: shared-oidc, key: settings.json}}"
REF = "oidcConfigRef: {name: team-oidc, audience: time, scopes: [mcp, read]}"
KUBERNETES = "oidcConfig: {type: kubernetes, kubernetes: {audience: time, namespace: clients}}"


def server(auth: str, spec: str = "image: 'uvx://mcp-server-time'") -> Any:
    return obj(f"kind: MCPServer\nmetadata: {{name: time}}\nspec: {{{spec}, {auth}}}")


def remote(auth: str) -> Any:
    return obj(
        f"kind: MCPRemoteProxy\nmetadata: {{name: r}}\nspec: {{remoteURL: 'https://mcp.example/mcp', {auth}}}"
    )


def auth_document(plan: WorkloadPlan) -> dict[str, Any]:
    (config,) = [c for c in plan.config_files if c.filename == "auth.json"]
    document: dict[str, Any] = json.loads(config.content)
    IncomingAuthSettings.model_validate(document)  # what `mcpfleet proxy --auth-config` reads
    return document


def serving(plan: WorkloadPlan) -> Container:
    return next(c for c in plan.containers if c.name == plan.serving_container)


def pod_of(plan: WorkloadPlan) -> dict[str, Any]:
    manifests = render(plan, Owner(plan.kind, plan.name, "team", "uid-1"), k8s().images)
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    assert all("not supported" not in json.dumps(m) for m in manifests)
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


@pytest.mark.parametrize("platform", ["kubernetes", "local"])
def test_inline_settings_go_to_the_auth_config_and_the_secret_to_env(platform: str) -> None:
    world = k8s() if platform == "kubernetes" else local()
    plan = mcpserver.plan(server(INLINE), world)
    assert plan.problems == ()
    proxy = serving(plan)
    # The proxy's config names the file (relative to its own folder); the server's command has no part of it.
    assert proxy_config(plan)["authConfig"] == "auth.json"
    assert "auth.json" not in " ".join(proxy.command[proxy.command.index("--") :])
    assert auth_document(plan) == {
        "type": "oidc",
        "oidc": {
            "issuer": "https://idp.example",
            "audience": "time",
            "jwksUrl": "https://idp.example/keys",
            "clientId": "time-proxy",
            "introspectionUrl": "https://idp.example/introspect",
            "scopes": ["mcp"],
            "resource": "https://time.example/mcp",
            "clientSecretEnv": "MCPFLEET_OIDC_CLIENT_SECRET",
        },
    }
    (secret,) = proxy.secret_env
    assert (secret.env_name, secret.secret.name, secret.secret.key) == (
        "MCPFLEET_OIDC_CLIENT_SECRET",
        "idp",
        "secret",
    )
    assert all("idp" not in c.content.replace("idp.example", "") for c in plan.config_files)
    assert plan.config_map_files == () and not proxy.service_account_token
    if platform == "kubernetes":
        manifests = render(plan, Owner("MCPServer", "time", "team", "uid-1"), k8s().images)
        config_map = next(m for m in manifests if m["kind"] == "ConfigMap")
        assert "auth.json" in config_map["data"] and "secretKeyRef" not in json.dumps(config_map)


def test_inline_http_issuer_needs_the_development_opt_in() -> None:
    plain = INLINE.replace("https://idp.example'", "http://idp.example'")
    plan = mcpserver.plan(server(plain), local())
    assert plan.problems == (
        "spec.oidcConfig.inline.issuer: http:// needs insecureAllowHTTP: true (development only)",
    )
    assert plan.containers == ()  # nothing runs without its auth
    allowed = plain.replace("clientId:", "insecureAllowHTTP: true, clientId:")
    ok = mcpserver.plan(server(allowed), local())
    assert ok.problems == () and auth_document(ok)["oidc"]["insecureAllowHTTP"] is True


def test_config_map_type_mounts_the_users_key_on_kubernetes() -> None:
    plan = mcpserver.plan(server(CONFIG_MAP), k8s())
    assert plan.problems == ()
    assert auth_document(plan) == {
        "type": "oidc",
        "oidcFile": "/etc/mcpfleet/configmaps/oidc.json",
        "oidc": {},
    }
    (file,) = plan.config_map_files
    assert (file.filename, file.config_map.name, file.config_map.key) == (
        "oidc.json",
        "shared-oidc",
        "settings.json",
    )
    pod = pod_of(plan)
    (volume,) = [v for v in pod["volumes"] if v["name"] == "configmaps"]
    assert volume["projected"]["sources"] == [
        {"configMap": {"name": "shared-oidc", "items": [{"key": "settings.json", "path": "oidc.json"}]}}
    ]
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "configmaps", "mountPath": "/etc/mcpfleet/configmaps", "readOnly": True} in mounts


def test_oidc_config_ref_mounts_oidc_json_and_overrides_audience_and_scopes() -> None:
    plan = mcpserver.plan(server(REF), k8s())
    assert plan.problems == ()
    assert auth_document(plan) == {
        "type": "oidc",
        "oidcFile": "/etc/mcpfleet/configmaps/oidc.json",
        "oidc": {"audience": "time", "scopes": ["mcp", "read"]},
    }
    (file,) = plan.config_map_files
    assert (file.config_map.name, file.config_map.key) == ("team-oidc", "oidc.json")


@pytest.mark.parametrize(
    ("auth", "field"),
    [
        (KUBERNETES, "spec.oidcConfig.type: kubernetes (service-account tokens) needs Kubernetes"),
        ("oidcConfig: {}", "spec.oidcConfig.type: kubernetes (service-account tokens) needs Kubernetes"),
    ],
)
def test_kubernetes_only_forms_are_problems_locally(auth: str, field: str) -> None:
    for plan in (mcpserver.plan(server(auth), local()), mcpremoteproxy.plan(remote(auth), local())):
        (problem,) = plan.problems
        assert problem.startswith(field), problem


@pytest.mark.parametrize(
    ("auth", "ref"),
    [(CONFIG_MAP, ("shared-oidc", "settings.json")), (REF, ("team-oidc", "oidc.json"))],
)
def test_config_map_forms_read_the_local_config_map_source(auth: str, ref: tuple[str, str]) -> None:
    # Locally the key comes from STATE/configmaps/<name>/<key>, written into the config folder.
    for plan in (mcpserver.plan(server(auth), local()), mcpremoteproxy.plan(remote(auth), local())):
        assert plan.problems == ()
        assert auth_document(plan)["oidcFile"] == "volumes/configmap-oidc.json/oidc.json"
        (file,) = plan.config_map_files
        assert (file.config_map.name, file.config_map.key) == ref


def test_config_map_key_defaults_to_oidc_json_as_in_toolhive() -> None:
    plan = mcpserver.plan(server("oidcConfig: {type: configMap, configMap: {name: shared}}"), k8s())
    (file,) = plan.config_map_files
    assert (file.config_map.name, file.config_map.key) == ("shared", "oidc.json")


def test_kubernetes_type_reads_the_api_servers_jwks_with_a_mounted_token() -> None:
    plan = mcpserver.plan(server(KUBERNETES), k8s())
    assert plan.problems == () and plan.rbac == ()  # reading the JWKS needs no Role
    assert auth_document(plan)["oidc"] == {
        "issuer": "https://kubernetes.default.svc",
        "audience": "time",
        "jwksUrl": "https://kubernetes.default.svc/openid/v1/jwks",
        "jwksCaFile": "/var/run/secrets/mcpfleet/serviceaccount/ca.crt",
        "jwksTokenFile": "/var/run/secrets/mcpfleet/serviceaccount/token",
        "serviceAccountNamespace": "clients",
        "jwksAllowPrivateIP": True,  # the in-cluster API server, as in ToolHive
    }
    assert serving(plan).service_account_token
    pod = pod_of(plan)
    (volume,) = [v for v in pod["volumes"] if v["name"] == "mcpfleet-token"]
    kinds = [next(iter(source)) for source in volume["projected"]["sources"]]
    assert kinds == ["serviceAccountToken", "configMap", "downwardAPI"]
    mounts = pod["containers"][0]["volumeMounts"]
    assert {
        "name": "mcpfleet-token",
        "mountPath": "/var/run/secrets/mcpfleet/serviceaccount",
        "readOnly": True,
    } in (mounts)


def test_oci_stdio_image_the_attaching_runner_enforces_auth() -> None:
    plan = mcpserver.plan(server(KUBERNETES, "image: ghcr.io/acme/git:1"), k8s())
    server_c, runner = plan.containers
    assert proxy_config(plan)["authConfig"] == "auth.json" and runner.service_account_token
    assert not server_c.command and not server_c.service_account_token
    pod = pod_of(plan)
    assert all(m["name"] != "mcpfleet-token" for m in pod["containers"][0].get("volumeMounts", []))


@pytest.mark.parametrize(
    ("spec", "world", "path"),
    [
        ("image: 'uvx://srv', transport: streamable-http, mcpPort: 9000", local(), "/mcp"),
        ("image: 'npx://srv', transport: sse, mcpPort: 9000", local(), "/sse"),
        ("image: ghcr.io/acme/http:1, transport: streamable-http, mcpPort: 9000", k8s(), "/mcp"),
    ],
)
def test_http_server_gets_the_auth_proxy_in_front(spec: str, world: World, path: str) -> None:
    plan = mcpserver.plan(server(INLINE, spec), world)
    assert plan.problems == ()
    server_c, proxy = plan.containers
    assert server_c.port == 9000 and server_c.fixed_port and "auth.json" not in server_c.command
    assert plan.serving_container == proxy.name and proxy.port == 8080 and plan.health_path == "/health"
    assert plan.url_path == path
    config = proxy_config(plan)
    assert config["remote"] == "http://127.0.0.1:9000" and config["forwardAllPaths"] is True
    assert "--" not in proxy.command
    assert config["authConfig"] == "auth.json" and proxy.secret_env and not server_c.secret_env
    if world.platform == "kubernetes":
        manifests = render(plan, Owner("MCPServer", "time", "team", "uid-1"), k8s().images)
        service = next(m for m in manifests if m["kind"] == "Service")
        assert service["spec"]["ports"][0]["targetPort"] == 8080  # the proxy, not the server


@pytest.mark.parametrize(
    "spec",
    [
        "image: ghcr.io/acme/http:1, transport: streamable-http",
        "image: ghcr.io/acme/http:1, transport: streamable-http, mcpPort: 8080",
    ],
)
def test_http_server_with_oidc_but_no_port_for_the_proxy_is_a_problem(spec: str) -> None:
    plan = mcpserver.plan(server(INLINE, spec), k8s())
    (problem,) = plan.problems
    assert problem.startswith("spec.mcpPort: with incoming OIDC an http server runs behind the auth proxy")
    assert plan.containers == ()


def test_no_oidc_changes_nothing() -> None:
    plan = mcpserver.plan(server("groupRef: g"), k8s())
    assert [c.filename for c in plan.config_files] == ["runconfig.json", "proxy.json"]
    assert "authConfig" not in proxy_config(plan) and plan.config_map_files == ()


@pytest.mark.parametrize("auth", [INLINE, CONFIG_MAP, REF, KUBERNETES])
def test_remote_proxy_enforces_each_form_on_kubernetes(auth: str) -> None:
    plan = mcpremoteproxy.plan(remote(auth), k8s())
    assert plan.problems == ()
    (proxy,) = plan.containers
    assert proxy_config(plan)["authConfig"] == "auth.json"
    document = auth_document(plan)
    assert document["type"] == "oidc"
    assert bool(plan.config_map_files) == (auth in (CONFIG_MAP, REF))
    assert proxy.service_account_token == (auth == KUBERNETES)
    assert bool(proxy.secret_env) == (auth == INLINE)


def test_remote_proxy_inline_runs_locally() -> None:
    plan = mcpremoteproxy.plan(remote(INLINE), local())
    assert plan.problems == () and auth_document(plan)["oidc"]["issuer"] == "https://idp.example"


VMCP = """
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config: {groupRef: tools}
  incomingAuth: AUTH
"""


def vmcp_plan(auth: str, world: World) -> tuple[WorkloadPlan, dict[str, Any]]:
    world = World(
        platform=world.platform,
        namespace="team",
        groups={"tools": obj("kind: MCPGroup\nmetadata: {name: tools}")},
    )
    plan = virtualmcpserver.plan(obj(VMCP.replace("AUTH", auth)), world)
    if plan.problems:
        return plan, {}
    document: dict[str, Any] = yaml.safe_load(plan.config_files[0].content)
    VMCPConfig.model_validate(document)
    return plan, document["incomingAuth"]


def test_vmcp_config_map_and_ref_are_mounted_and_named_by_oidc_file() -> None:
    plan, incoming = vmcp_plan(f"{{type: oidc, {CONFIG_MAP}}}", k8s())
    assert plan.problems == () and incoming["oidcFile"] == "/etc/mcpfleet/configmaps/oidc.json"
    assert [(f.config_map.name, f.config_map.key) for f in plan.config_map_files] == [
        ("shared-oidc", "settings.json")
    ]
    plan, incoming = vmcp_plan(f"{{type: oidc, {REF}}}", k8s())
    assert incoming["oidc"]["audience"] == "time" and incoming["oidc"]["scopes"] == ["mcp", "read"]
    assert [(f.config_map.name, f.config_map.key) for f in plan.config_map_files] == [
        ("team-oidc", "oidc.json")
    ]
    pod = pod_of(plan)
    assert any(v["name"] == "configmaps" for v in pod["volumes"])


def test_vmcp_inline_client_secret_and_kubernetes_tokens() -> None:
    plan, incoming = vmcp_plan(f"{{type: oidc, {INLINE}}}", k8s())
    assert plan.problems == ()
    assert incoming["oidc"]["clientSecretEnv"] == "MCPFLEET_SECRET_0"
    (secret,) = plan.containers[0].secret_env
    assert (secret.env_name, secret.secret.name) == ("MCPFLEET_SECRET_0", "idp")
    plan, incoming = vmcp_plan(f"{{type: oidc, {KUBERNETES}}}", k8s())
    # The gateway always has its own automounted token (it watches its group).
    assert incoming["oidc"]["jwksTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert plan.rbac and pod_of(plan)["automountServiceAccountToken"] is True


@pytest.mark.parametrize(
    ("auth", "field"),
    [
        (KUBERNETES, "spec.incomingAuth.oidcConfig.type:"),
    ],
)
def test_vmcp_kubernetes_only_forms_are_problems_locally(auth: str, field: str) -> None:
    plan, _ = vmcp_plan(f"{{type: oidc, {auth}}}", local())
    (problem,) = plan.problems
    assert problem.startswith(field)
