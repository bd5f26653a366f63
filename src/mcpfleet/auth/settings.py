"""Incoming-auth settings: the `incomingAuth` block (`IncomingAuthSettings`, `OIDCSettings`) and its file forms.

Pydantic models only, importable without aiohttp or the JWT stack (the registry's config holds such a
block and is loaded at every start); the authenticators that use them are in `mcpfleet.auth.oidc`,
whose docstring describes what each setting does.

These are the resolved (runtime) forms that a data-plane process reads from its config file; the
`*Settings` names keep them apart from the spec models of the same concepts in `mcpfleet.api`
(`api.common.OIDCConfig`, `api.virtualmcpserver.IncomingAuth`), which a reconcile resolves into these.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, ValidationError

from mcpfleet.api.meta import ApiModel
from mcpfleet.configfile import DocumentError, parse_json_or_yaml
from mcpfleet.netguard import is_loopback_host


class OIDCSettings(ApiModel):
    """OIDC settings of incoming auth. `issuer` may come from `IncomingAuthSettings.oidcFile` instead."""

    issuer: str | None = None
    audience: str | None = None
    jwks_url: str | None = None
    client_id: str | None = None
    client_secret_env: str | None = None
    """Environment variable holding the OAuth client secret (introspection); never the value itself."""
    client_secret_file: str | None = None
    """Or a file holding it (a mounted Secret), read at each introspection call."""
    introspection_url: str | None = None
    resource: str | None = None
    scopes: list[str] = Field(default_factory=list)
    insecure_allow_http: bool = Field(
        default=False,
        validation_alias=AliasChoices("insecureAllowHTTP", "insecureAllowHttp", "insecure_allow_http"),
    )
    # JWKS refresh: how long keys are cached before a scheduled refetch (an unknown `kid`
    # triggers an immediate, rate-limited refetch regardless).
    jwks_cache_seconds: float = 300.0
    jwks_ca_file: str | None = None
    """CA bundle that verifies the JWKS / discovery endpoint (e.g. the pod's service-account ca.crt)."""
    jwks_token_file: str | None = None
    """A bearer token sent with JWKS / discovery requests, re-read at each fetch (projected tokens rotate)."""
    service_account_namespace: str | None = None
    """Only accept Kubernetes service-account tokens of this namespace."""
    service_account_name: str | None = None
    """Only accept Kubernetes service-account tokens of this service account."""
    jwks_allow_private_ip: bool = Field(
        default=False,
        validation_alias=AliasChoices("jwksAllowPrivateIP", "jwksAllowPrivateIp", "jwks_allow_private_ip"),
        serialization_alias="jwksAllowPrivateIP",
    )
    """Let discovery / JWKS / introspection connect to non-public addresses (ToolHive's field and
    default: refused, checked on the address connected to; `mcpfleet.netguard`)."""

    @property
    def private_addresses_allowed(self) -> bool:
        """`jwksAllowPrivateIP`, or an issuer on a loopback host (development: ToolHive relaxes its
        guard for loopback hosts an operator configured)."""
        if self.jwks_allow_private_ip:
            return True
        host = urllib.parse.urlsplit(self.issuer or "").hostname or ""
        return is_loopback_host(host)

    @property
    def expected_audience(self) -> str | None:
        """The `aud` accepted tokens must carry: `audience`, else the resource URL (RFC 8707)."""
        return self.audience or self.resource

    def problems(self, where: str) -> list[str]:
        out: list[str] = []
        if not self.issuer:
            out.append(f"{where}.issuer: required")
        if not self.audience and not self.resource:
            out.append(
                f"{where}.audience: required (the `aud` a token must carry to be accepted here; or set "
                "resource, which is then the expected audience): without it any token of the issuer "
                "would be accepted"
            )
        urls = {"issuer": self.issuer, "jwksUrl": self.jwks_url, "introspectionUrl": self.introspection_url}
        for name, url in urls.items():
            if url is None:
                continue
            if not url.startswith(("https://", "http://")):
                out.append(f"{where}.{name}: expected an http(s) URL, got {url!r}")
            elif url.startswith("http://") and not self.insecure_allow_http:
                out.append(f"{where}.{name}: http:// needs insecureAllowHTTP: true (development only)")
        return out


class IncomingAuthSettings(ApiModel):
    """Who may call the service: `anonymous`, or `oidc` with settings in `oidc` and/or `oidcFile`."""

    type: Literal["anonymous", "oidc"] = "anonymous"
    oidc: OIDCSettings | None = None
    oidc_file: str | None = None
    """A file with the OIDC settings (a mounted ConfigMap key); fields set in `oidc` override it."""

    def problems(self, where: str = "") -> list[str]:
        """Shape problems, each naming its field (`where` prefixes the paths, e.g. "incomingAuth")."""
        prefix = f"{where}." if where else ""
        if self.type != "oidc":
            return []
        if self.oidc is None and self.oidc_file is None:
            return [f"{prefix}oidc: required when {prefix}type is 'oidc'"]
        if self.oidc_file is not None:
            return []  # checked once the file is read (resolved())
        assert self.oidc is not None
        return self.oidc.problems(f"{prefix}oidc")

    def resolved(self, base_dir: Path | None = None) -> IncomingAuthSettings:
        """The settings with `oidcFile` read and merged (relative paths against `base_dir`).

        Raises AuthConfigError naming the file or field: a service must not start without the
        auth it was configured with.
        """
        if self.type != "oidc" or self.oidc_file is None:
            problems = self.problems()
            if problems:
                raise AuthConfigError("; ".join(problems))
            return self
        path = Path(self.oidc_file)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        raw = _read_object(path, "oidcFile: ", "of OIDC settings")
        try:
            from_file = OIDCSettings.model_validate(raw)
        except ValidationError as exc:
            raise AuthConfigError(f"oidcFile {path}: " + _errors(exc)) from None
        overrides = self.oidc.model_dump(exclude_unset=True) if self.oidc is not None else {}
        merged = from_file.model_copy(update=overrides)
        result = IncomingAuthSettings(type="oidc", oidc=merged)
        problems = merged.problems(f"oidcFile ({path})")
        if problems:
            raise AuthConfigError("; ".join(problems))
        return result


class AuthConfigError(Exception):
    """The auth config is missing or invalid; the message names the file or field."""


def _read_object(path: Path, what: str, holding: str) -> dict[str, Any]:
    """A JSON (or YAML) file holding one object; AuthConfigError names `what` and the file."""
    try:
        raw = parse_json_or_yaml(path.read_text())
    except OSError as exc:
        raise AuthConfigError(f"{what}cannot read {path}: {exc.strerror or exc}") from None
    except DocumentError as exc:
        raise AuthConfigError(f"{what}{path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise AuthConfigError(f"{what}{path} must hold a JSON object {holding}")
    return raw


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(x) for x in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
    )


def load_auth_config(path: str | Path) -> IncomingAuthSettings:
    """Read an auth config file (JSON or YAML, the shape of the vMCP's `incomingAuth` block) and resolve
    its `oidcFile` relative to the file's folder. Raises AuthConfigError naming the field."""
    p = Path(path)
    raw = _read_object(p, "auth config: ", "with `type`")
    try:
        cfg = IncomingAuthSettings.model_validate(raw)
    except ValidationError as exc:
        raise AuthConfigError(f"auth config {p}: " + _errors(exc)) from None
    try:
        return cfg.resolved(p.parent)
    except AuthConfigError as exc:
        raise AuthConfigError(f"auth config {p}: {exc}") from None
