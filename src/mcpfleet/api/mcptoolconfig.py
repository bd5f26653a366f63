"""MCPToolConfig: which tools of a server are visible and under which names."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from mcpfleet.api.meta import ConfigStatus, KindInfo, PrinterColumn, Rule, RuleModel
from mcpfleet.api.resource import Resource


class ToolOverride(RuleModel):
    """A new name and/or description for one tool."""

    rules = (
        Rule(
            cel="has(self.name) || has(self.description)",
            message="an override needs a name or a description",
            field_path="",
            check=lambda s: s.name is not None or s.description is not None,
        ),
    )

    name: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-/]+$")
    """Name clients see instead of the original."""
    description: str | None = None
    """Description clients see instead of the original."""


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

    tools_filter: list[str] | None = Field(default=None, max_length=1000)
    """Tool names (original names) to keep; all tools when unset or empty."""
    tools_override: dict[str, ToolOverride] | None = Field(default=None, max_length=200)
    """Overrides keyed by the original tool name."""


def _unique_override_names(overrides: dict[str, ToolOverride] | None) -> bool:
    names = [o.name for o in (overrides or {}).values() if o.name is not None]
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
