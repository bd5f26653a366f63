"""Reconcile rules of the seven kinds ToolHive added (platform-neutral; no cluster)."""

from __future__ import annotations

import yaml

from mcpfleet.api.embeddingserver import EmbeddingServerStatus
from mcpfleet.api.mcpgroup import MCPGroupStatus
from mcpfleet.api.mcpserverentry import MCPServerEntryStatus
from mcpfleet.api.meta import ConfigStatus
from mcpfleet.api.virtualmcpcompositetooldefinition import CompositeToolDefinitionStatus
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import (
    configkinds,
    embeddingserver,
    kinds,
    mcpauthzconfig,
    mcpgroup,
    mcpoidcconfig,
    mcpserverentry,
    mcptelemetryconfig,
    mcpwebhookconfig,
    virtualmcpcompositetooldefinition,
    virtualmcpserver,
)
from mcpfleet.reconcile.model import Images, World
from mcpfleet.reconcile.oidc import incoming_auth
from tests.reconcile.conftest import obj


def _ref(name: str, **extra: object) -> object:
    class Ref:
        pass

    ref = Ref()
    ref.name = name  # type: ignore[attr-defined]
    for key, value in extra.items():
        setattr(ref, key, value)
    return ref


def test_oidc_ref_resolves_to_what_the_inline_form_gives() -> None:
    shared = obj(
        "kind: MCPOIDCConfig\nmetadata: {name: idp}\nspec: {type: inline, inline: {issuer: 'https://auth.example.com',"
        " jwksUrl: 'https://auth.example.com/jwks', clientId: c, clientSecretRef: {name: s, key: k}}}"
    )
    world = World(platform="local", namespace="team", oidc_configs={"idp": shared})
    ref = _ref("idp", audience="api", scopes=["openid"], resource_url="https://api.example.com/mcp")
    resolved = mcpoidcconfig.resolve(ref, world, "local")
    inline = obj(
        "kind: MCPServer\nmetadata: {name: s}\nspec: {image: 'uvx://x', oidcConfig: {type: inline,"
        " resourceUrl: 'https://api.example.com/mcp', inline: {issuer: 'https://auth.example.com',"
        " audience: api, jwksUrl: 'https://auth.example.com/jwks', clientId: c,"
        " clientSecretRef: {name: s, key: k}, scopes: [openid]}}}"
    )
    expected = incoming_auth(inline.spec.oidc_config, None, "local")
    assert resolved.document == expected.document and resolved.secret_env == expected.secret_env
    assert not resolved.problems


def test_oidc_ref_kubernetes_service_account_and_missing() -> None:
    shared = obj(
        "kind: MCPOIDCConfig\nmetadata: {name: k8s}\nspec: {type: kubernetesServiceAccount,"
        " kubernetesServiceAccount: {serviceAccount: bot}}"
    )
    world = World(platform="kubernetes", namespace="team", oidc_configs={"k8s": shared})
    plan = mcpoidcconfig.resolve(_ref("k8s", audience="svc"), world, "kubernetes")
    assert plan.document is not None and plan.service_account_token
    assert plan.document["oidc"]["audience"] == "svc"
    assert plan.document["oidc"]["serviceAccountName"] == "bot"
    local = mcpoidcconfig.resolve(_ref("k8s", audience="svc"), world, "local")
    assert local.problems and "needs Kubernetes" in local.problems[0]
    missing = mcpoidcconfig.resolve(_ref("nope"), world, "kubernetes", where="spec.incomingAuth")
    assert missing.problems == ("spec.incomingAuth.oidcConfigRef: MCPOIDCConfig nope not found",)


def test_oidc_config_status_lists_servers_proxies_and_gateways() -> None:
    shared = obj(
        "kind: MCPOIDCConfig\nmetadata: {name: idp}\nspec: {type: inline, inline: {issuer: 'https://a'}}"
    )
    vmcp = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g},"
        " incomingAuth: {type: oidc, oidcConfigRef: {name: idp, audience: gw}}}"
    )
    world = World(platform="kubernetes", namespace="team", virtual_servers=(vmcp,))
    status = mcpoidcconfig.status(ConfigStatus(), shared, world, deleting=False, now="t")
    assert [(r.kind, r.name) for r in status.referencing_workloads] == [("VirtualMCPServer", "gw")]
    assert status.config_hash == configkinds.config_hash(shared)
    edited = obj(
        "kind: MCPOIDCConfig\nmetadata: {name: idp}\nspec: {type: inline, inline: {issuer: 'https://b'}}"
    )
    assert mcpoidcconfig.status(status, edited, world, deleting=False).config_hash != status.config_hash


def test_authz_ref_resolves_to_type_and_config() -> None:
    authz = obj(
        "kind: MCPAuthzConfig\nmetadata: {name: pol}\nspec: {type: cedarv1, config: {policies:"
        " ['permit(principal, action, resource);'], entities_json: '[]'}}"
    )
    world = World(platform="local", namespace="team", authz_configs={"pol": authz})
    assert mcpauthzconfig.resolve("pol", world) == {
        "type": "cedarv1",
        "config": {"policies": ["permit(principal, action, resource);"], "entities_json": "[]"},
    }
    try:
        mcpauthzconfig.resolve("nope", world, field="spec.incomingAuth.authzConfigRef")
    except mcpauthzconfig.AuthzRefError as exc:
        assert str(exc) == "spec.incomingAuth.authzConfigRef: MCPAuthzConfig nope not found"
    else:
        raise AssertionError("a missing MCPAuthzConfig resolved")


def test_telemetry_ref_becomes_otel_environment_without_secret_values() -> None:
    otel = obj(
        "kind: MCPTelemetryConfig\nmetadata: {name: otel}\nspec: {openTelemetry: {enabled: true,"
        " endpoint: 'collector:4318', insecure: true, headers: {x-team: a},"
        " sensitiveHeaders: [{name: authorization, secretKeyRef: {name: otlp, key: token}}],"
        " tracing: {enabled: true, samplingRate: '0.25'}}}"
    )
    world = World(platform="kubernetes", namespace="team", telemetry_configs={"otel": otel})
    plan = mcptelemetryconfig.resolve(
        _ref("otel", service_name="fetch"), world, "kubernetes", kind="MCPServer", name="s"
    )
    env = dict(plan.env)
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4318"
    assert env["OTEL_SERVICE_NAME"] == "fetch"
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.25"
    assert env["OTEL_EXPORTER_OTLP_HEADERS"] == "x-team=a"
    assert env["MCPFLEET_OTLP_SECRET_HEADERS"] == "authorization=MCPFLEET_OTLP_HEADER_0"
    assert [(s.env_name, s.secret.name, s.secret.key) for s in plan.secret_env] == [
        ("MCPFLEET_OTLP_HEADER_0", "otlp", "token")
    ]
    status = mcptelemetryconfig.status(ConfigStatus(), otel, world, deleting=False)
    assert status.config_hash == configkinds.config_hash(otel) and not status.referencing_workloads


def test_webhook_config_resolves_and_counts_references() -> None:
    hooks = obj(
        "kind: MCPWebhookConfig\nmetadata: {name: wh}\nspec: {validating: [{name: policy, url: 'https://pdp/check',"
        " hmacSecretRef: {name: h, key: k}}]}"
    )
    world = World(platform="kubernetes", namespace="team", webhook_configs={"wh": hooks})
    resolved = mcpwebhookconfig.resolve("wh", world)
    assert resolved is not None and resolved["validating"][0]["failurePolicy"] == "fail"
    assert resolved["configHash"] == configkinds.config_hash(hooks)
    assert mcpwebhookconfig.resolve("nope", world) is None


COMPOSITE = (
    "kind: VirtualMCPCompositeToolDefinition\nmetadata: {name: deploy}\nspec: {name: deploy_app, steps: ["
    "{id: ask, type: elicitation, message: 'Proceed?', schema: {type: object, properties: {ok: {type: boolean}}},"
    " onDecline: {action: skip_remaining}},"
    "{id: run, tool: 'srv.echo', arguments: {message: go}, dependsOn: [ask]}]}"
)


def test_composite_tool_refs_are_served_by_the_gateway_config() -> None:
    definition = obj(COMPOSITE)
    group = obj("kind: MCPGroup\nmetadata: {name: g}")
    vmcp = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g, compositeToolRefs: [{name: deploy}]},"
        " incomingAuth: {type: anonymous}}"
    )
    world = World(
        platform="local",
        namespace="team",
        groups={"g": group},
        composite_tool_definitions={"deploy": definition},
        virtual_servers=(vmcp,),
    )
    plan = virtualmcpserver.plan(vmcp, world)
    assert not plan.problems
    rendered = yaml.safe_load(plan.config_files[0].content)
    assert [t["name"] for t in rendered["compositeTools"]] == ["deploy_app"]
    assert rendered["compositeTools"][0]["steps"][0]["type"] == "elicitation"
    status = virtualmcpcompositetooldefinition.status(ConfigStatus(), definition, world, deleting=False)
    assert [(r.kind, r.name) for r in status.referencing_workloads] == [("VirtualMCPServer", "gw")]
    assert status.referencing_virtual_servers == ["gw"]
    assert status.validation_status == "Valid" and status.validation_errors == []
    # A stored spec the models refuse (the API server cannot check a dependsOn cycle): Invalid, named.
    invalid = kinds.invalid_config_status(
        "VirtualMCPCompositeToolDefinition",
        status.dump(),
        generation=2,
        message="spec.steps: dependsOn forms a cycle among a, b",
    )
    assert isinstance(invalid, CompositeToolDefinitionStatus)
    assert invalid.validation_status == "Invalid"
    assert invalid.validation_errors == ["spec.steps: dependsOn forms a cycle among a, b"]
    assert invalid.referencing_virtual_servers == ["gw"] and invalid.config_hash is None
    missing = virtualmcpserver.plan(vmcp, World(platform="local", namespace="team", groups={"g": group}))
    assert missing.problems == (
        "spec.config.compositeToolRefs[0]: VirtualMCPCompositeToolDefinition deploy not found",
    )


def test_server_entries_become_gateway_backends_with_headers_auth_and_ca() -> None:
    group = obj("kind: MCPGroup\nmetadata: {name: remote}")
    auth = obj(
        "kind: MCPExternalAuthConfig\nmetadata: {name: tok}\nspec: {type: bearerToken,"
        " bearerToken: {tokenSecretRef: {name: t, key: token}}}"
    )
    entry = obj(
        "kind: MCPServerEntry\nmetadata: {name: ctx}\nspec: {remoteUrl: 'https://mcp.example.com/mcp',"
        " transport: streamable-http, groupRef: {name: remote}, externalAuthConfigRef: {name: tok},"
        " headerForward: {addPlaintextHeaders: {X-Tenant: t1}, addHeadersFromSecret: [{headerName: X-Key,"
        " valueSecretRef: {name: api, key: key}}]}, caBundleRef: {configMapRef: {name: corp-ca, key: ca.crt}}}"
    )
    other = obj(
        "kind: MCPServerEntry\nmetadata: {name: elsewhere}\nspec: {remoteUrl: 'https://b.example.com/mcp',"
        " transport: sse, groupRef: {name: other}}"
    )
    vmcp = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: remote}, incomingAuth: {type: anonymous}}"
    )
    world = World(
        platform="kubernetes",
        namespace="team",
        groups={"remote": group},
        external_auth_configs={"tok": auth},
        server_entries=(entry, other),
    )
    plan = virtualmcpserver.plan(vmcp, world)
    assert not plan.problems
    config = yaml.safe_load(plan.config_files[0].content)
    (backend,) = config["backends"]
    assert backend["name"] == "ctx" and backend["url"] == "https://mcp.example.com/mcp"
    assert backend["metadata"] == {"kind": "MCPServerEntry"}
    assert backend["headers"][0] == {"headerName": "X-Tenant", "headerValue": "t1"}
    assert backend["headers"][1]["headerName"] == "X-Key" and "headerValue" not in backend["headers"][1]
    assert backend["caFile"].endswith("entry-ctx-ca.crt")
    assert config["outgoingAuth"]["backends"]["ctx"]["type"] == "bearer_token"
    secret_keys = {(s.secret.name, s.secret.key) for c in plan.containers for s in c.secret_env}
    assert {("api", "key"), ("t", "token")} <= secret_keys
    assert [(f.config_map.name, f.config_map.key) for f in plan.config_map_files] == [("corp-ca", "ca.crt")]
    status = mcpserverentry.status(MCPServerEntryStatus(), entry, world, now="t")
    assert status.phase == "Valid"
    assert mcpserverentry.status(status, entry, world, now="later") == status
    assert mcpserverentry.status(MCPServerEntryStatus(), other, world).phase == "Pending"
    members = mcpgroup.status(MCPGroupStatus(), group, world)
    assert members.entries == ["ctx"] and members.entry_count == 1


def test_server_entry_endpoint_rules() -> None:
    def entry(url: str, allow: bool = False) -> object:
        return obj(
            f"kind: MCPServerEntry\nmetadata: {{name: e}}\nspec: {{remoteUrl: '{url}', transport: sse,"
            f" groupRef: {{name: g}}, allowPrivateEndpoint: {str(allow).lower()}}}"
        )

    kube, local = "kubernetes", "local"
    assert mcpserverentry.endpoint_problem(entry("http://169.254.169.254/mcp", True), kube)
    assert mcpserverentry.endpoint_problem(entry("http://127.0.0.1:8080/mcp", True), kube)
    assert mcpserverentry.endpoint_problem(entry("https://kubernetes.default.svc/x", True), kube)
    private = mcpserverentry.endpoint_problem(entry("http://10.0.0.5/mcp"), kube)
    assert private is not None and private.startswith("spec.allowPrivateEndpoint:")
    assert mcpserverentry.endpoint_problem(entry("http://10.0.0.5/mcp", True), kube) is None
    assert mcpserverentry.endpoint_problem(entry("http://svc.ns.svc.cluster.local/mcp", True), kube) is None
    assert mcpserverentry.endpoint_problem(entry("http://127.0.0.1:8080/mcp"), local)
    assert mcpserverentry.endpoint_problem(entry("http://127.0.0.1:8080/mcp", True), local) is None
    assert mcpserverentry.endpoint_problem(entry("https://mcp.context7.com/mcp"), kube) is None


def test_embedding_server_on_kubernetes_renders_pvc_pod_template_and_overrides() -> None:
    server = obj(
        "kind: EmbeddingServer\nmetadata: {name: emb}\nspec: {model: 'BAAI/bge-small-en-v1.5', replicas: 2,"
        " hfTokenSecretRef: {name: hf, key: token}, args: ['--max-batch-tokens', '1024'],"
        " modelCache: {size: 5Gi, storageClassName: fast},"
        " podTemplateSpec: {spec: {nodeSelector: {pool: ml}, containers: [{name: embedding,"
        " securityContext: {allowPrivilegeEscalation: false}}]}},"
        " resourceOverrides: {service: {annotations: {a: b}}, deployment: {labels: {team: ml}}}}"
    )
    world = World(platform="kubernetes", namespace="team")
    plan = embeddingserver.plan(server, world)
    assert not plan.problems
    manifests = {m["kind"]: m for m in render(plan, Owner("EmbeddingServer", "emb", "team", "uid"), Images())}
    assert set(manifests) == {"PersistentVolumeClaim", "Deployment", "Service"}
    pvc = manifests["PersistentVolumeClaim"]
    assert (
        pvc["spec"]["resources"]["requests"]["storage"] == "5Gi" and pvc["spec"]["storageClassName"] == "fast"
    )
    deployment = manifests["Deployment"]
    assert deployment["spec"]["replicas"] == 2 and deployment["metadata"]["labels"]["team"] == "ml"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "ml"}
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/huggingface/text-embeddings-inference:cpu-latest"
    assert container["args"][:4] == ["--model-id", "BAAI/bge-small-en-v1.5", "--port", "8080"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False}
    assert container["env"] == [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    ]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "emb-emb"}} in pod["volumes"]
    assert manifests["Service"]["metadata"]["annotations"]["a"] == "b"
    assert manifests["Service"]["spec"]["ports"][0]["port"] == 8080


def test_embedding_server_locally_runs_a_package_and_refuses_an_image() -> None:
    image = obj("kind: EmbeddingServer\nmetadata: {name: emb}\nspec: {}")
    local = World(platform="local", namespace="team")
    refused = embeddingserver.plan(image, local)
    assert refused.problems and refused.problems[0].startswith("spec.image:")
    status = embeddingserver.status(EmbeddingServerStatus(), image, refused, None)
    assert status.phase == "Failed" and status.url is None
    package = obj(
        "kind: EmbeddingServer\nmetadata: {name: emb}\nspec: {image: 'uvx://embed-server@1.0', port: 9000}"
    )
    plan = embeddingserver.plan(package, local)
    assert not plan.problems
    (container,) = plan.containers
    assert (
        container.command == ("uvx", "--", "embed-server@1.0")
        and container.port == 9000
        and container.fixed_port
    )
    assert (
        dict(container.env)["MODEL_ID"] == "BAAI/bge-small-en-v1.5" and dict(container.env)["PORT"] == "9000"
    )
