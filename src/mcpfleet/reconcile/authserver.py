"""What a workload's `authServerRef` (or, the older way, its `externalAuthConfigRef`) naming an
`embeddedAuthServer` MCPExternalAuthConfig renders: the proxy in front of the MCP server runs the OAuth 2.1 authorization server
(`mcpfleet.auth.authserver`), started with `--authserver-config {config_dir}/authserver.json`.

The document (`AuthServerSettings`) names every secret — upstream client secret, signing keys, HMAC
secrets, Redis credentials and CA bundles — as a `SecretFile` path: a Secret volume mounted into the
proxy container only on Kubernetes, a 0600 file under the config dir locally. No secret value is in
the document, a ConfigMap, the command line or the environment. A `sentinelService` becomes its
cluster DNS name (Kubernetes only). An http MCP server then runs behind the proxy, as with OIDC.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mcpfleet.api.duration import parse_duration
from mcpfleet.api.mcpexternalauthconfig import (
    EmbeddedAuthServerConfig,
    RedisTLS,
    UpstreamProvider,
    UserInfo,
    UserInfoOverride,
)
from mcpfleet.api.meta import AuthServerRef, LocalObjectReference, SecretKeyRef
from mcpfleet.auth.authserver.config import (
    AuthServerSettings,
    RedisSettings,
    RedisTLSFiles,
    Upstream,
    UserInfoFetch,
)
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import ConfigFile, SecretFile, World, secret_file_path

AUTHSERVER_CONFIG = "authserver.json"


@dataclass(frozen=True)
class AuthServerPlan:
    """The proxy's document, the Secret files it names, and problems (the workload then does not run)."""

    settings: AuthServerSettings | None = None
    secret_files: tuple[SecretFile, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.settings is not None or bool(self.problems)

    def proxy_files(self) -> tuple[ConfigFile, ...]:
        if self.settings is None:
            return ()
        return (
            ConfigFile(AUTHSERVER_CONFIG, json.dumps(self.settings.dump(), sort_keys=True, indent=2) + "\n"),
        )

    def proxy_fields(self) -> dict[str, str]:
        """The proxy config's field naming the file (`proxy/config.py`), relative to the config's folder."""
        return {} if self.settings is None else {"authserverConfig": AUTHSERVER_CONFIG}

    def proxy_args(self) -> tuple[str, ...]:
        """What `mcpfleet vmcp serve` is given for it."""
        if self.settings is None:
            return ()
        return ("--authserver-config", f"{{config_dir}}/{AUTHSERVER_CONFIG}")


class _Files:
    def __init__(self, world: World) -> None:
        self.world = world
        self.files: list[SecretFile] = []

    def path(self, ref: SecretKeyRef | None, filename: str) -> str | None:
        if ref is None:
            return None
        self.files.append(SecretFile(f"authserver-{filename}", SecretKeyRef(name=ref.name, key=ref.key)))
        return secret_file_path(self.world.platform, f"authserver-{filename}")


def _upstream(provider: UpstreamProvider, files: _Files) -> Upstream:
    if provider.oidc_config is not None:
        oidc = provider.oidc_config
        return Upstream(
            name=provider.name,
            type="oidc",
            issuer_url=oidc.issuer_url,
            client_id=oidc.client_id,
            client_secret_file=files.path(oidc.client_secret_ref, "upstream-client-secret"),
            redirect_uri=oidc.redirect_uri,
            scopes=oidc.scopes,
            additional_authorization_params=oidc.additional_authorization_params or {},
            subject_claim=oidc.subject_claim or "sub",
            userinfo=_userinfo(oidc.user_info_override),
        )
    oauth2 = provider.oauth2_config
    assert oauth2 is not None  # the model's rule
    identity, mapping = oauth2.identity_from_token, oauth2.token_response_mapping
    return Upstream(
        name=provider.name,
        type="oauth2",
        authorization_endpoint=oauth2.authorization_endpoint,
        token_endpoint=oauth2.token_endpoint,
        client_id=oauth2.client_id,
        client_secret_file=files.path(oauth2.client_secret_ref, "upstream-client-secret"),
        redirect_uri=oauth2.redirect_uri,
        scopes=oauth2.scopes,
        additional_authorization_params=oauth2.additional_authorization_params or {},
        subject_path=identity.subject_path if identity else None,
        name_path=identity.name_path if identity else None,
        email_path=identity.email_path if identity else None,
        access_token_path=mapping.access_token_path if mapping else None,
        expires_in_path=mapping.expires_in_path if mapping else None,
        refresh_token_path=mapping.refresh_token_path if mapping else None,
        scope_path=mapping.scope_path if mapping else None,
        userinfo=_userinfo(oauth2.user_info),
    )


def _userinfo(spec: UserInfo | UserInfoOverride | None) -> UserInfoFetch | None:
    """The data plane's userinfo request of `userInfo` / `userInfoOverride` (defaults filled in)."""
    if spec is None:
        return None
    mapping = spec.field_mapping
    fields: dict[str, list[str]] = {}
    if mapping is not None:
        for name in ("subject_fields", "name_fields", "email_fields"):
            value = getattr(mapping, name)
            if value:
                fields[name] = list(value)
    return UserInfoFetch(
        url=spec.endpoint_url,
        method=spec.http_method or "GET",
        headers=dict(spec.additional_headers or {}),
        **fields,
    )


def _upstream_problems(provider: UpstreamProvider, where: str) -> list[str]:
    oauth2 = provider.oauth2_config
    if oauth2 is None or oauth2.insecure_allow_http:
        return []
    from urllib.parse import urlsplit

    found = []
    for name, url in (
        ("authorizationEndpoint", oauth2.authorization_endpoint),
        ("tokenEndpoint", oauth2.token_endpoint),
    ):
        parts = urlsplit(url)
        if parts.scheme == "http" and (parts.hostname or "") not in {"localhost", "127.0.0.1", "::1"}:
            found.append(f"{where}.oauth2Config.{name}: http:// needs insecureAllowHTTP (or a loopback host)")
    return found


def _tls(tls: RedisTLS | None, files: _Files, name: str) -> RedisTLSFiles | None:
    if tls is None:
        return None
    return RedisTLSFiles(
        ca_file=files.path(tls.ca_cert_secret_ref, name), insecure_skip_verify=bool(tls.insecure_skip_verify)
    )


def _redis(
    spec: EmbeddedAuthServerConfig, files: _Files, where: str
) -> tuple[RedisSettings | None, list[str]]:
    storage = spec.storage
    if storage is None or storage.redis is None:
        return None, []
    redis = storage.redis
    problems: list[str] = []
    sentinel_addrs: list[str] = []
    sentinel = redis.sentinel_config
    if sentinel is not None:
        sentinel_addrs = list(sentinel.sentinel_addrs or ())
        if sentinel.sentinel_service is not None:
            service = sentinel.sentinel_service
            if files.world.platform != "kubernetes":
                problems.append(
                    f"{where}.storage.redis.sentinelConfig.sentinelService: a Kubernetes Service; locally give"
                    " sentinelAddrs"
                )
            namespace = service.namespace or files.world.namespace
            sentinel_addrs = [f"{service.name}.{namespace}.svc:{service.port}"]
    acl = redis.acl_user_config
    settings = RedisSettings(
        addr=redis.addr,
        sentinel_addrs=sentinel_addrs,
        master_name=sentinel.master_name if sentinel else None,
        db=sentinel.db if sentinel else 0,
        username_file=files.path(acl.username_secret_ref, "redis-username"),
        password_file=files.path(acl.password_secret_ref, "redis-password"),
        dial_timeout=parse_duration(redis.dial_timeout),
        read_timeout=parse_duration(redis.read_timeout),
        write_timeout=parse_duration(redis.write_timeout),
        tls=_tls(redis.tls, files, "redis-ca.crt"),
        sentinel_tls=_tls(redis.sentinel_tls, files, "redis-sentinel-ca.crt"),
    )
    return settings, problems


def workload_plan(
    auth_server_ref: AuthServerRef | None,
    external_auth_ref: LocalObjectReference | None,
    world: World,
    *,
    incoming_oidc: bool,
) -> AuthServerPlan:
    """The AuthServerPlan of an MCPServer or MCPRemoteProxy. `authServerRef` names the embedded
    authorization server and leaves `externalAuthConfigRef` to the credentials toward the upstream, as in
    ToolHive; without it an `externalAuthConfigRef` of type embeddedAuthServer still configures it."""
    if auth_server_ref is None:
        return plan(external_auth_ref, world, incoming_oidc=incoming_oidc)
    field = "spec.authServerRef"
    found = world.external_auth_configs.get(auth_server_ref.name)
    if found is None:
        return AuthServerPlan(problems=(f"{field}: MCPExternalAuthConfig {auth_server_ref.name} not found",))
    if found.spec.embedded_auth_server is None:
        return AuthServerPlan(
            problems=(
                f"{field}: MCPExternalAuthConfig {found.name} is of type {found.spec.type}; authServerRef"
                " names one of type embeddedAuthServer (put other types in externalAuthConfigRef)",
            )
        )
    outgoing = world.external_auth_configs.get(external_auth_ref.name) if external_auth_ref else None
    if outgoing is not None and outgoing.spec.embedded_auth_server is not None:
        return AuthServerPlan(
            problems=(
                "spec.externalAuthConfigRef: names an embeddedAuthServer MCPExternalAuthConfig while"
                " authServerRef sets the authorization server; a workload runs one (externalAuthConfigRef"
                " is then for the credentials toward the upstream)",
            )
        )
    return plan(auth_server_ref, world, incoming_oidc=incoming_oidc, field=field)


def plan(
    ref: LocalObjectReference | AuthServerRef | None,
    world: World,
    *,
    incoming_oidc: bool,
    field: str = "spec.externalAuthConfigRef",
) -> AuthServerPlan:
    """The AuthServerPlan of a proxy-fronted workload (empty unless the reference names an
    embeddedAuthServer MCPExternalAuthConfig)."""
    found = world.external_auth_configs.get(ref.name) if ref is not None else None
    if found is None or found.spec.embedded_auth_server is None:
        return AuthServerPlan()
    extra = []
    if incoming_oidc:
        extra.append(
            f"{field}: the embedded authorization server authenticates clients itself; remove oidcConfig /"
            " oidcConfigRef"
        )
    return settings_plan(
        found.spec.embedded_auth_server,
        world,
        where=f"{field}: MCPExternalAuthConfig {found.name} spec.embeddedAuthServer",
        config_hash=configkinds.config_hash(found),
        problems=extra,
    )


def settings_plan(
    spec: EmbeddedAuthServerConfig,
    world: World,
    *,
    where: str,
    config_hash: str,
    problems: list[str] | None = None,
) -> AuthServerPlan:
    """The AuthServerPlan of embedded-server settings (an MCPExternalAuthConfig's, or a
    VirtualMCPServer's `authServerConfig`); `where` prefixes each problem, `config_hash` rolls the
    workload when the settings change."""
    problems = [*(f"{where}.{p}" for p in spec.problems()), *(problems or ())]
    files = _Files(world)
    primary = next(
        (p for p in spec.upstream_providers if p.name == spec.primary_upstream_provider),
        spec.upstream_providers[0],
    )
    problems += _upstream_problems(
        primary, f"{where}.upstreamProviders[{spec.upstream_providers.index(primary)}]"
    )
    redis, redis_problems = _redis(spec, files, where)
    problems += redis_problems
    if problems:
        return AuthServerPlan(problems=tuple(problems))
    lifespans = spec.token_lifespans
    settings = AuthServerSettings(
        issuer=spec.issuer,
        authorization_endpoint_base_url=spec.authorization_endpoint_base_url,
        upstream=_upstream(primary, files),
        signing_key_files=[
            p
            for i, r in enumerate(spec.signing_key_secret_refs or ())
            if (p := files.path(r, f"signing-key-{i}.pem"))
        ],
        hmac_secret_files=[
            p for i, r in enumerate(spec.hmac_secret_refs or ()) if (p := files.path(r, f"hmac-{i}"))
        ],
        access_token_lifespan=parse_duration(lifespans.access_token_lifespan)
        if lifespans and lifespans.access_token_lifespan
        else 3600.0,
        refresh_token_lifespan=parse_duration(lifespans.refresh_token_lifespan)
        if lifespans and lifespans.refresh_token_lifespan
        else 7 * 24 * 3600.0,
        auth_code_lifespan=parse_duration(lifespans.auth_code_lifespan)
        if lifespans and lifespans.auth_code_lifespan
        else 600.0,
        storage=spec.storage.type if spec.storage else "memory",
        redis=redis,
        allow_confidential_client_registration=spec.allow_confidential_client_registration,
        force_confidential_redirect_uris=list(spec.force_confidential_redirect_uris or ()),
        baseline_client_scopes=list(spec.baseline_client_scopes or ()),
        cimd_enabled=bool(spec.cimd and spec.cimd.enabled),
        cimd_cache_ttl=parse_duration(spec.cimd.cache_fallback_ttl)
        if spec.cimd and spec.cimd.cache_fallback_ttl
        else 300.0,
        cimd_cache_max_size=(spec.cimd.cache_max_size or 256) if spec.cimd else 256,
        cimd_allow_private_ip=bool(spec.cimd and spec.cimd.allow_private_ip),
        disable_upstream_token_injection=spec.disable_upstream_token_injection,
        insecure_allow_http=spec.insecure_allow_http,
        config_hash=config_hash,
    )
    return AuthServerPlan(settings=settings, secret_files=tuple(files.files))
