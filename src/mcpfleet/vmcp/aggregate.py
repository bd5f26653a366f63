"""Capability merge: per-backend lists -> one advertised view plus the routing table.

Pure functions, no I/O: given each backend's cached tools / resources / templates / prompts and
the `aggregation` config, compute what clients see and how each name routes back to
(backend, original name). Order of operations per backend: overrides (rename / describe), then
filters (hidden tools stay routable for composite steps), then conflict resolution across
backends (`prefix` | `priority` | `manual`). The override and filter semantics are
`mcpfleet.toolconfig`'s, shared with the proxy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpfleet.api.gatewayconfig import Aggregation, WorkloadToolConfig
from mcpfleet.api.mcptoolconfig import MCPToolConfigSpec, ToolOverride
from mcpfleet.toolconfig import apply_override, filtered_out, override_of


@dataclass(frozen=True)
class Route:
    backend: str
    original: str


@dataclass
class BackendLists:
    """What one backend advertised (only for the capabilities it declares)."""

    name: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Aggregate:
    tools: list[dict[str, Any]] = field(default_factory=list)
    # Every tool a client may call (backend, composite and code-mode tools): what the optimizer
    # indexes. `tools` is what tools/list advertises, the same list unless the optimizer is on.
    catalogue: list[dict[str, Any]] = field(default_factory=list)
    tool_routes: dict[str, Route] = field(default_factory=dict)
    # "workload.tool" (original or overridden name) -> route, including hidden tools.
    step_routes: dict[str, Route] = field(default_factory=dict)
    resources: list[dict[str, Any]] = field(default_factory=list)
    resource_routes: dict[str, str] = field(default_factory=dict)
    templates: list[dict[str, Any]] = field(default_factory=list)
    template_routes: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    prompt_routes: dict[str, Route] = field(default_factory=dict)


class ConflictError(Exception):
    """`manual` conflict resolution found names claimed by more than one backend."""


@dataclass
class _Candidate:
    backend: str
    original: str
    name: str
    item: dict[str, Any]


def _resolve(
    cands: list[_Candidate], cfg: Aggregation, kind: str, allow_manual_conflicts: bool = False
) -> list[_Candidate]:
    """Apply the conflict strategy to candidates (already overridden and filtered)."""
    strategy = cfg.conflict_resolution
    fmt = cfg.conflict_resolution_config.prefix_format
    if strategy == "prefix":
        out = []
        for c in cands:
            out.append(
                _Candidate(c.backend, c.original, fmt.replace("{workload}", c.backend) + c.name, c.item)
            )
        return out
    by_name: dict[str, list[_Candidate]] = {}
    for c in cands:
        by_name.setdefault(c.name, []).append(c)
    conflicts = {n: cs for n, cs in by_name.items() if len({c.backend for c in cs}) > 1}
    if strategy == "manual":
        if conflicts and not allow_manual_conflicts:
            listing = "; ".join(
                f"{n!r} from {sorted({c.backend for c in cs})}" for n, cs in sorted(conflicts.items())
            )
            raise ConflictError(
                f"aggregation.conflictResolution is 'manual' but {kind} names conflict: {listing}. "
                "Add aggregation.tools[].overrides to rename them."
            )
        return [cs[0] for cs in by_name.values()]
    # priority
    order = cfg.conflict_resolution_config.priority_order
    rank = {b: i for i, b in enumerate(order)}
    out = []
    for n, cs in by_name.items():
        if n not in conflicts:
            out.append(cs[0])
            continue
        listed = sorted((c for c in cs if c.backend in rank), key=lambda c: rank[c.backend])
        if listed:
            out.append(listed[0])
        for c in cs:
            if c.backend not in rank:
                out.append(
                    _Candidate(c.backend, c.original, fmt.replace("{workload}", c.backend) + c.name, c.item)
                )
    return out


def _template_regex(uri_template: str) -> re.Pattern[str]:
    """A match-anything-per-variable regex for an RFC 6570 level-1 template like `file:///{path}`."""
    parts = re.split(r"(\{[^}]*\})", uri_template)
    rx = "".join(".+?" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile("^" + rx + "$")


def _tool_policy(
    wl: WorkloadToolConfig | None, cfg: Aggregation, tool_configs: dict[str, MCPToolConfigSpec]
) -> tuple[dict[str, ToolOverride], list[str], bool]:
    """(overrides, allow-list, hide all) of one backend: its MCPToolConfig or its inline settings."""
    if wl is None:
        # An unlisted backend: `defaultToolVisibility: deny` hides its tools (listing it opts it in).
        return {}, [], cfg.exclude_all_tools or cfg.default_tool_visibility == "deny"
    exclude_all = cfg.exclude_all_tools or wl.exclude_all
    if wl.tool_config_ref is not None:
        tc = tool_configs[wl.tool_config_ref.name]
        return dict(tc.tools_override), list(tc.tools_filter), exclude_all
    return dict(wl.overrides), list(wl.filter), exclude_all


def _add_resources(agg: Aggregate, backends: Sequence[BackendLists], cfg: Aggregation) -> None:
    """Resources (first backend wins a URI; priority order under the priority strategy) and templates."""
    ordered = list(backends)
    if cfg.conflict_resolution == "priority":
        rank = {b: i for i, b in enumerate(cfg.conflict_resolution_config.priority_order)}
        ordered.sort(key=lambda b: rank.get(b.name, len(rank)))
    for b in ordered:
        for r in b.resources:
            uri = r.get("uri")
            if isinstance(uri, str) and uri not in agg.resource_routes:
                agg.resource_routes[uri] = b.name
                agg.resources.append(r)
        for tpl in b.templates:
            ut = tpl.get("uriTemplate")
            if isinstance(ut, str):
                agg.templates.append(tpl)
                agg.template_routes.append((_template_regex(ut), b.name))


def build(
    backends: Sequence[BackendLists],
    cfg: Aggregation,
    tool_configs: dict[str, MCPToolConfigSpec] | None = None,
) -> Aggregate:
    """Merge backend lists into the advertised view and routing table (raises ConflictError)."""
    agg = Aggregate()
    per_workload = {w.workload: w for w in cfg.tools}
    tool_configs = tool_configs or {}
    visible: list[_Candidate] = []
    for b in backends:
        overrides, allow, exclude_all = _tool_policy(per_workload.get(b.name), cfg, tool_configs)
        for tool in b.tools:
            original = tool["name"]
            ov = overrides.get(original)
            t = apply_override(tool, override_of(ov)) if ov is not None else tool
            route = Route(b.name, original)
            agg.step_routes[f"{b.name}.{original}"] = route
            agg.step_routes[f"{b.name}.{t['name']}"] = route
            if not (exclude_all or filtered_out(original, t["name"], allow)):
                visible.append(_Candidate(b.name, original, t["name"], t))
    for c in _resolve(visible, cfg, "tool"):
        t = c.item if c.item.get("name") == c.name else {**c.item, "name": c.name}
        agg.tools.append(t)
        agg.tool_routes[c.name] = Route(c.backend, c.original)

    prompt_cands = [_Candidate(b.name, p["name"], p["name"], p) for b in backends for p in b.prompts]
    # Prompts have no override knob, so a manual-mode prompt clash keeps the first backend's prompt.
    for c in _resolve(prompt_cands, cfg, "prompt", allow_manual_conflicts=True):
        agg.prompts.append(c.item if c.item.get("name") == c.name else {**c.item, "name": c.name})
        agg.prompt_routes[c.name] = Route(c.backend, c.original)

    _add_resources(agg, backends, cfg)
    return agg


def route_resource(agg: Aggregate, uri: str) -> str | None:
    """The backend serving `uri`: an exact listed resource first, then the first matching template."""
    b = agg.resource_routes.get(uri)
    if b is not None:
        return b
    for rx, backend in agg.template_routes:
        if rx.match(uri):
            return backend
    return None
