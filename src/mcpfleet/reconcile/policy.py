"""`authzConfig` and `audit` of MCPServer, MCPRemoteProxy and VirtualMCPServer: what each renders.

Every authzConfig form resolves to one data-plane document (`mcpfleet.policy.config.AuthzDocument`):

* `inline`: the policies and entities written into the document (`authz.json`, a ConfigFile: the
  workload's ConfigMap on Kubernetes, a file locally). The policies are compiled here, so a policy
  Cedar rejects is a plan problem naming `...authzConfig.inline.policies[i]`, not a crash loop;
* `configMap`: the user's ConfigMap key is mounted (`ConfigMapFile`) and named by `authzFile`; the
  claim settings written in the spec override the file's. The local platform has no ConfigMaps: a
  plan problem naming the field.

The proxy reads the document from `--authz-config {config_dir}/authz.json`, the gateway from its
config's `authz` key. Both follow their files, so a policy edit applies without a restart:
`authz.json` is a `LIVE_FILES` entry (left out of the rollout checksum), and `authz` a live key of
the vMCP config. `audit` renders `audit.json` for the proxy (`--audit-config`); the gateway reads its
`config.audit` from its own config file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpfleet.api.meta import ConditionStatus, ConfigMapKeyRef
from mcpfleet.api.policy import AuditConfig, AuthzConfig
from mcpfleet.policy.cedar import Authorizer
from mcpfleet.policy.config import AuthzConfigError, AuthzDocument, CedarConfig
from mcpfleet.reconcile.model import KUBERNETES_CONFIGMAP_DIR, ConfigFile, ConfigMapFile, Platform

AUTHZ_CONFIG = "authz.json"
"""The proxy's `authzConfig` file (a ConfigFile, re-read in place when it changes)."""
AUDIT_CONFIG = "audit.json"
AUTHZ_CONFIGMAP_FILE = "authz-policy.json"
"""The mounted ConfigMap key of `authzConfig.configMap`, in `KUBERNETES_CONFIGMAP_DIR`."""


@dataclass(frozen=True)
class PolicyPlan:
    """What a workload needs for its authzConfig and audit."""

    document: AuthzDocument | None = None
    audit: AuditConfig | None = None
    config_map_files: tuple[ConfigMapFile, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.document is not None or self.audit is not None

    def proxy_files(self) -> tuple[ConfigFile, ...]:
        """The proxy's config files (authz.json, audit.json)."""
        files: list[ConfigFile] = []
        if self.document is not None:
            files.append(ConfigFile(AUTHZ_CONFIG, _json(self.document.wire())))
        if self.audit is not None:
            files.append(ConfigFile(AUDIT_CONFIG, _json(self.audit.dump())))
        return tuple(files)

    def proxy_fields(self) -> dict[str, str]:
        """The proxy config's fields naming them (`proxy/config.py`), relative to the config's folder."""
        fields: dict[str, str] = {}
        if self.document is not None:
            fields["authzConfig"] = AUTHZ_CONFIG
        if self.audit is not None:
            fields["auditConfig"] = AUDIT_CONFIG
        return fields


def _json(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, indent=2) + "\n"


def authz_document(
    authz: AuthzConfig | None, platform: Platform, field: str
) -> tuple[AuthzDocument | None, tuple[ConfigMapFile, ...], tuple[str, ...]]:
    """The data-plane document of an `authzConfig` at `field`, the ConfigMap keys it mounts, problems."""
    if authz is None:
        return None, (), ()
    claims = {
        "group_claim_name": authz.group_claim_name,
        "role_claim_name": authz.role_claim_name,
        "group_entity_type": authz.group_entity_type,
    }
    if authz.type == "configMap":
        assert authz.config_map is not None
        if platform != "kubernetes":
            return (
                None,
                (),
                (
                    f"{field}.configMap: policies from a ConfigMap need Kubernetes (the local platform has "
                    "no ConfigMaps); use type inline",
                ),
            )
        ref = ConfigMapKeyRef(name=authz.config_map.name, key=authz.config_map.key)
        document = AuthzDocument(authz_file=f"{KUBERNETES_CONFIGMAP_DIR}/{AUTHZ_CONFIGMAP_FILE}", **claims)
        return document, (ConfigMapFile(AUTHZ_CONFIGMAP_FILE, ref),), ()
    assert authz.inline is not None
    cedar = CedarConfig(policies=list(authz.inline.policies), entities_json=authz.inline.entities_json)
    document = AuthzDocument(cedar=cedar, **claims)
    try:
        Authorizer(document)
    except AuthzConfigError as exc:
        message = str(exc)
        if message.startswith("cedar.policies"):
            message = message.replace("cedar.policies", "inline.policies", 1)
        elif message.startswith("cedar.entities_json"):
            message = message.replace("cedar.entities_json", "inline.entitiesJson", 1)
        return None, (), (f"{field}.{message}",)
    return document, (), ()


def policy_plan(
    authz: AuthzConfig | None, audit: AuditConfig | None, platform: Platform, field: str = "spec.authzConfig"
) -> PolicyPlan:
    """The PolicyPlan of a proxy-fronted workload (MCPServer, MCPRemoteProxy)."""
    document, files, problems = authz_document(authz, platform, field)
    return PolicyPlan(
        document=document,
        audit=audit if audit is not None and audit.enabled else None,
        config_map_files=files,
        problems=problems,
    )


IGNORED_PRIMARY_UPSTREAM = "AuthzPrimaryUpstreamProviderIgnored"
DEPRECATED_PRIMARY_UPSTREAM = "AuthzPrimaryUpstreamProviderDeprecated"


def primary_upstream_of(authz: AuthzConfig | None) -> str | None:
    """`inline.primaryUpstreamProvider` of an authz config, if set."""
    return authz.inline.primary_upstream_provider if authz is not None and authz.inline is not None else None


def ignored_primary_upstream(
    authz: AuthzConfig | None, field: str
) -> tuple[tuple[str, ConditionStatus, str, str], ...]:
    """The advisory condition of an `inline.primaryUpstreamProvider` that has no effect: the workload
    runs no embedded authorization server with several upstreams, so Cedar reads the claims of the
    caller's token as always (ToolHive's behaviour and condition)."""
    name = primary_upstream_of(authz)
    if name is None:
        return ()
    message = (
        f"{field}.inline.primaryUpstreamProvider ({name}) has no effect here: Cedar evaluates the claims"
        " of the caller's token"
    )
    return ((IGNORED_PRIMARY_UPSTREAM, "True", "NoUpstreamChoice", message),)
