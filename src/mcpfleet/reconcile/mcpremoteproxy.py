"""Reconcile rules of MCPRemoteProxy: `mcpfleet proxy` in front of a remote MCP server, its config
(`proxy.json`, `reconcile/proxy.py`) saying `remoteFromEnv: MCPFLEET_REMOTE_URL`. The URL (which may
carry credentials) is the variable's value, never in the file or an argument: a command line is
readable by every local user (`ps`), a ConfigMap by whoever reads the namespace.

Headers from `headerForward` reach the proxy as environment variables the config names
(`headersFromEnv: {HEADER: ENV}`): plaintext values as plain env, secret values as secretKeyRef env,
so no header value is ever written into a ConfigMap or the command line.

`externalAuthConfigRef` is applied by the proxy itself toward the remote: `headerInjection` as
`headersFromEnv: {NAME: MCPFLEET_EXTERNAL_AUTH}`, `bearerToken` as `bearerTokenFromEnv:
MCPFLEET_EXTERNAL_AUTH`, the value as secretKeyRef env (a local Secret on the local platform).
`tokenExchange` needs the client's token, which only a VirtualMCPServer over the proxy's group holds
(it applies it there); `unauthenticated` adds nothing. `embeddedAuthServer` makes the proxy an OAuth
2.1 authorization server for its clients (`reconcile/authserver.py`: `authserverConfig`).

Incoming OIDC (`oidcConfig` / `oidcConfigRef`, see `reconcile/oidc.py`) is enforced by the proxy
itself (`authConfig: auth.json`); the client's token is not passed upstream. So are `authzConfig`
and `audit` (`reconcile/policy.py`: `authzConfig`, `auditConfig`), and the webhooks of a
`webhookConfigRef` (`reconcile/mcpwebhookconfig.py`: `webhookConfig`; an mcpfleet extension,
ToolHive has the field on MCPServer only).
"""

from __future__ import annotations

from typing import Any

from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.api.meta import SecretKeyRef
from mcpfleet.reconcile import (
    authserver,
    configkinds,
    endpoints,
    mcpauthzconfig,
    mcpoidcconfig,
    mcptelemetryconfig,
    mcpwebhookconfig,
)
from mcpfleet.reconcile import proxy as reconcile_proxy
from mcpfleet.reconcile.common import (
    canonical_json,
    child_name,
    child_name_problem,
    group_condition,
    labels,
    resources_dict,
    service_hosts,
)
from mcpfleet.reconcile.model import ConfigFile, Container, SecretEnv, WorkloadPlan, World
from mcpfleet.reconcile.oidc import AUTH_CONFIG, IncomingAuthPlan
from mcpfleet.reconcile.overrides import kubernetes_overrides, local_condition, with_proxy_env
from mcpfleet.reconcile.policy import ignored_primary_upstream
from mcpfleet.redact import redact_url

RUN_CONFIG = "runconfig.json"
PROXY_CONTAINER = "proxy"
EXTERNAL_AUTH_ENV = "MCPFLEET_EXTERNAL_AUTH"


def _problems(proxy: MCPRemoteProxy, world: World) -> list[str]:
    spec = proxy.spec
    problems: list[str] = []
    if world.platform == "kubernetes":
        problems.extend(child_name_problem("MCPRemoteProxy", proxy.name))
    problems.extend(configkinds.missing_refs(spec.tool_config_ref, spec.external_auth_config_ref, world))
    problems.extend(_auth(proxy, world).problems)
    problems.extend(
        mcpauthzconfig.policy(spec.authz_config, spec.authz_config_ref, spec.audit, world).problems
    )
    problems.extend(_webhooks(proxy, world).problems)
    problems.extend(_authserver(proxy, world).problems)
    endpoint = endpoints.endpoint_problem(
        spec.remote_url,
        spec.allow_private_endpoint,
        world.platform,
        field="spec.remoteURL",
        allow_field="spec.allowPrivateEndpoint",
        local_private=False,
    )
    if endpoint is not None:
        problems.append(endpoint)
    return problems


def _authserver(proxy: MCPRemoteProxy, world: World) -> authserver.AuthServerPlan:
    incoming = _auth(proxy, world).document is not None
    spec = proxy.spec
    return authserver.workload_plan(
        spec.auth_server_ref, spec.external_auth_config_ref, world, incoming_oidc=incoming
    )


def _webhooks(proxy: MCPRemoteProxy, world: World) -> mcpwebhookconfig.WebhookPlan:
    return mcpwebhookconfig.plan(
        proxy.spec.webhook_config_ref, world, server_name=proxy.name, transport=proxy.spec.transport
    )


def _auth(proxy: MCPRemoteProxy, world: World) -> IncomingAuthPlan:
    return mcpoidcconfig.workload_auth(proxy.spec.oidc_config, proxy.spec.oidc_config_ref, world)


REMOTE_URL_ENV = "MCPFLEET_REMOTE_URL"
"""The proxy's environment variable holding `remoteURL` (`mcpfleet proxy --remote-from-env`)."""


def run_config(proxy: MCPRemoteProxy, world: World) -> dict[str, object]:
    spec = proxy.spec
    config: dict[str, object] = {
        "name": proxy.name,
        "namespace": proxy.namespace,
        # The run config is a ConfigMap: credentials in the URL stay out of it.
        "remoteURL": redact_url(spec.remote_url),
        "transport": spec.transport,
        "headers": sorted(
            [*(spec.header_forward.add_plaintext_headers or {})]
            + [h.header_name for h in spec.header_forward.add_headers_from_secret or ()]
        )
        if spec.header_forward
        else [],
    }
    if spec.group_ref is not None:
        config["groupRef"] = spec.group_ref
    config.update(configkinds.run_config_refs(spec.tool_config_ref, spec.external_auth_config_ref, world))
    return config


def _external_auth(proxy: MCPRemoteProxy, world: World) -> tuple[dict[str, Any], list[SecretEnv]]:
    """Proxy config fields and secret env for the referenced MCPExternalAuthConfig (see module doc)."""
    ref = proxy.spec.external_auth_config_ref
    auth = world.external_auth_configs.get(ref.name) if ref is not None else None
    if auth is None:
        return {}, []
    spec = auth.spec
    if spec.type == "headerInjection" and spec.header_injection is not None:
        secret = spec.header_injection.value_secret_ref
        fields: dict[str, Any] = {"headersFromEnv": {spec.header_injection.header_name: EXTERNAL_AUTH_ENV}}
    elif spec.type == "bearerToken" and spec.bearer_token is not None:
        secret = spec.bearer_token.token_secret_ref
        fields = {"bearerTokenFromEnv": EXTERNAL_AUTH_ENV}
    else:
        return {}, []
    return fields, [SecretEnv(EXTERNAL_AUTH_ENV, SecretKeyRef(name=secret.name, key=secret.key))]


def _forwarded_headers(
    proxy: MCPRemoteProxy,
) -> tuple[dict[str, str], list[tuple[str, str]], list[SecretEnv]]:
    """`headerForward`: header -> environment variable, the plaintext values as env, the secret ones
    as secretKeyRef env (no header value in the config or the command line)."""
    forward = proxy.spec.header_forward
    headers: dict[str, str] = {}
    env: list[tuple[str, str]] = []
    secrets: list[SecretEnv] = []
    for header, value in sorted((forward.add_plaintext_headers or {}).items()) if forward else ():
        var = f"MCPFLEET_HEADER_{len(headers)}"
        env.append((var, value))
        headers[header] = var
    for item in (forward.add_headers_from_secret or ()) if forward else ():
        var = f"MCPFLEET_HEADER_{len(headers)}"
        ref = item.value_secret_ref
        secrets.append(SecretEnv(var, SecretKeyRef(name=ref.name, key=ref.key)))
        headers[item.header_name] = var
    return headers, env, secrets


def proxy_config(proxy: MCPRemoteProxy, world: World) -> dict[str, Any]:
    """The proxy's rendered config (`proxy.json`): the URL by environment variable, never in the file
    or argv (it may hold credentials: `user:pw@`, a query token), the forwarded and injected headers by
    environment variable, the Service's host names on Kubernetes and the documents it enforces."""
    spec = proxy.spec
    headers, _, _ = _forwarded_headers(proxy)
    auth_fields, _ = _external_auth(proxy, world)
    fields: dict[str, Any] = {"remoteFromEnv": REMOTE_URL_ENV, **auth_fields}
    headers.update(auth_fields.get("headersFromEnv", {}))
    if headers:
        fields["headersFromEnv"] = headers
    if world.platform == "kubernetes":
        name = child_name("MCPRemoteProxy", proxy.name)
        fields["allowedHosts"] = list(service_hosts(name, proxy.namespace, spec.proxy_port))
    policy = mcpauthzconfig.policy(spec.authz_config, spec.authz_config_ref, spec.audit, world)
    guards = reconcile_proxy.guard_fields(
        _auth(proxy, world), _authserver(proxy, world), policy, _webhooks(proxy, world)
    )
    return {**fields, **guards}


def _config_files(proxy: MCPRemoteProxy, world: World) -> tuple[ConfigFile, ...]:
    spec = proxy.spec
    files = [
        ConfigFile(RUN_CONFIG, canonical_json(run_config(proxy, world))),
        reconcile_proxy.config_file(proxy_config(proxy, world)),
    ]
    auth = _auth(proxy, world)
    if auth.document is not None:
        files.append(ConfigFile(AUTH_CONFIG, canonical_json(auth.document)))
    files.extend(
        mcpauthzconfig.policy(spec.authz_config, spec.authz_config_ref, spec.audit, world).proxy_files()
    )
    files.extend(_webhooks(proxy, world).proxy_files())
    files.extend(_authserver(proxy, world).proxy_files())
    return tuple(files)


def plan(proxy: MCPRemoteProxy, world: World) -> WorkloadPlan:
    """What should run for `proxy` in `world`."""
    spec = proxy.spec
    _, header_env, header_secrets = _forwarded_headers(proxy)
    _, auth_secrets = _external_auth(proxy, world)
    auth = _auth(proxy, world)
    container = Container(
        name=PROXY_CONTAINER,
        command=reconcile_proxy.command(),
        port=spec.proxy_port,
        env=((REMOTE_URL_ENV, spec.remote_url), *header_env),
        secret_env=(*header_secrets, *auth_secrets, *auth.secret_env),
        resources=resources_dict(spec.resources),
        service_account_token=auth.service_account_token,
    )
    policy = mcpauthzconfig.policy(spec.authz_config, spec.authz_config_ref, spec.audit, world)
    overrides = kubernetes_overrides(spec.pod_template_spec, spec.resource_overrides)
    workload = WorkloadPlan(
        kind="MCPRemoteProxy",
        name=proxy.name,
        namespace=proxy.namespace,
        replicas=spec.effective_replicas,
        containers=with_proxy_env((container,), PROXY_CONTAINER, spec.resource_overrides),
        serving_container=PROXY_CONTAINER,
        # The proxy serves streamable HTTP on /mcp whatever the remote's transport.
        url_path="/mcp",
        health_path="/health",
        config_files=_config_files(proxy, world),
        config_map_files=auth.config_map_files + policy.config_map_files,
        secret_files=_webhooks(proxy, world).secret_files + _authserver(proxy, world).secret_files,
        service_account=spec.service_account,
        labels=labels("MCPRemoteProxy", proxy.name, "remote-proxy"),
        conditions=(
            *group_condition(spec.group_ref, world),
            *local_condition(world, overrides),
            *ignored_primary_upstream(spec.authz_config, "spec.authzConfig"),
        ),
        problems=tuple(_problems(proxy, world)),
        session_affinity=spec.session_affinity,
        overrides=overrides,
    )
    return mcptelemetryconfig.applied(workload, spec.telemetry_config_ref, world, target=PROXY_CONTAINER)
