"""The config model (field names, errors naming the field) and the pure pieces: aggregation, templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpfleet.api.duration import parse_duration
from mcpfleet.api.virtualmcpserver import Aggregation
from mcpfleet.vmcp import aggregate
from mcpfleet.vmcp.aggregate import BackendLists
from mcpfleet.vmcp.composite import render
from mcpfleet.vmcp.config import ConfigError, load_config, parse_config
from mcpfleet.vmcp.server import ServeOptions, build_app


def test_toolhive_shaped_config_parses(tmp_path: Path) -> None:
    f = tmp_path / "vmcp.yaml"
    f.write_text(
        """
name: team
groupRef: eng
namespace: ns1
backends: [{name: a, url: "http://127.0.0.1:1/mcp", transport: sse}]
aggregation:
  conflictResolution: priority
  conflictResolutionConfig: {priorityOrder: [a], prefixFormat: "{workload}__"}
  tools: [{workload: a, filter: [x], overrides: {x: {name: y, description: d}}}]
compositeTools:
  - name: c
    steps: [{id: s1, tool: a.x, arguments: {q: "{{.params.q}}"}, onError: {action: retry, retryCount: 2, retryDelay: 100ms}, timeout: 5s}]
incomingAuth: {type: oidc, oidc: {issuer: "https://issuer", audience: vmcp, jwksUrl: "https://issuer/jwks"}}
outgoingAuth:
  default: {type: unauthenticated}
  backends: {a: {type: header_injection, headerInjection: {headerName: X-Key, headerValueEnv: KEY}}}
operational:
  timeouts: {default: 10s, perWorkload: {a: 2s}}
  failureHandling: {healthCheckInterval: 1m30s, unhealthyThreshold: 2, partialFailureMode: best_effort, circuitBreaker: {enabled: true}}
"""
    )
    cfg = load_config(f)
    assert cfg.group_ref == "eng" and cfg.backends[0].transport == "sse"
    assert cfg.aggregation.conflict_resolution_config.prefix_format == "{workload}__"
    assert cfg.composite_tools[0].steps[0].on_error.retry_count == 2
    assert (
        cfg.operational.timeouts.for_backend("a") == 2.0 and cfg.operational.timeouts.for_backend("b") == 10.0
    )
    assert parse_duration(cfg.operational.failure_handling.health_check_interval) == 90.0
    assert cfg.outgoing_auth.for_backend("a").type == "header_injection"
    # Round trip with camelCase aliases (what the operator renders).
    again = parse_config(cfg.model_dump(by_alias=True, exclude_none=True))
    assert again == cfg


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"backends": [{"name": "a", "url": "ftp://x"}]}, "backends.0.url"),
        ({"aggregation": {"conflictResolution": "random"}}, "aggregation.conflictResolution"),
        (
            {"operational": {"failureHandling": {"healthCheckInterval": "soon"}}},
            "operational.failureHandling.healthCheckInterval",
        ),
        (
            {"backends": [{"name": "a", "url": "http://x"}, {"name": "a", "url": "http://y"}]},
            "duplicate backend name",
        ),
        (
            {"compositeTools": [{"name": "c", "steps": [{"id": "a", "tool": "t", "dependsOn": ["zz"]}]}]},
            "dependsOn: unknown step 'zz'",
        ),
        ({"incomingAuth": {"type": "oidc"}}, "incomingAuth.oidc"),
        ({"aggregation": {"tools": [{"workload": "a", "toolConfigRef": {"name": "nope"}}]}}, "toolConfigRef"),
        ({"bogusField": 1}, "bogusField"),
    ],
)
def test_bad_config_names_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert field in str(err.value)


def test_no_backends_is_an_error() -> None:
    with pytest.raises(ConfigError, match="no backends and no groupRef"):
        build_app(parse_config({}), ServeOptions())


def _lists(name: str, *tools: str) -> BackendLists:
    return BackendLists(name, tools=[{"name": t, "inputSchema": {"type": "object"}} for t in tools])


def test_priority_drops_losers_and_prefixes_unlisted() -> None:
    cfg = Aggregation.model_validate(
        {"conflictResolution": "priority", "conflictResolutionConfig": {"priorityOrder": ["b", "a"]}}
    )
    agg = aggregate.build([_lists("a", "x", "y"), _lists("b", "x"), _lists("c", "x", "z")], cfg)
    assert agg.tool_routes["x"] == aggregate.Route("b", "x")
    assert agg.tool_routes["c_x"] == aggregate.Route("c", "x")
    assert "a_x" not in agg.tool_routes and agg.tool_routes["y"].backend == "a"
    assert agg.step_routes["a.x"] == aggregate.Route("a", "x")  # losers stay reachable from composite steps


def test_prefix_format_and_hidden_tools_routable() -> None:
    cfg = Aggregation.model_validate(
        {
            "conflictResolutionConfig": {"prefixFormat": "{workload}."},
            "tools": [{"workload": "a", "filter": ["keep"]}],
        }
    )
    agg = aggregate.build([_lists("a", "keep", "hide")], cfg)
    assert set(agg.tool_routes) == {"a.keep"}
    assert agg.step_routes["a.hide"] == aggregate.Route("a", "hide")


def test_default_tool_visibility_deny_advertises_only_listed_backends() -> None:
    cfg = Aggregation.model_validate(
        {"defaultToolVisibility": "deny", "tools": [{"workload": "a", "filter": ["keep"]}, {"workload": "b"}]}
    )
    lists = [_lists("a", "keep", "drop"), _lists("b", "x"), _lists("c", "y")]
    lists[2].prompts = [{"name": "p"}]
    agg = aggregate.build(lists, cfg)
    # b is listed (opted in, no filter: all of it); c is not listed: hidden, still routable by steps.
    assert set(agg.tool_routes) == {"a_keep", "b_x"}
    assert agg.step_routes["c.y"] == aggregate.Route("c", "y")
    assert [p["name"] for p in agg.prompts] == ["c_p"]  # deny gates tools only
    assert Aggregation().default_tool_visibility == "allow"
    allow = aggregate.build(
        lists, Aggregation.model_validate({"tools": [{"workload": "a", "filter": ["keep"]}]})
    )
    assert set(allow.tool_routes) == {"a_keep", "b_x", "c_y"}


def test_templates() -> None:
    scope = {"params": {"n": 3, "s": "x"}, "steps": {"a": {"output": {"text": "hi", "list": [1, 2]}}}}
    assert render("{{.params.n}}", scope) == 3  # a lone template keeps its type
    assert render("n={{.params.n}} {{.steps.a.output.text}}", scope) == "n=3 hi"
    assert render("{{.params.s}}-{{.params.n}}", scope) == "x-3"  # two templates, not one spanning both
    assert render("{{.steps.a.output.list}}", scope) == [1, 2]
    assert render('{{eq .params.s "x"}}', scope) is True
    assert render('{{ne .params.s "x"}}', scope) is False
    assert render("{{.steps.missing.output}}", scope) is None
    assert render("{{gt .params.n 2}}", scope) is True
