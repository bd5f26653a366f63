"""Incoming OIDC of MCPServer, MCPRemoteProxy and VirtualMCPServer: what each spec form renders.

The result is an `incomingAuth` document (`mcpfleet.auth.oidc.IncomingAuthSettings`: what `mcpfleet proxy
--auth-config` and the vMCP config read) plus what the pod needs for it:

* `inline`: the settings are written into the document (a ConfigMap on Kubernetes, a file locally);
  the client secret only as secretKeyRef env named by `clientSecretEnv`.
* `configMap` / `oidcConfigRef` naming a ConfigMap: the user's ConfigMap key is mounted (`ConfigMapFile`)
  and named by `oidcFile`; the service reads it at start. The audience / scopes / resourceUrl of an
  `oidcConfigRef` override it. (An `oidcConfigRef` naming an MCPOIDCConfig: `reconcile/mcpoidcconfig.py`.)
  Locally the key is read from the local ConfigMap source (`STATE/configmaps/<name>/<key>`) and
  written into the workload's config folder (`config_map_file_path`).
* `kubernetes`: service-account tokens, checked against the API server's `/openid/v1/jwks`, fetched
  with the pod's own token and CA (`Container.service_account_token` mounts them; reading the JWKS
  needs no RBAC object: Kubernetes binds `system:service-account-issuer-discovery` to every service
  account). Kubernetes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpfleet.api.common import InlineOIDCConfig, KubernetesOIDCConfig, OIDCConfig, OIDCConfigRef
from mcpfleet.api.meta import ConfigMapKeyRef, SecretKeyRef
from mcpfleet.auth.oidc import OIDCSettings
from mcpfleet.reconcile.model import (
    KUBERNETES_TOKEN_DIR,
    ConfigMapFile,
    Platform,
    SecretEnv,
    config_map_file_path,
)

AUTH_CONFIG = "auth.json"
"""The proxy's `authConfig` file (a ConfigFile)."""
OIDC_FILE = "oidc.json"
"""The mounted ConfigMap key, in `KUBERNETES_CONFIGMAP_DIR`."""
OIDC_REF_KEY = "oidc.json"
"""The key an `oidcConfigRef` ConfigMap holds its settings under."""
CLIENT_SECRET_ENV = "MCPFLEET_OIDC_CLIENT_SECRET"
KUBERNETES_JWKS_URL = "https://kubernetes.default.svc/openid/v1/jwks"
AUTOMOUNT_TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where automountServiceAccountToken puts the token (the vMCP gateway always has one: it watches
its group through the API)."""


@dataclass(frozen=True)
class IncomingAuthPlan:
    """What a workload needs for its incoming OIDC; `document` None means no incoming auth."""

    document: dict[str, Any] | None = None
    secret_env: tuple[SecretEnv, ...] = ()
    config_map_files: tuple[ConfigMapFile, ...] = ()
    service_account_token: bool = False
    problems: tuple[str, ...] = ()


def _drop_none(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if v is not None}


def incoming_auth(
    oidc: OIDCConfig | None,
    ref: OIDCConfigRef | None,
    platform: Platform,
    *,
    where: str = "spec",
    oidc_field: str = "oidcConfig",
    token_dir: str = KUBERNETES_TOKEN_DIR,
) -> IncomingAuthPlan:
    """The incoming auth of a workload from its `oidcConfig` / `oidcConfigRef`.

    `where.oidc_field` is how problems name the spec field; `token_dir` is where the pod finds its
    service-account token (the vMCP uses the automounted one).
    """
    if ref is not None:
        overrides = _drop_none({"audience": ref.audience, "scopes": ref.scopes, "resource": ref.resource_url})
        return _mounted_file(platform, ConfigMapKeyRef(name=ref.name, key=OIDC_REF_KEY), overrides)
    if oidc is None:
        return IncomingAuthPlan()
    field = f"{where}.{oidc_field}"
    resource = _drop_none({"resource": oidc.resource_url})
    if oidc.type == "configMap":
        assert oidc.config_map is not None
        ref_cm = ConfigMapKeyRef(name=oidc.config_map.name, key=oidc.config_map.key)
        return _mounted_file(platform, ref_cm, resource)
    if oidc.type == "inline":
        assert oidc.inline is not None
        return _inline(oidc.inline, resource, field)
    # kubernetes (the default type): service-account tokens.
    return _service_account_tokens(oidc.kubernetes, platform, resource, field, token_dir)


def _mounted_file(platform: Platform, key: ConfigMapKeyRef, overrides: dict[str, Any]) -> IncomingAuthPlan:
    """Settings in a user's ConfigMap key, mounted and named by `oidcFile`; `overrides` win over it."""
    return IncomingAuthPlan(
        document={"type": "oidc", "oidcFile": config_map_file_path(platform, OIDC_FILE), "oidc": overrides},
        config_map_files=(ConfigMapFile(OIDC_FILE, key),),
    )


def _inline(inline: InlineOIDCConfig, resource: dict[str, Any], field: str) -> IncomingAuthPlan:
    secrets: tuple[SecretEnv, ...] = ()
    block: dict[str, Any] = {
        "issuer": inline.issuer,
        "audience": inline.audience,
        "jwksUrl": inline.jwks_url,
        "clientId": inline.client_id,
        "introspectionUrl": inline.introspection_url,
        "scopes": list(inline.scopes) if inline.scopes else None,
        "insecureAllowHTTP": inline.insecure_allow_http or None,
        "jwksAllowPrivateIP": inline.jwks_allow_private_ip or None,
        **resource,
    }
    if inline.client_secret_ref is not None:
        # The secret travels as secretKeyRef env; the config only names the variable.
        ref_ = inline.client_secret_ref
        secrets = (SecretEnv(CLIENT_SECRET_ENV, SecretKeyRef(name=ref_.name, key=ref_.key)),)
        block["clientSecretEnv"] = CLIENT_SECRET_ENV
    block = _drop_none(block)
    problems = OIDCSettings.model_validate(block).problems(f"{field}.inline")
    return IncomingAuthPlan(
        document={"type": "oidc", "oidc": block}, secret_env=secrets, problems=tuple(problems)
    )


def _service_account_tokens(
    kube: KubernetesOIDCConfig | None,
    platform: Platform,
    resource: dict[str, Any],
    field: str,
    token_dir: str,
) -> IncomingAuthPlan:
    if platform != "kubernetes":
        return IncomingAuthPlan(
            problems=(
                f"{field}.type: kubernetes (service-account tokens) needs Kubernetes; "
                "use type inline on the local platform",
            )
        )
    block = _drop_none(
        {
            "issuer": kube.issuer if kube else "https://kubernetes.default.svc",
            "audience": kube.audience if kube else "mcpfleet",
            "jwksUrl": KUBERNETES_JWKS_URL,
            "jwksCaFile": f"{token_dir}/ca.crt",
            "jwksTokenFile": f"{token_dir}/token",
            "serviceAccountNamespace": kube.namespace if kube else None,
            "serviceAccountName": kube.service_account if kube else None,
            # The API server is in-cluster (a private address): allowed, as ToolHive does.
            "jwksAllowPrivateIP": True,
            **resource,
        }
    )
    problems = OIDCSettings.model_validate(block).problems(f"{field}.kubernetes")
    return IncomingAuthPlan(
        document={"type": "oidc", "oidc": block}, service_account_token=True, problems=tuple(problems)
    )


def proxy_fields(auth: IncomingAuthPlan) -> dict[str, str]:
    """The proxy config's field for `auth` (`proxy/config.py`; nothing without incoming auth)."""
    return {} if auth.document is None else {"authConfig": AUTH_CONFIG}
