"""What an `externalAuthConfigRef` of type embeddedAuthServer renders on both platforms: the proxy's
`--authserver-config` document naming Secret files (mounted into the proxy container only on
Kubernetes), never a secret value in a ConfigMap, argument or environment value; ToolHive's Redis
Sentinel example as the Service's DNS name; problems naming the field."""

from __future__ import annotations

import json

import yaml

from mcpfleet.api.mcpexternalauthconfig import MCPExternalAuthConfig
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import mcpremoteproxy, mcpserver
from mcpfleet.reconcile.model import Images, World
from tests.api.corpus import toolhive_documents
from tests.proxy_config import proxy_config
from tests.reconcile.conftest import obj

AUTH = """
kind: MCPExternalAuthConfig
metadata: {name: eas}
spec:
  type: embeddedAuthServer
  embeddedAuthServer:
    issuer: https://mcp.example.com
    upstreamProviders:
      - name: google
        type: oidc
        oidcConfig: {issuerUrl: 'https://accounts.google.com', clientId: cid, clientSecretRef: {name: idp, key: secret}}
    signingKeySecretRefs: [{name: keys, key: signing.pem}]
    hmacSecretRefs: [{name: keys, key: hmac}]
    tokenLifespans: {accessTokenLifespan: 30m}
"""


def _redis_example() -> MCPExternalAuthConfig:
    for label, document in toolhive_documents("v1beta1"):
        if "redis-storage/mcpexternalauthconfig" in label:
            found = obj(yaml.safe_dump({k: v for k, v in document.items() if k != "apiVersion"}))
            assert isinstance(found, MCPExternalAuthConfig)
            return found
    raise AssertionError("ToolHive's redis-storage example is missing")


def test_kubernetes_mounts_secrets_into_the_proxy_only() -> None:
    auth = obj(AUTH)
    server = obj(
        "kind: MCPServer\nmetadata: {name: api}\nspec: {image: 'ghcr.io/x/y:1', transport: streamable-http,"
        " mcpPort: 8081, externalAuthConfigRef: {name: eas}}"
    )
    world = World(platform="kubernetes", namespace="team", external_auth_configs={"eas": auth})
    plan = mcpserver.plan(server, world)
    assert not plan.problems, plan.problems
    assert proxy_config(plan)["authserverConfig"] == "authserver.json"
    document = json.loads(next(f.content for f in plan.config_files if f.filename == "authserver.json"))
    assert document["upstream"]["clientSecretFile"].startswith("/")
    assert document["accessTokenLifespan"] == 1800.0
    assert {f.secret.name for f in plan.secret_files} == {"idp", "keys"}
    manifests = render(plan, Owner("MCPServer", "api", "team", "uid"), Images())
    text = json.dumps([m for m in manifests if m["kind"] in {"ConfigMap", "Deployment"}])
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    mounted = {c["name"]: [v["name"] for v in c.get("volumeMounts", ())] for c in containers}
    secret_volumes = [
        v["name"]
        for v in deployment["spec"]["template"]["spec"]["volumes"]
        if "secret" in v or "projected" in v
    ]
    assert secret_volumes and any(v in mounted["proxy"] for v in secret_volumes)
    assert not any(v in mounted["mcp"] for v in secret_volumes)
    for container in containers:
        for env in container.get("env", ()):
            assert "value" not in env or "secret" not in env["value"].lower()
    assert "upstream-secret" not in text  # values never known to the plan at all


def test_redis_sentinel_example_and_local_problems() -> None:
    auth = _redis_example()
    proxy = obj(
        "kind: MCPRemoteProxy\nmetadata: {name: r}\nspec: {remoteURL: 'https://remote.example.com/mcp',"
        " externalAuthConfigRef: {name: auth-with-redis}}"
    )
    world = World(platform="kubernetes", namespace="default", external_auth_configs={"auth-with-redis": auth})
    plan = mcpremoteproxy.plan(proxy, world)
    assert not plan.problems, plan.problems
    document = json.loads(next(f.content for f in plan.config_files if f.filename == "authserver.json"))
    assert document["storage"] == "redis"
    assert document["redis"]["sentinelAddrs"] == ["redis-sentinel.redis.svc:26379"]
    assert document["redis"]["masterName"] == "mymaster"
    assert {f.secret.name for f in plan.secret_files} == {"google-oauth-secret", "redis-credentials"}
    local = mcpremoteproxy.plan(
        proxy, World(platform="local", namespace="default", external_auth_configs={"auth-with-redis": auth})
    )
    assert any("sentinelService" in p for p in local.problems), local.problems


def test_http_issuer_and_oidc_together_are_problems() -> None:
    auth = obj(AUTH.replace("https://mcp.example.com", "http://mcp.example.com"))
    server = obj(
        "kind: MCPServer\nmetadata: {name: api}\nspec: {image: 'uvx://mcp-server-time', externalAuthConfigRef: {name: eas},"
        " oidcConfig: {type: inline, inline: {issuer: 'https://idp.example.com', audience: a}}}"
    )
    plan = mcpserver.plan(
        server, World(platform="local", namespace="default", external_auth_configs={"eas": auth})
    )
    joined = " ".join(plan.problems)
    assert "embeddedAuthServer.issuer" in joined and "remove oidcConfig" in joined
    with_path = obj(AUTH.replace("https://mcp.example.com", "https://mcp.example.com/auth"))
    assert isinstance(with_path, MCPExternalAuthConfig) and with_path.spec.embedded_auth_server is not None
    assert "a path is not supported" in " ".join(with_path.spec.embedded_auth_server.problems())
    assert not plan.containers


def test_gateway_cannot_log_in_to_an_embedded_auth_server_backend() -> None:
    from mcpfleet.reconcile import virtualmcpserver

    auth = obj(AUTH)
    group = obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")
    server = obj(
        "kind: MCPServer\nmetadata: {name: api}\nspec: {image: 'uvx://mcp-server-time', groupRef: g,"
        " externalAuthConfigRef: {name: eas}}"
    )
    gateway = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g}, incomingAuth: {type: anonymous}}"
    )
    world = World(
        platform="kubernetes",
        namespace="team",
        external_auth_configs={"eas": auth},
        groups={"g": group},
        servers=(server,),
        virtual_servers=(gateway,),
    )
    plan = virtualmcpserver.plan(gateway, world)
    assert any("embeddedAuthServer is not supported by the gateway" in p for p in plan.problems), (
        plan.problems
    )


def test_auth_server_ref_renders_the_server_and_names_its_problems() -> None:
    """`authServerRef` renders as an embeddedAuthServer externalAuthConfigRef does; it must name that type,
    not be doubled by an embeddedAuthServer externalAuthConfigRef, and a gateway cannot use it as a backend."""
    from mcpfleet.reconcile import virtualmcpserver

    auth = obj(AUTH)
    bearer = obj(
        "kind: MCPExternalAuthConfig\nmetadata: {name: key}\nspec: {type: bearerToken,"
        " bearerToken: {tokenSecretRef: {name: k, key: token}}}"
    )
    configs = {"eas": auth, "key": bearer}

    def proxy_plan(refs: str) -> list[str]:
        proxy = obj(
            f"kind: MCPRemoteProxy\nmetadata: {{name: r}}\nspec: {{remoteURL: 'https://remote.example.com/mcp', {refs}}}"
        )
        plan = mcpremoteproxy.plan(
            proxy, World(platform="kubernetes", namespace="team", external_auth_configs=configs)
        )
        if not plan.problems:
            config = proxy_config(plan)
            assert config["authserverConfig"] == "authserver.json" and "bearerTokenFromEnv" in config
        return list(plan.problems)

    assert proxy_plan("authServerRef: {name: eas}, externalAuthConfigRef: {name: key}") == []
    assert "is of type bearerToken" in " ".join(proxy_plan("authServerRef: {name: key}"))
    assert "MCPExternalAuthConfig nope not found" in " ".join(proxy_plan("authServerRef: {name: nope}"))
    doubled = " ".join(proxy_plan("authServerRef: {name: eas}, externalAuthConfigRef: {name: eas}"))
    assert doubled.startswith("spec.externalAuthConfigRef: names an embeddedAuthServer"), doubled

    server = obj(
        "kind: MCPServer\nmetadata: {name: api}\nspec: {image: 'ghcr.io/x/y:1', transport: streamable-http,"
        " mcpPort: 8081, groupRef: g, authServerRef: {kind: MCPExternalAuthConfig, name: eas}}"
    )
    world = World(
        platform="kubernetes",
        namespace="team",
        external_auth_configs=configs,
        groups={"g": obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")},
        servers=(server,),
        virtual_servers=(
            obj(
                "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g}, incomingAuth: {type: anonymous}}"
            ),
        ),
    )
    served = mcpserver.plan(server, world)
    assert not served.problems and any(f.filename == "authserver.json" for f in served.config_files)
    gateway = virtualmcpserver.plan(world.virtual_servers[0], world)
    assert any("api.spec.authServerRef" in p for p in gateway.problems), gateway.problems


def test_gateway_auth_server_config_renders_on_kubernetes() -> None:
    """VirtualMCPServer `authServerConfig`: the gateway container gets `--authserver-config` and the
    Secret files; incomingAuth must be oidc with the same issuer (else a problem naming the field)."""
    from mcpfleet.reconcile import virtualmcpserver

    settings = yaml.safe_load(AUTH)["spec"]["embeddedAuthServer"]

    def gateway(issuer: str) -> object:
        spec = {
            "config": {"groupRef": "g"},
            "incomingAuth": {
                "type": "oidc",
                "oidcConfig": {"type": "inline", "inline": {"issuer": issuer, "audience": "a"}},
            },
            "authServerConfig": settings,
        }
        return obj(yaml.safe_dump({"kind": "VirtualMCPServer", "metadata": {"name": "gw"}, "spec": spec}))

    world = World(
        platform="kubernetes",
        namespace="team",
        groups={"g": obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")},
    )
    plan = virtualmcpserver.plan(gateway("https://mcp.example.com"), world)  # type: ignore[arg-type]
    assert not plan.problems, plan.problems
    assert "--authserver-config" in plan.containers[0].command
    assert {f.secret.name for f in plan.secret_files} == {"idp", "keys"}
    manifests = render(plan, Owner("VirtualMCPServer", "gw", "team", "uid"), Images())
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    assert any("secret" in v or "projected" in v for v in deployment["spec"]["template"]["spec"]["volumes"])
    wrong = virtualmcpserver.plan(gateway("https://other.example.com"), world)  # type: ignore[arg-type]
    assert any(p.startswith("spec.authServerConfig.issuer") for p in wrong.problems), wrong.problems


def test_cimd_private_addresses_are_refused_unless_allowed() -> None:
    """`cimd.allowPrivateIP` reaches the server's settings; without it the guard is on (issue 27 item 9)."""
    server = obj(
        "kind: MCPServer\nmetadata: {name: api}\nspec: {image: 'ghcr.io/x/y:1', transport: streamable-http,"
        " mcpPort: 8081, externalAuthConfigRef: {name: eas}}"
    )
    for cimd, allowed in (("{enabled: true}", False), ("{enabled: true, allowPrivateIP: true}", True)):
        auth = obj(AUTH + f"    cimd: {cimd}\n")
        world = World(platform="kubernetes", namespace="team", external_auth_configs={"eas": auth})
        plan = mcpserver.plan(server, world)
        assert not plan.problems, plan.problems
        document = json.loads(next(f.content for f in plan.config_files if f.filename == "authserver.json"))
        assert document["cimdEnabled"] is True
        assert document["cimdAllowPrivateIp"] is allowed


def test_primary_upstream_provider_in_inline_authz_as_toolhive_reads_it() -> None:
    """ToolHive's `authzConfig.inline.primaryUpstreamProvider`: no effect on MCPServer / MCPRemoteProxy
    (an advisory condition), and on VirtualMCPServer the deprecated place of
    `authServerConfig.primaryUpstreamProvider`, read as it; a conflict is refused naming both."""
    from mcpfleet.reconcile import virtualmcpserver

    inline = {"type": "inline", "inline": {"policies": ["permit(principal, action, resource);"]}}
    world = World(
        platform="kubernetes",
        namespace="team",
        groups={"g": obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")},
    )
    for kind, extra in (
        ("MCPServer", {"image": "uvx://mcp-server-time"}),
        ("MCPRemoteProxy", {"remoteURL": "https://r.example.com/mcp"}),
    ):
        authz = {**inline, "inline": {**inline["inline"], "primaryUpstreamProvider": "google"}}  # type: ignore[dict-item]
        workload = obj(
            yaml.safe_dump({"kind": kind, "metadata": {"name": "w"}, "spec": {**extra, "authzConfig": authz}})
        )
        rules = mcpserver if kind == "MCPServer" else mcpremoteproxy
        plan = rules.plan(workload, world)  # type: ignore[attr-defined]
        assert not plan.problems, plan.problems
        (ignored,) = [c for c in plan.conditions if c[0] == "AuthzPrimaryUpstreamProviderIgnored"]
        assert (
            ignored[1] == "True" and "spec.authzConfig.inline.primaryUpstreamProvider (google)" in ignored[3]
        )

    settings = yaml.safe_load(AUTH)["spec"]["embeddedAuthServer"]

    def gateway(legacy: str, current: str | None = None, with_server: bool = True) -> object:
        spec: dict[str, object] = {
            "config": {"groupRef": "g"},
            "incomingAuth": {
                "type": "oidc",
                "oidcConfig": {
                    "type": "inline",
                    "inline": {"issuer": "https://mcp.example.com", "audience": "a"},
                },
                "authzConfig": {**inline, "inline": {**inline["inline"], "primaryUpstreamProvider": legacy}},  # type: ignore[dict-item]
            },
        }
        if with_server:
            spec["authServerConfig"] = {
                **settings,
                **({"primaryUpstreamProvider": current} if current else {}),
            }
        return obj(yaml.safe_dump({"kind": "VirtualMCPServer", "metadata": {"name": "gw"}, "spec": spec}))

    read = virtualmcpserver.plan(gateway("google"), world)  # type: ignore[arg-type]
    assert not read.problems, read.problems
    assert [c[0] for c in read.conditions if c[0].startswith("AuthzPrimary")] == [
        "AuthzPrimaryUpstreamProviderDeprecated"
    ]
    same = virtualmcpserver.plan(gateway("google", "google"), world)  # type: ignore[arg-type]
    assert not same.problems
    unknown = virtualmcpserver.plan(gateway("okta"), world)  # type: ignore[arg-type]
    assert any(
        p.startswith("spec.incomingAuth.authzConfig.inline.primaryUpstreamProvider: okta names none of")
        for p in unknown.problems
    ), unknown.problems
    conflict = virtualmcpserver.plan(gateway("okta", "google"), world)  # type: ignore[arg-type]
    assert any(
        "okta conflicts with spec.authServerConfig.primaryUpstreamProvider google" in p
        for p in conflict.problems
    ), conflict.problems
    without = virtualmcpserver.plan(gateway("google", with_server=False), world)  # type: ignore[arg-type]
    assert not without.problems
    assert [c[0] for c in without.conditions if c[0].startswith("AuthzPrimary")] == [
        "AuthzPrimaryUpstreamProviderIgnored"
    ]


def test_user_info_and_override_reach_the_authorization_server_config() -> None:
    """`oauth2Config.userInfo` / `oidcConfig.userInfoOverride` become the data plane's `userinfo`
    request (defaults filled in: GET, sub / name / email)."""
    settings = yaml.safe_load(AUTH)
    oauth2 = {
        "name": "gh",
        "type": "oauth2",
        "oauth2Config": {
            "authorizationEndpoint": "https://github.com/login/oauth/authorize",
            "tokenEndpoint": "https://github.com/login/oauth/access_token",
            "clientId": "c",
            "userInfo": {
                "endpointUrl": "https://api.github.com/user",
                "additionalHeaders": {"Accept": "application/vnd.github+json"},
                "fieldMapping": {"subjectFields": ["id"], "nameFields": ["name", "login"]},
            },
        },
    }
    settings["spec"]["embeddedAuthServer"]["upstreamProviders"] = [oauth2]
    server = obj(
        "kind: MCPServer\nmetadata: {name: api}\nspec: {image: 'ghcr.io/x/y:1', transport: streamable-http,"
        " mcpPort: 8081, externalAuthConfigRef: {name: eas}}"
    )
    world = World(
        platform="kubernetes", namespace="team", external_auth_configs={"eas": obj(yaml.safe_dump(settings))}
    )
    plan = mcpserver.plan(server, world)
    assert not plan.problems, plan.problems
    document = json.loads(next(f.content for f in plan.config_files if f.filename == "authserver.json"))
    assert document["upstream"]["userinfo"] == {
        "url": "https://api.github.com/user",
        "method": "GET",
        "headers": {"Accept": "application/vnd.github+json"},
        "subjectFields": ["id"],
        "nameFields": ["name", "login"],
        "emailFields": ["email"],
    }
    oidc = yaml.safe_load(AUTH)
    oidc["spec"]["embeddedAuthServer"]["upstreamProviders"][0]["oidcConfig"]["userInfoOverride"] = {
        "httpMethod": "POST"
    }
    world = World(
        platform="kubernetes", namespace="team", external_auth_configs={"eas": obj(yaml.safe_dump(oidc))}
    )
    plan = mcpserver.plan(server, world)
    document = json.loads(next(f.content for f in plan.config_files if f.filename == "authserver.json"))
    assert "url" not in document["upstream"]["userinfo"]  # the discovered userinfo_endpoint
    assert document["upstream"]["userinfo"]["method"] == "POST"
