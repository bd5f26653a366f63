"""MCPToolConfig: which tools of a server are visible and under which names."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from mcpfleet.api.meta import ApiModel, ConfigStatus, KindInfo, PrinterColumn, Rule, RuleModel
from mcpfleet.api.resource import Resource


class ToolAnnotations(ApiModel):
    """MCP tool annotations (hints) that replace the tool's own, key by key."""

    title: str | None = None
    """Human-readable title."""
    read_only_hint: bool | None = None
    """The tool does not modify its environment."""
    destructive_hint: bool | None = None
    """The tool may perform destructive updates."""
    idempotent_hint: bool | None = None
    """Repeated calls with the same arguments have no further effect."""
    open_world_hint: bool | None = None
    """The tool interacts with an open world of external entities."""


class ToolOverride(RuleModel):
    """A new name, description and/or annotations for one tool."""

    rules = (
        Rule(
            cel="has(self.name) || has(self.description) || has(self.annotations)",
            message="an override needs a name, a description or annotations",
            field_path="",
            check=lambda s: s.name is not None or s.description is not None or s.annotations is not None,
        ),
    )

    name: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-/]+$")
    """Name clients see instead of the original."""
    description: str | None = None
    """Description clients see instead of the original."""
    annotations: ToolAnnotations | None = None
    """Annotations clients see instead of the original ones (per key)."""


class MCPToolConfigSpec(RuleModel):
    """Tool filtering and overrides, shared by every workload that references it."""

    rules = (
        Rule(
            cel="!has(self.toolsOverride) || self.toolsOverride.all(k, "
            "!has(self.toolsOverride[k].name) || self.toolsOverride.all(j, j == k || "
            "!has(self.toolsOverride[j].name) || self.toolsOverride[j].name != self.toolsOverride[k].name))",
            message="two overrides give the same new name",
            field_path=".toolsOverride",
            check=lambda s: _unique_override_names(s.tools_override),
        ),
    )

    tools_filter: list[str] = Field(default_factory=list, max_length=1000)
    """Tool names (original names) to keep; all tools when unset or empty."""
    tools_override: dict[str, ToolOverride] = Field(default_factory=dict, max_length=200)
    """Overrides keyed by the original tool name."""


def _unique_override_names(overrides: dict[str, ToolOverride]) -> bool:
    names = [o.name for o in overrides.values() if o.name is not None]
    return len(names) == len(set(names))


class MCPToolConfig(Resource):
    """A reusable tool filter / override set."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPToolConfig",
        "mcptoolconfigs",
        ("tc", "toolconfig"),
        columns=(
            PrinterColumn("Valid", '.status.conditions[?(@.type=="Valid")].status'),
            PrinterColumn("References", ".status.referencingWorkloads[*].name"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
        workload=False,
    )
    kind: Literal["MCPToolConfig"] = "MCPToolConfig"
    spec: MCPToolConfigSpec = Field(default_factory=MCPToolConfigSpec)
    status: ConfigStatus = Field(default_factory=ConfigStatus)
