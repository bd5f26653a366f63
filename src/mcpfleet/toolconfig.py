"""MCPToolConfig semantics on the data plane: which tools a client sees, under which names.

This module owns the pure functions that apply a tool filter and tool overrides, shared by the two
services that enforce them: the vMCP gateway (`vmcp/aggregate.py`, per backend, before conflict
resolution) and the proxy (`proxy/mux.py`, per server, from the run config of `--run-config`).
No I/O and no control-plane imports, so both data-plane packages can use it.

Semantics (MCPToolConfig): overrides are keyed by the original tool name and give a new name
and/or description and/or annotations; the filter is an allow-list that
matches the original or the overridden name, and keeps every tool when empty. A renamed tool is
called by its new name only; a hidden tool is, for a client, an unknown tool.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the api models cost ~80 ms of pydantic building: a proxy without toolConfig skips them
    from mcpfleet.api.mcptoolconfig import ToolOverride

JSON = dict[str, Any]


@dataclass(frozen=True)
class Override:
    """A new name, description and/or annotations for one tool."""

    name: str | None = None
    description: str | None = None
    annotations: Mapping[str, Any] | None = None


def override_of(spec: ToolOverride) -> Override:
    """The shared form of an MCPToolConfig override (the api model)."""
    annotations = spec.annotations.dump() if spec.annotations is not None else None
    return Override(name=spec.name, description=spec.description, annotations=annotations)


def apply_override(tool: Mapping[str, Any], override: Override) -> JSON:
    """A copy of the tool (a `tools/list` entry) as the override presents it."""
    out = dict(tool)
    if override.name:
        out["name"] = override.name
    if override.description is not None:
        out["description"] = override.description
    if override.annotations is not None:
        annotations = dict(out.get("annotations") or {})
        annotations.update(override.annotations)
        out["annotations"] = annotations
    return out


def filtered_out(original: str, shown: str, allow: Collection[str]) -> bool:
    """Whether an allow-list hides a tool: it names neither its original nor its shown name."""
    return bool(allow) and original not in allow and shown not in allow


def unknown_tool_result(name: object) -> JSON:
    """The `tools/call` answer for a tool the client cannot see, as MCP SDK servers give it for
    a tool they do not have: a tool-level error result, so a hidden tool looks like no tool."""
    return {"content": [{"type": "text", "text": f"Unknown tool: {name}"}], "isError": True}


@dataclass(frozen=True)
class ToolPolicy:
    """One server's filter and overrides, applied to its own `tools/list` and `tools/call`."""

    allow: frozenset[str] = frozenset()
    overrides: Mapping[str, Override] = field(default_factory=dict)

    def present(self, tools: Iterable[Any]) -> list[Any]:
        """The tools of one `tools/list` page as clients see them (entries that are not named
        tool objects pass through untouched)."""
        out: list[Any] = []
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                out.append(tool)
                continue
            original: str = tool["name"]
            override = self.overrides.get(original)
            shown = apply_override(tool, override) if override is not None else tool
            if not filtered_out(original, shown["name"], self.allow):
                out.append(shown)
        return out

    def original_name(self, name: str) -> str | None:
        """The server's name for a tool a client calls by `name`, or None when the client cannot
        see a tool of that name (filtered out, or renamed away from it)."""
        for original, override in self.overrides.items():
            if override.name == name:
                return None if filtered_out(original, name, self.allow) else original
        own = self.overrides.get(name)
        if own is not None and own.name and own.name != name:
            return None
        return None if filtered_out(name, name, self.allow) else name
