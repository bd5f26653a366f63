"""Spec fragments for policy in the data plane: `authzConfig` (Cedar authorization) and `audit`.

Shapes follow ToolHive's v1beta1 CRDs: `authzConfig` on MCPServer / MCPRemoteProxy and
`incomingAuth.authzConfig` on VirtualMCPServer (inline Cedar policies + entities JSON, or a
ConfigMap key holding ToolHive's authz file), `audit` on MCPServer / MCPRemoteProxy and
`config.audit` on VirtualMCPServer. What the data plane reads is `mcpfleet.policy.config`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from mcpfleet.api.meta import ApiModel, Rule, RuleModel

MAX_POLICIES = 1000
MAX_POLICY_CHARS = 65_536
MAX_ENTITIES_CHARS = 1_048_576


class AuthzConfigMapRef(ApiModel):
    """A ConfigMap key holding ToolHive's authz file (`{version, type: cedarv1, cedar: {...}}`)."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the ConfigMap."""
    key: str = Field(default="authz.json", min_length=1, max_length=253)
    """Key in the ConfigMap that holds the authorization configuration."""


class InlineAuthz(ApiModel):
    """Cedar policies and entities written in the manifest."""

    policies: list[Annotated[str, Field(min_length=1, max_length=MAX_POLICY_CHARS)]] = Field(
        min_length=1, max_length=MAX_POLICIES, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Cedar policy strings (principal: the caller's token claims as `claim_*` attributes)."""
    entities_json: str = Field(default="[]", alias="entitiesJson", max_length=MAX_ENTITIES_CHARS)
    """Cedar entities as a JSON string (attributes and parents of tools, prompts, resources, groups)."""
    primary_upstream_provider: str | None = Field(
        default=None, min_length=1, max_length=63, pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
    )
    """ToolHive's upstream identity provider whose token's claims Cedar reads. On MCPServer and
    MCPRemoteProxy it has no effect (as in ToolHive; condition AuthzPrimaryUpstreamProviderIgnored);
    on VirtualMCPServer it is the deprecated place of spec.authServerConfig.primaryUpstreamProvider,
    read as that field (condition AuthzPrimaryUpstreamProviderDeprecated; a different value there is
    refused naming both)."""


class AuthzConfig(RuleModel):
    """Cedar authorization of MCP requests: exactly the block named by `type`."""

    rules = (
        Rule(
            cel="self.type == 'configMap' ? has(self.configMap) : !has(self.configMap)",
            message="configMap must be set when type is 'configMap', and must not be set otherwise",
            field_path=".configMap",
            check=lambda s: (s.type == "configMap") == (s.config_map is not None),
        ),
        Rule(
            cel="self.type == 'inline' ? has(self.inline) : !has(self.inline)",
            message="inline must be set when type is 'inline', and must not be set otherwise",
            field_path=".inline",
            check=lambda s: (s.type == "inline") == (s.inline is not None),
        ),
    )

    type: Literal["configMap", "inline"] = "configMap"
    """configMap (ToolHive's authz file in a ConfigMap key) or inline."""
    config_map: AuthzConfigMapRef | None = None
    """The ConfigMap key holding the authz file (Kubernetes only; a change applies without a restart)."""
    inline: InlineAuthz | None = None
    """Policies and entities written here."""
    group_claim_name: str | None = Field(default=None, max_length=253)
    """Token claim holding the caller's groups (default: groups, roles, cognito:groups)."""
    role_claim_name: str | None = Field(default=None, max_length=253)
    """Token claim holding the caller's roles (added to the groups)."""
    group_entity_type: str | None = Field(default=None, max_length=63, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Cedar entity type of the principal's group parents (default THVGroup)."""


AuditEventType = Literal[
    "mcp_initialize",
    "mcp_tool_call",
    "mcp_tools_list",
    "mcp_prompt_get",
    "mcp_prompts_list",
    "mcp_resource_read",
    "mcp_resources_list",
    "mcp_ping",
    "mcp_request",
]


class AuditConfig(ApiModel):
    """Audit logging: one JSON line per MCP request (who, what, on which backend, outcome, time)."""

    enabled: bool = False
    """Write audit events."""
    component: str | None = Field(default=None, max_length=253)
    """Component name in the events (default: the workload's name)."""
    event_types: list[AuditEventType] | None = None
    """Only these event types (all when unset)."""
    exclude_event_types: list[AuditEventType] | None = None
    """Never these event types (wins over eventTypes)."""
    include_request_data: bool = False
    """Log tool / prompt argument values (redacted as `[redacted]` otherwise)."""
    include_response_data: bool = False
    """Log the answer too (`response`: the JSON-RPC result or error as JSON text, cut at
    maxDataSize characters)."""
    detect_application_errors: bool = True
    """Read each answer for a JSON-RPC error or a tool's `isError` (outcome `error` / `tool_error`);
    off: the outcome follows the transport only, and a 2xx answer is `success`."""
    max_delegation_depth: int = Field(default=10, ge=1, le=100)
    """Most RFC 8693 `act` entries recorded in an event's `delegationChain` (a deeper chain is cut
    and marked `delegationTruncated`)."""
    max_data_size: int = Field(default=1024, ge=0, le=1_048_576)
    """Longest logged argument value or response, in characters (longer values are cut)."""
    log_file: str | None = Field(default=None, max_length=4096)
    """Append events to this file instead of stdout."""


AUTHZ_REF_EXCLUSIVE = Rule(
    cel="!(has(self.authzConfig) && has(self.authzConfigRef))",
    message="authzConfig and authzConfigRef are mutually exclusive; use authzConfigRef to reference a"
    " shared MCPAuthzConfig",
    field_path=".authzConfigRef",
    check=lambda s: not (s.authz_config is not None and s.authz_config_ref is not None),
)
"""The rule of every spec with both `authzConfig` and `authzConfigRef` (ToolHive's CEL rule)."""
