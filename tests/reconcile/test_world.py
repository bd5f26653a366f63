"""`reconcile/world.py`: one World builder for both platforms (objects sorted by kind, status-derived URLs)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.resource import Resource
from mcpfleet.reconcile.world import WORLD_FIELDS, build_world, refresh

DOCUMENTS: list[dict[str, Any]] = [
    {"kind": "MCPGroup", "metadata": {"name": "g"}, "spec": {}},
    {
        "kind": "MCPServer",
        "metadata": {"name": "time"},
        "spec": {"image": "uvx://mcp-server-time", "groupRef": {"name": "g"}},
    },
    {"kind": "MCPServer", "metadata": {"name": "other"}, "spec": {"image": "uvx://mcp-server-fetch"}},
    {
        "kind": "MCPRemoteProxy",
        "metadata": {"name": "far"},
        "spec": {"remoteURL": "https://example.com/mcp", "groupRef": {"name": "g"}},
    },
    {
        "kind": "VirtualMCPServer",
        "metadata": {"name": "gw"},
        "spec": {"config": {"groupRef": "g"}, "incomingAuth": {"type": "anonymous"}},
    },
    {"kind": "MCPToolConfig", "metadata": {"name": "tc"}, "spec": {"toolsFilter": ["a"]}},
]


def _objects() -> list[Resource]:
    return [
        parse_manifest(
            {"apiVersion": "mcpfleet.dev/v1beta1", **d, "metadata": {**d["metadata"], "namespace": "ns"}}
        )
        for d in DOCUMENTS
    ]


def test_objects_land_in_the_field_of_their_kind() -> None:
    world = build_world("local", "ns", _objects(), {})
    assert set(world.groups) == {"g"}
    assert [s.name for s in world.servers] == ["time", "other"]
    assert [p.name for p in world.remote_proxies] == ["far"]
    assert [v.name for v in world.virtual_servers] == ["gw"]
    assert set(world.tool_configs) == {"tc"}
    assert world.oidc_configs == {} and world.server_entries == ()


def test_urls_come_from_statuses_and_a_refresh_rereads_only_them() -> None:
    statuses = {
        ("MCPServer", "time"): {"url": "http://127.0.0.1:9001/mcp"},
        ("MCPServer", "other"): {"url": ""},
        ("MCPRemoteProxy", "far"): {"url": "http://127.0.0.1:9002/mcp"},
        ("EmbeddingServer", "e"): {"phase": "Ready", "url": "http://127.0.0.1:9003"},
        ("EmbeddingServer", "slow"): {"phase": "Pending", "url": "http://127.0.0.1:9004"},
        ("VirtualMCPServer", "gw"): {"url": "http://127.0.0.1:9005/mcp"},
    }
    world = build_world("kubernetes", "ns", _objects(), statuses)
    assert world.backend_urls == {"time": "http://127.0.0.1:9001/mcp", "far": "http://127.0.0.1:9002/mcp"}
    assert world.embedding_urls == {"e": "http://127.0.0.1:9003", "slow": None}
    later = refresh(world, {("MCPServer", "other"): {"url": "http://127.0.0.1:9006/mcp"}})
    assert later.backend_urls == {"other": "http://127.0.0.1:9006/mcp"}
    assert later.servers == world.servers and later.groups == world.groups


def test_every_world_kind_names_an_existing_world_field() -> None:
    world = build_world("local", "ns", [], {})
    for field, by_name in WORLD_FIELDS.values():
        assert isinstance(getattr(world, field), dict if by_name else tuple)


@settings(max_examples=50, deadline=None)
@given(order=st.permutations(range(len(DOCUMENTS))))
def test_the_order_objects_come_in_changes_only_tuple_order(order: list[int]) -> None:
    objects = _objects()
    a = build_world("local", "ns", objects, {})
    b = build_world("local", "ns", [objects[i] for i in order], {})
    assert a.groups == b.groups and a.tool_configs == b.tool_configs
    assert sorted(s.name for s in a.servers) == sorted(s.name for s in b.servers)
