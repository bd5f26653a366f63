"""Reconcile rules of MCPOIDCConfig: status (Valid, configHash, referencing workloads) and `resolve`.

`resolve` turns a workload's `oidcConfigRef` (name + the workload's own audience, scopes and
resourceUrl) into the same `IncomingAuthPlan` an inline `oidcConfig` with those settings gives
(`reconcile/oidc.py`), so a referenced config is enforced exactly like an inline one. The rendered
settings are part of the workload's config file, so a change of the MCPOIDCConfig changes the file's
checksum and rolls the referencing workloads; `configHash` in the status is the spec's sha256.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mcpfleet.api.common import InlineOIDCConfig, KubernetesOIDCConfig, OIDCConfig, OIDCConfigRef
from mcpfleet.api.mcpoidcconfig import MCPOIDCConfig
from mcpfleet.api.meta import ConfigMapKeyRef, WorkloadReference
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import (
    KUBERNETES_CONFIGMAP_DIR,
    KUBERNETES_TOKEN_DIR,
    ConfigMapFile,
    Platform,
    World,
)
from mcpfleet.reconcile.oidc import IncomingAuthPlan, incoming_auth

CA_FILE = "oidc-ca.crt"
"""The mounted CA bundle of an inline provider (`inline.caBundleRef`), in `KUBERNETES_CONFIGMAP_DIR`."""


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """Servers, remote proxies (`spec.oidcConfigRef`) and gateways (`spec.incomingAuth.oidcConfigRef`)."""
    return configkinds.referencing_by_marks("MCPOIDCConfig", name, world)


status = configkinds.status_rule(referencing_workloads)
"""Valid, configHash, referencingWorkloads, DeletionBlocked (`configkinds.config_status`)."""


def as_inline(
    config: MCPOIDCConfig,
    *,
    audience: str | None,
    scopes: list[str] | None,
    resource_url: str | None,
) -> OIDCConfig:
    """The inline `oidcConfig` equivalent to referencing `config` with these per-workload settings."""
    spec = config.spec
    if spec.type == "inline":
        assert spec.inline is not None
        inline = spec.inline
        return OIDCConfig(
            type="inline",
            inline=InlineOIDCConfig(
                issuer=inline.issuer,
                audience=audience,
                jwks_url=inline.jwks_url,
                client_id=inline.client_id,
                client_secret_ref=inline.client_secret_ref,
                introspection_url=inline.introspection_url,
                scopes=scopes,
                insecure_allow_http=inline.insecure_allow_http,
            ),
            resource_url=resource_url,
        )
    account = spec.kubernetes_service_account
    assert account is not None
    kubernetes = KubernetesOIDCConfig(
        issuer=account.issuer, namespace=account.namespace, service_account=account.service_account
    )
    if audience is not None:
        kubernetes = kubernetes.model_copy(update={"audience": audience})
    return OIDCConfig(type="kubernetes", kubernetes=kubernetes, resource_url=resource_url)


def resolve(
    ref: Any,
    world: World,
    platform: Platform,
    *,
    where: str = "spec",
    token_dir: str = KUBERNETES_TOKEN_DIR,
) -> IncomingAuthPlan:
    """The incoming auth of a workload whose `oidcConfigRef` is `ref` (name, audience, scopes, resourceUrl)."""
    field = f"{where}.oidcConfigRef"
    found = world.oidc_configs.get(ref.name)
    if found is None:
        return IncomingAuthPlan(problems=(f"{field}: MCPOIDCConfig {ref.name} not found",))
    oidc = as_inline(
        found,
        audience=getattr(ref, "audience", None),
        scopes=getattr(ref, "scopes", None),
        resource_url=getattr(ref, "resource_url", None),
    )
    plan = incoming_auth(oidc, None, platform, where=where, oidc_field="oidcConfigRef", token_dir=token_dir)
    if plan.problems or plan.document is None:
        return plan
    return _extras(found, plan, platform, field)


def workload_auth(
    oidc: OIDCConfig | None,
    ref: OIDCConfigRef | None,
    world: World,
    *,
    where: str = "spec",
    token_dir: str = KUBERNETES_TOKEN_DIR,
) -> IncomingAuthPlan:
    """The incoming auth of a workload's `oidcConfig` / `oidcConfigRef`.

    An `oidcConfigRef` naming an MCPOIDCConfig (ToolHive v1beta1) resolves through it; one naming none
    keeps its earlier meaning, a ConfigMap holding `oidc.json` (`reconcile/oidc.py`).
    """
    if ref is not None and ref.name in world.oidc_configs:
        return resolve(ref, world, world.platform, where=where, token_dir=token_dir)
    return incoming_auth(oidc, ref, world.platform, where=where, token_dir=token_dir)


def _extras(found: MCPOIDCConfig, plan: IncomingAuthPlan, platform: Platform, field: str) -> IncomingAuthPlan:
    """What the inline form has no field for: a CA bundle, a JWKS token file, a JWKS URL override."""
    assert plan.document is not None
    block = dict(plan.document["oidc"])
    files = list(plan.config_map_files)
    spec = found.spec
    if spec.inline is not None:
        ca = spec.inline.ca_bundle_ref.config_map_ref if spec.inline.ca_bundle_ref else None
        if ca is not None:
            if platform != "kubernetes":
                return replace(
                    plan,
                    problems=(
                        f"{field}: MCPOIDCConfig {found.name} inline.caBundleRef needs Kubernetes "
                        "(the local platform has no ConfigMaps)",
                    ),
                )
            files.append(ConfigMapFile(CA_FILE, ConfigMapKeyRef(name=ca.name or found.name, key=ca.key)))
            block["jwksCaFile"] = f"{KUBERNETES_CONFIGMAP_DIR}/{CA_FILE}"
        if spec.inline.jwks_auth_token_path is not None:
            block["jwksTokenFile"] = spec.inline.jwks_auth_token_path
        if spec.inline.jwks_allow_private_ip:
            block["jwksAllowPrivateIP"] = True
    elif spec.kubernetes_service_account is not None and spec.kubernetes_service_account.jwks_url:
        block["jwksUrl"] = spec.kubernetes_service_account.jwks_url
    return replace(plan, document={**plan.document, "oidc": block}, config_map_files=tuple(files))


config_hash = configkinds.config_hash
