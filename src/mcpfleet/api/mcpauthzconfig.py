"""MCPAuthzConfig: authorization policies shared by the workloads that reference them (`authzConfigRef`).

The object carries an authorizer `type` and its backend-specific `config`, as ToolHive's does:
`cedarv1` (`policies`, `entities_json`, `primary_upstream_provider`, `group_claim_name`,
`role_claim_name`, `group_entity_type`) or `httpv1` (`http`, `context`, `claim_mapping`). A reference
resolves to exactly this `{type, config}` (`reconcile/mcpauthzconfig.resolve`), which the data plane's
authorizer evaluates as it evaluates an inline `authzConfig`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from mcpfleet.api.meta import ApiModel, ConfigStatus, KindInfo, PrinterColumn, config_columns
from mcpfleet.api.resource import Resource

MAX_CONFIG_BYTES = 256 * 1024
"""Bound on the serialized `config` (the API server bounds the object at ~1.5 MiB; policies far less)."""
MAX_POLICIES = 1000
CEDAR_KEYS = frozenset(
    {
        "policies",
        "entities_json",
        "primary_upstream_provider",
        "group_claim_name",
        "role_claim_name",
        "group_entity_type",
    }
)
HTTP_KEYS = frozenset({"http", "context", "claim_mapping"})


def config_problem(type_: str, config: dict[str, Any]) -> str | None:
    """`<field>: <reason>` for the first problem of `config` under `type_`, else None."""
    if len(json.dumps(config)) > MAX_CONFIG_BYTES:
        return f".config: larger than {MAX_CONFIG_BYTES} bytes"
    known = CEDAR_KEYS if type_ == "cedarv1" else HTTP_KEYS
    unknown = sorted(set(config) - known)
    if unknown:
        return f".config.{unknown[0]}: unknown {type_} setting (known: {', '.join(sorted(known))})"
    return _cedar_problem(config) if type_ == "cedarv1" else _http_problem(config)


def _cedar_problem(config: dict[str, Any]) -> str | None:
    policies = config.get("policies")
    if not isinstance(policies, list) or not policies:
        return ".config.policies: cedarv1 needs a non-empty list of Cedar policies"
    if len(policies) > MAX_POLICIES:
        return f".config.policies: at most {MAX_POLICIES} policies"
    for index, policy in enumerate(policies):
        if not isinstance(policy, str) or not policy.strip():
            return f".config.policies[{index}]: must be a non-empty string"
    for key in sorted(CEDAR_KEYS - {"policies"}):
        if key in config and not isinstance(config[key], str):
            return f".config.{key}: must be a string"
    entities = config.get("entities_json")
    if entities is None:
        return None
    try:
        parsed = json.loads(entities)
    except ValueError as exc:
        return f".config.entities_json: not JSON ({exc})"
    return (
        None if isinstance(parsed, list) else ".config.entities_json: must be a JSON array of Cedar entities"
    )


def _http_problem(config: dict[str, Any]) -> str | None:
    http = config.get("http")
    url = http.get("url") if isinstance(http, dict) else None
    if not isinstance(url, str):
        return ".config.http.url: httpv1 needs http.url (the policy decision point)"
    if not url.startswith(("http://", "https://")):
        return ".config.http.url: must be an http(s) URL"
    return None


class MCPAuthzConfigSpec(ApiModel):
    """An authorizer type and its configuration."""

    type: Literal["cedarv1", "httpv1"]
    """Authorizer backend: cedarv1 (Cedar policies) or httpv1 (an external policy decision point)."""
    config: dict[str, Any] = Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})
    """Backend-specific settings (see the kind's description); at most 256 KiB."""

    @model_validator(mode="after")
    def _config_shape(self) -> MCPAuthzConfigSpec:
        problem = config_problem(self.type, self.config)
        if problem is not None:
            raise ValueError(problem)
        return self


class MCPAuthzConfig(Resource):
    """Shared authorization policies."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPAuthzConfig",
        "mcpauthzconfigs",
        ("authzcfg",),
        columns=config_columns(PrinterColumn("Type", ".spec.type")),
        workload=False,
    )
    kind: Literal["MCPAuthzConfig"] = "MCPAuthzConfig"
    spec: MCPAuthzConfigSpec
    status: ConfigStatus = Field(default_factory=ConfigStatus)
