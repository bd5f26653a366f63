"""MCPExternalAuthConfig: how a workload authenticates toward its upstream (token exchange, headers), or
the OAuth 2.1 authorization server its proxy embeds (`embeddedAuthServer`, served by `auth/authserver/`)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from mcpfleet.api.duration import Duration
from mcpfleet.api.meta import ApiModel, ConfigStatus, KindInfo, PrinterColumn, Rule, RuleModel, SecretKeyRef
from mcpfleet.api.resource import Resource

AuthType = Literal["tokenExchange", "headerInjection", "bearerToken", "embeddedAuthServer", "unauthenticated"]


class TokenExchangeConfig(ApiModel):
    """RFC 8693 token exchange: the client's token is swapped for one the upstream accepts."""

    token_url: str = Field(pattern=r"^https?://[^\s]+$")
    """Token endpoint of the authorization server."""
    audience: str = Field(min_length=1)
    """Audience requested for the exchanged token."""
    client_id: str | None = None
    """OAuth client id used for the exchange."""
    client_secret_ref: SecretKeyRef | None = None
    """Secret holding the OAuth client secret."""
    scopes: list[str] | None = None
    """Scopes requested."""
    subject_token_type: str | None = Field(
        default=None,
        pattern=r"^(access_token|id_token|jwt|urn:ietf:params:oauth:token-type:(access_token|id_token|jwt))?$",
    )
    """Type of the incoming token (access_token by default)."""
    external_token_header_name: str | None = None
    """Header that carries the exchanged token; Authorization: Bearer when unset."""


class HeaderInjectionConfig(ApiModel):
    """A header with a secret value added to every upstream request."""

    header_name: str = Field(min_length=1, max_length=255)
    """Header to add."""
    value_secret_ref: SecretKeyRef
    """Secret key holding the header value."""


class BearerTokenConfig(ApiModel):
    """A static bearer token sent to the upstream."""

    token_secret_ref: SecretKeyRef
    """Secret key holding the token."""


# --- embeddedAuthServer: an OAuth 2.1 authorization server run by the proxy (auth/authserver/) -------

ISSUER_PATTERN = r"^https?://[^\s?#]+[^/\s?#]$"
SCOPE_PATTERN = r"^[\x21\x23-\x5B\x5D-\x7E]+$"
UPSTREAM_NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
RESERVED_AUTHORIZE_PARAMS = frozenset(
    {
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "code_challenge",
        "code_challenge_method",
        "nonce",
    }
)


def _no_reserved_params(params: dict[str, str] | None) -> dict[str, str] | None:
    clash = sorted(RESERVED_AUTHORIZE_PARAMS & set(params or {}))
    if clash:
        raise ValueError(f"{', '.join(clash)}: set by the authorization server itself, not allowed here")
    return params


AuthorizeParams = Annotated[
    dict[str, str] | None,
    Field(
        default=None,
        json_schema_extra={
            "maxProperties": 16,
            "x-kubernetes-validations": [
                {
                    "rule": "!self.exists(k, k in ["
                    + ", ".join(f"'{p}'" for p in sorted(RESERVED_AUTHORIZE_PARAMS))
                    + "])",
                    "message": "response_type, client_id, redirect_uri, scope, state, code_challenge,"
                    " code_challenge_method and nonce are set by the authorization server itself",
                }
            ],
        },
    ),
    AfterValidator(_no_reserved_params),
]


class UpstreamOIDCConfig(ApiModel):
    """An OpenID Connect upstream identity provider, its endpoints found by discovery."""

    issuer_url: str = Field(pattern=r"^https://.*$", max_length=2048)
    """The IdP's issuer; `{issuerUrl}/.well-known/openid-configuration` gives its endpoints (https only;
    an http IdP is declared as type oauth2 with explicit endpoints)."""
    client_id: str = Field(min_length=1, max_length=256)
    """The OAuth client id registered with the IdP."""
    client_secret_ref: SecretKeyRef | None = None
    """Secret key holding the client secret; unset for a public client (PKCE only)."""
    redirect_uri: str | None = Field(default=None, pattern=r"^https?://[^\s]+$", max_length=2048)
    """Where the IdP sends the browser back; `{issuer}/oauth/callback` when unset."""
    scopes: list[str] | None = Field(default=None, max_length=32)
    """Scopes requested from the IdP; ["openid", "offline_access"] when unset."""
    additional_authorization_params: AuthorizeParams
    """Extra query parameters on the IdP's authorize URL (e.g. Google's access_type=offline)."""
    subject_claim: str | None = Field(default=None, max_length=128, pattern=r"^([a-zA-Z_][a-zA-Z0-9_]*)?$")
    """The ID-token claim naming the user; `sub` when unset (Entra: `oid`)."""
    user_info_override: UserInfoOverride | None = None
    """Also read the userinfo endpoint (name and email from it); the ID token alone when unset."""


_HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
UserInfoField = Annotated[str, Field(min_length=1, max_length=256)]


class UserInfoFieldMapping(ApiModel):
    """Which fields of a userinfo answer say who the user is (dot-notation paths; the first present wins)."""

    subject_fields: list[UserInfoField] | None = Field(
        default=None, max_length=16, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Fields holding the user id, in order; ["sub"] when unset."""
    name_fields: list[UserInfoField] | None = Field(
        default=None, max_length=16, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Fields holding the display name, in order; ["name"] when unset."""
    email_fields: list[UserInfoField] | None = Field(
        default=None, max_length=16, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Fields holding the email address, in order; ["email"] when unset."""


RESERVED_USERINFO_HEADERS = ("authorization", "connection", "content-length", "host", "transfer-encoding")


def _userinfo_headers(headers: dict[str, str] | None) -> dict[str, str] | None:
    for name in headers or {}:
        if not re.match(_HEADER_NAME, name):
            raise ValueError(f"{name!r}: not an HTTP header name")
        if name.lower() in RESERVED_USERINFO_HEADERS:
            raise ValueError(f"{name}: set by the authorization server itself")
    return headers


UserInfoHeaders = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=128)],
        Annotated[str, Field(max_length=8192)],
    ]
    | None,
    Field(
        default=None,
        max_length=32,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    # CRDs have no patternProperties: the header-name pattern is a rule.
                    "rule": "self.all(k, k.matches('" + _HEADER_NAME.replace("'", "\\'") + "'))",
                    "message": "header names must be HTTP tokens",
                },
                {
                    "rule": "!self.exists(k, k.lowerAscii() in ["
                    + ", ".join(f"'{h}'" for h in RESERVED_USERINFO_HEADERS)
                    + "])",
                    "message": "Authorization, Host, Connection, Content-Length and Transfer-Encoding are set"
                    " by the authorization server itself",
                },
            ]
        },
    ),
    AfterValidator(_userinfo_headers),
]


class UserInfo(ApiModel):
    """Fetch the user's identity from the upstream's userinfo endpoint after the login (ToolHive's
    `userInfo`), with the upstream access token as the bearer."""

    endpoint_url: str = Field(pattern=r"^https?://.*$", max_length=2048)
    """The userinfo endpoint."""
    http_method: Literal["GET", "POST"] | None = None
    """GET (default) or POST."""
    additional_headers: UserInfoHeaders
    """Extra request headers (e.g. GitHub's Accept); not Authorization, which carries the token."""
    field_mapping: UserInfoFieldMapping | None = None
    """Non-standard field names of the answer; sub / name / email when unset."""


class UserInfoOverride(ApiModel):
    """Read name and email from an OIDC upstream's userinfo endpoint (ToolHive's `userInfoOverride`):
    the subject stays the ID token's, and a userinfo answer naming another subject fails the login."""

    endpoint_url: str | None = Field(default=None, pattern=r"^https?://.*$", max_length=2048)
    """The userinfo endpoint; the discovery document's `userinfo_endpoint` when unset."""
    http_method: Literal["GET", "POST"] | None = None
    """GET (default) or POST."""
    additional_headers: UserInfoHeaders
    """Extra request headers; not Authorization, which carries the token."""
    field_mapping: UserInfoFieldMapping | None = None
    """Non-standard field names of the answer; sub / name / email when unset."""


class IdentityFromToken(ApiModel):
    """Where the user's identity is in the upstream token response (dot-notation paths)."""

    subject_path: str = Field(min_length=1, max_length=256)
    """Path to the user id, e.g. `authed_user.id`."""
    name_path: str | None = Field(default=None, min_length=1, max_length=256)
    """Path to the display name."""
    email_path: str | None = Field(default=None, min_length=1, max_length=256)
    """Path to the email address."""


class TokenResponseMapping(ApiModel):
    """Where a non-standard token response nests its fields (dot-notation paths)."""

    access_token_path: str = Field(min_length=1, max_length=256)
    """Path to the access token, e.g. `authed_user.access_token`."""
    expires_in_path: str | None = Field(default=None, max_length=256)
    """Path to expires_in (seconds); `expires_in` when unset."""
    refresh_token_path: str | None = Field(default=None, max_length=256)
    """Path to the refresh token; `refresh_token` when unset."""
    scope_path: str | None = Field(default=None, max_length=256)
    """Path to the granted scope; `scope` when unset."""


class UpstreamOAuth2Config(ApiModel):
    """A plain OAuth 2.0 upstream with explicit endpoints (no discovery)."""

    authorization_endpoint: str = Field(pattern=r"^https?://.*$", max_length=2048)
    """The IdP's authorization endpoint."""
    token_endpoint: str = Field(pattern=r"^https?://.*$", max_length=2048)
    """The IdP's token endpoint."""
    client_id: str = Field(min_length=1, max_length=256)
    """The OAuth client id registered with the IdP."""
    client_secret_ref: SecretKeyRef | None = None
    """Secret key holding the client secret; unset for a public client (PKCE only)."""
    redirect_uri: str | None = Field(default=None, pattern=r"^https?://[^\s]+$", max_length=2048)
    """Where the IdP sends the browser back; `{issuer}/oauth/callback` when unset."""
    scopes: list[str] | None = Field(default=None, max_length=32)
    """Scopes requested from the IdP."""
    additional_authorization_params: AuthorizeParams
    """Extra query parameters on the IdP's authorize URL."""
    insecure_allow_http: bool | None = Field(default=None, alias="insecureAllowHTTP")
    """Allow http:// endpoints for a non-loopback host (trusted in-cluster IdPs only)."""
    allow_private_ips: bool | None = Field(default=None, alias="allowPrivateIPs")
    """Accepted for ToolHive compatibility; mcpfleet calls the configured endpoints whatever they resolve to."""
    identity_from_token: IdentityFromToken | None = None
    """Take the user's identity from the token response; else a subject derived from the access token."""
    user_info: UserInfo | None = None
    """Take the user's identity from this userinfo endpoint (identityFromToken wins when both are set;
    with neither, the subject is derived from the access token)."""
    token_response_mapping: TokenResponseMapping | None = None
    """Where a non-standard token response nests the token fields."""


class UpstreamProvider(RuleModel):
    """One upstream identity provider the authorization server sends users to."""

    rules = (
        Rule(
            cel="self.type == 'oidc' ? (has(self.oidcConfig) && !has(self.oauth2Config))"
            " : (has(self.oauth2Config) && !has(self.oidcConfig))",
            message="oidcConfig must be set when type is 'oidc' and oauth2Config when type is 'oauth2'"
            " (and the other must not be set)",
            field_path="",
            check=lambda s: (
                (s.type == "oidc") == (s.oidc_config is not None)
                and (s.type == "oauth2") == (s.oauth2_config is not None)
            ),
        ),
    )

    name: str = Field(min_length=1, max_length=63, pattern=UPSTREAM_NAME_PATTERN)
    """Unique name of the provider (a DNS label)."""
    type: Literal["oidc", "oauth2"]
    """oidc (endpoints by discovery) or oauth2 (explicit endpoints)."""
    oidc_config: UpstreamOIDCConfig | None = None
    """Settings for type oidc."""
    oauth2_config: UpstreamOAuth2Config | None = None
    """Settings for type oauth2."""


class TokenLifespans(ApiModel):
    """How long issued credentials live."""

    access_token_lifespan: Duration | None = None
    """Access tokens (JWTs); 1h when unset."""
    refresh_token_lifespan: Duration | None = None
    """Refresh tokens; 168h (7 days) when unset."""
    auth_code_lifespan: Duration | None = None
    """Authorization codes; 10m when unset."""


class RedisTLS(ApiModel):
    """TLS toward Redis (or its Sentinels)."""

    ca_cert_secret_ref: SecretKeyRef | None = None
    """Secret key holding the CA bundle that signs the server certificate."""
    insecure_skip_verify: bool | None = None
    """Do not verify the server certificate (testing only)."""


class SentinelService(ApiModel):
    """A Kubernetes Service in front of the Sentinels."""

    name: str = Field(min_length=1, max_length=253)
    """Service name."""
    namespace: str | None = Field(default=None, max_length=63)
    """Its namespace; the MCPExternalAuthConfig's when unset."""
    port: int = Field(default=26379, ge=1, le=65535)
    """Sentinel port."""


class SentinelConfig(RuleModel):
    """Redis through Sentinel: the master is found by name, failover followed."""

    rules = (
        Rule(
            cel="(has(self.sentinelAddrs) && size(self.sentinelAddrs) > 0) != has(self.sentinelService)",
            message="exactly one of sentinelAddrs or sentinelService must be set",
            field_path="",
            check=lambda s: bool(s.sentinel_addrs) != (s.sentinel_service is not None),
        ),
    )

    master_name: str = Field(min_length=1, max_length=253)
    """The monitored master's name."""
    sentinel_addrs: list[Annotated[str, Field(max_length=512)]] | None = Field(default=None, max_length=16)
    """Sentinel `host:port` addresses."""
    sentinel_service: SentinelService | None = None
    """A Service in front of the Sentinels (reached by its cluster DNS name)."""
    db: int = Field(default=0, ge=0, le=2147483647)
    """Database number."""


class RedisACLUser(ApiModel):
    """Redis ACL credentials, from Secrets."""

    username_secret_ref: SecretKeyRef | None = None
    """Secret key holding the user name; `default` when unset."""
    password_secret_ref: SecretKeyRef
    """Secret key holding the password."""


class RedisStorage(RuleModel):
    """Where a Redis-backed authorization server keeps its state."""

    rules = (
        Rule(
            cel="(has(self.addr) && self.addr.size() > 0) != has(self.sentinelConfig)",
            message="exactly one of addr or sentinelConfig must be set",
            field_path="",
            check=lambda s: bool(s.addr) != (s.sentinel_config is not None),
        ),
        Rule(
            cel="!(has(self.clusterMode) && self.clusterMode)",
            message="clusterMode is not supported by mcpfleet (one key namespace needs one primary);"
            " use addr or sentinelConfig",
            field_path=".clusterMode",
            check=lambda s: not s.cluster_mode,
        ),
    )

    addr: str | None = Field(default=None, max_length=512)
    """A standalone Redis `host:port`."""
    cluster_mode: bool | None = None
    """Redis Cluster: refused (see docs/authserver.md)."""
    sentinel_config: SentinelConfig | None = None
    """Redis behind Sentinel."""
    acl_user_config: RedisACLUser
    """Credentials."""
    dial_timeout: Duration = "5s"
    """Connect timeout."""
    read_timeout: Duration = "3s"
    """Read timeout."""
    write_timeout: Duration = "3s"
    """Write timeout."""
    tls: RedisTLS | None = None
    """TLS toward Redis."""
    sentinel_tls: RedisTLS | None = None
    """TLS toward the Sentinels."""


class AuthServerStorage(RuleModel):
    """memory (one replica; state lost on restart) or redis (shared by replicas, kept across restarts)."""

    rules = (
        Rule(
            cel="self.type == 'redis' ? has(self.redis) : !has(self.redis)",
            message="redis must be set exactly when type is redis",
            field_path=".redis",
            check=lambda s: (s.type == "redis") == (s.redis is not None),
        ),
    )

    type: Literal["memory", "redis"] = "memory"
    """memory or redis."""
    redis: RedisStorage | None = None
    """Settings for type redis."""


class CIMDConfig(ApiModel):
    """Client ID Metadata Documents: an https URL as client_id, its metadata fetched from that URL."""

    enabled: bool = False
    """Accept CIMD client ids besides registered ones."""
    cache_fallback_ttl: Duration | None = None
    """How long a fetched document is cached; 5m when unset."""
    cache_max_size: int | None = Field(default=None, ge=1, le=100000)
    """Documents kept in the cache; 256 when unset."""
    allow_private_ip: bool = Field(default=False, alias="allowPrivateIP")
    """Let document fetches connect to non-public addresses (loopback, RFC 1918, link-local, ...);
    refused by default, checked on the address connected to (development and in-cluster clients only)."""


def _is_loopback_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in {"localhost", "127.0.0.1", "::1"} or host.endswith(".localhost")


class EmbeddedAuthServerConfig(RuleModel):
    """An OAuth 2.1 authorization server run by the workload's proxy: clients register (RFC 7591) and
    log in through an upstream identity provider; the proxy then accepts the JWTs it issued."""

    rules = (
        Rule(
            cel="!(has(self.allowConfidentialClientRegistration) && self.allowConfidentialClientRegistration"
            " && has(self.insecureAllowHTTP) && self.insecureAllowHTTP)",
            message="allowConfidentialClientRegistration cannot be combined with insecureAllowHTTP; client"
            " secrets would be issued in cleartext over an unauthenticated endpoint",
            field_path=".allowConfidentialClientRegistration",
            check=lambda s: not (s.allow_confidential_client_registration and s.insecure_allow_http),
        ),
        Rule(
            cel="(!has(self.forceConfidentialRedirectUris) || size(self.forceConfidentialRedirectUris) == 0)"
            " || (has(self.allowConfidentialClientRegistration) && self.allowConfidentialClientRegistration)",
            message="forceConfidentialRedirectUris requires allowConfidentialClientRegistration to be true",
            field_path=".forceConfidentialRedirectUris",
            check=lambda s: (
                not s.force_confidential_redirect_uris or s.allow_confidential_client_registration
            ),
        ),
        Rule(
            cel="self.upstreamProviders.all(p, self.upstreamProviders.filter(q, q.name == p.name).size() == 1)",
            message="upstreamProviders names must be unique",
            field_path=".upstreamProviders",
            check=lambda s: len({p.name for p in s.upstream_providers}) == len(s.upstream_providers),
        ),
        Rule(
            cel="!has(self.primaryUpstreamProvider) || self.upstreamProviders.exists(p, p.name =="
            " self.primaryUpstreamProvider)",
            message="primaryUpstreamProvider must name one of upstreamProviders",
            field_path=".primaryUpstreamProvider",
            check=lambda s: (
                s.primary_upstream_provider is None
                or any(p.name == s.primary_upstream_provider for p in s.upstream_providers)
            ),
        ),
    )

    issuer: str = Field(pattern=ISSUER_PATTERN, max_length=2048)
    """The server's issuer (the `iss` of its tokens), no query, fragment or trailing slash (RFC 8414).
    https, or http for a loopback host, or http for any host with insecureAllowHTTP."""
    authorization_endpoint_base_url: str | None = Field(default=None, pattern=ISSUER_PATTERN, max_length=2048)
    """Advertise `{authorizationEndpointBaseUrl}/oauth/authorize` instead of `{issuer}/oauth/authorize`."""
    upstream_providers: list[UpstreamProvider] = Field(min_length=1, max_length=1)
    """The identity provider users log in with (mcpfleet runs exactly one per server; see docs/authserver.md)."""
    primary_upstream_provider: str | None = Field(
        default=None, min_length=1, max_length=63, pattern=UPSTREAM_NAME_PATTERN
    )
    """The upstream whose access token reaches the backend; the first when unset."""
    signing_key_secret_refs: list[SecretKeyRef] | None = Field(default=None, max_length=5)
    """PEM private keys (RSA or EC P-256) signing the JWTs: the first signs, all are published in the
    JWKS (rotation). Unset: an ephemeral key, with a warning (tokens die with the process)."""
    hmac_secret_refs: list[SecretKeyRef] | None = Field(default=None, max_length=5)
    """Secrets (>= 32 bytes) keying the HMAC of authorization codes and refresh tokens: the first
    signs, the rest still verify (rotation). Unset: an ephemeral secret, with a warning."""
    token_lifespans: TokenLifespans | None = None
    """Lifetimes of access tokens, refresh tokens and codes."""
    storage: AuthServerStorage | None = None
    """Where clients, codes, sessions and upstream tokens are kept; memory when unset."""
    allow_confidential_client_registration: bool = False
    """Let /oauth/register mint client secrets (client_secret_basic / client_secret_post) for https,
    non-loopback redirect URIs; public clients (`none`) otherwise only."""
    force_confidential_redirect_uris: list[Annotated[str, Field(pattern=r"^https://[^\s?#]+$")]] | None = (
        Field(default=None, max_length=10)
    )
    """Registrations naming one of these exact redirect URIs get a secret whatever they asked for."""
    insecure_allow_confidential_over_loopback_http: bool = Field(
        default=False, alias="insecureAllowConfidentialOverLoopbackHTTP"
    )
    """Allow confidential registration with an http://localhost issuer."""
    insecure_allow_http: bool = Field(default=False, alias="insecureAllowHTTP")
    """Allow an http:// issuer for a non-loopback host (trusted in-cluster networks only)."""
    baseline_client_scopes: list[Annotated[str, Field(min_length=1, pattern=SCOPE_PATTERN)]] | None = Field(
        default=None, max_length=10
    )
    """Scopes every registered client may request, whatever it registered."""
    cimd: CIMDConfig | None = None
    """Client ID Metadata Document support; disabled when unset."""
    disable_upstream_token_injection: bool = False
    """Do not swap the client's JWT for the upstream access token toward the backend: the proxy strips
    Authorization, Cookie and Proxy-Authorization instead."""

    def problems(self) -> list[str]:
        """Rules CEL cannot express (hostnames, paths), checked by the reconciler (a workload problem)."""
        found: list[str] = []
        if urlsplit(self.issuer).path not in {"", "/"}:
            found.append("issuer: a path is not supported (the proxy serves the endpoints at its root)")
        if (
            self.issuer.startswith("http://")
            and not self.insecure_allow_http
            and not _is_loopback_url(self.issuer)
        ):
            found.append(
                "issuer: http:// is allowed for a loopback host only, unless insecureAllowHTTP is true"
            )
        if (
            self.allow_confidential_client_registration
            and self.issuer.startswith("http://")
            and not self.insecure_allow_confidential_over_loopback_http
        ):
            found.append(
                "allowConfidentialClientRegistration: an http:// issuer needs"
                " insecureAllowConfidentialOverLoopbackHTTP"
            )
        for index, uri in enumerate(self.force_confidential_redirect_uris or ()):
            if _is_loopback_url(uri):
                found.append(
                    f"forceConfidentialRedirectUris[{index}]: a loopback client is public, never confidential"
                )
        return found


def _block_rule(type_name: str, field_name: str, attr: str) -> Rule:
    return Rule(
        cel=f"self.type == '{type_name}' ? has(self.{field_name}) : !has(self.{field_name})",
        message=f"{field_name} must be set exactly when type is {type_name}",
        field_path=f".{field_name}",
        check=lambda s: (s.type == type_name) == (getattr(s, attr) is not None),
    )


class MCPExternalAuthConfigSpec(RuleModel):
    """Outgoing authentication settings: `type` names the one block that must be set."""

    rules = (
        _block_rule("tokenExchange", "tokenExchange", "token_exchange"),
        _block_rule("headerInjection", "headerInjection", "header_injection"),
        _block_rule("bearerToken", "bearerToken", "bearer_token"),
        _block_rule("embeddedAuthServer", "embeddedAuthServer", "embedded_auth_server"),
    )

    type: AuthType
    """tokenExchange, headerInjection, bearerToken, embeddedAuthServer or unauthenticated."""
    token_exchange: TokenExchangeConfig | None = None
    """Settings for type tokenExchange."""
    header_injection: HeaderInjectionConfig | None = None
    """Settings for type headerInjection."""
    bearer_token: BearerTokenConfig | None = None
    """Settings for type bearerToken."""
    embedded_auth_server: EmbeddedAuthServerConfig | None = None
    """Settings for type embeddedAuthServer: an OAuth 2.1 authorization server run by the proxy."""


class MCPExternalAuthConfig(Resource):
    """Reusable outgoing authentication settings."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPExternalAuthConfig",
        "mcpexternalauthconfigs",
        ("extauth", "mcpextauth"),
        columns=(
            PrinterColumn("Type", ".spec.type"),
            PrinterColumn("Valid", '.status.conditions[?(@.type=="Valid")].status'),
            PrinterColumn("References", ".status.referencingWorkloads[*].name"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
        workload=False,
    )
    kind: Literal["MCPExternalAuthConfig"] = "MCPExternalAuthConfig"
    spec: MCPExternalAuthConfigSpec
    status: ConfigStatus = Field(default_factory=ConfigStatus)
