"""MCPGroup: a named set of MCP servers and remote proxies that a VirtualMCPServer aggregates."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from mcpfleet.api.meta import ApiModel, Condition, KindInfo, PrinterColumn
from mcpfleet.api.resource import Resource


class MCPGroupSpec(ApiModel):
    """Desired state of a group: members join by setting `groupRef` to the group's name."""

    description: str | None = Field(default=None, max_length=1024)
    """What the group is for."""


class MCPGroupStatus(ApiModel):
    """Members of the group as observed."""

    phase: Literal["Ready", "Pending", "Failed"] | None = None
    """Ready once the membership is computed."""
    servers: list[str] = Field(default_factory=list)
    """Names of member MCPServers."""
    server_count: int | None = None
    """Number of member MCPServers."""
    remote_proxies: list[str] = Field(default_factory=list)
    """Names of member MCPRemoteProxies."""
    remote_proxy_count: int | None = None
    """Number of member MCPRemoteProxies."""
    entries: list[str] = Field(default_factory=list)
    """Names of member MCPServerEntries."""
    entry_count: int | None = None
    """Number of member MCPServerEntries."""
    observed_generation: int | None = None
    """The .metadata.generation this status describes."""
    conditions: list[Condition] = Field(default_factory=list)
    """Conditions, among them Ready."""


class MCPGroup(Resource):
    """A group of MCP servers."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPGroup",
        "mcpgroups",
        ("mcpg", "mcpgroup"),
        columns=(
            PrinterColumn("Servers", ".status.serverCount", "integer"),
            PrinterColumn("Proxies", ".status.remoteProxyCount", "integer"),
            PrinterColumn("Status", ".status.phase"),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
        workload=False,
    )
    kind: Literal["MCPGroup"] = "MCPGroup"
    spec: MCPGroupSpec = Field(default_factory=MCPGroupSpec)
    status: MCPGroupStatus = Field(default_factory=MCPGroupStatus)
