"""Each kind's name (and the plurals the data plane watches) as plain constants, importable without
the models.

The data plane (gateway, registry), the console and the quick CLI paths name kinds through these
instead of importing `api.kinds`, which loads every model (0.1-0.5 s more start-up for the registry
server on a busy machine, `python -X importtime`). The descriptors in `api.kinds` are the source of
the facts; `tests/test_kind_descriptors.py` holds these constants equal to them.
"""

from __future__ import annotations

from typing import Final, Literal

MCP_SERVER: Final = "MCPServer"
MCP_REMOTE_PROXY: Final = "MCPRemoteProxy"
VIRTUAL_MCP_SERVER: Final = "VirtualMCPServer"
MCP_REGISTRY: Final = "MCPRegistry"
EMBEDDING_SERVER: Final = "EmbeddingServer"
MCP_GROUP: Final = "MCPGroup"
MCP_SERVER_ENTRY: Final = "MCPServerEntry"

PLURALS: dict[str, str] = {
    MCP_SERVER: "mcpservers",
    MCP_REMOTE_PROXY: "mcpremoteproxies",
    VIRTUAL_MCP_SERVER: "virtualmcpservers",
}
"""The plurals the data plane lists and watches on Kubernetes."""

MEMBER_KINDS: tuple[str, ...] = (MCP_SERVER, MCP_REMOTE_PROXY)
"""Kinds that join an MCPGroup and run something: a gateway's backends (descriptors' `group_member`)."""
PUBLISHED_KINDS: tuple[str, ...] = (MCP_SERVER, VIRTUAL_MCP_SERVER, MCP_REMOTE_PROXY)
"""Kinds clients connect to: an MCPRegistry's workload source lists them (descriptors' `published`)."""
WORKLOAD_KINDS: tuple[str, ...] = (
    MCP_SERVER,
    MCP_REMOTE_PROXY,
    VIRTUAL_MCP_SERVER,
    MCP_REGISTRY,
    EMBEDDING_SERVER,
)
"""Kinds that run something, in the order a person reads them (the apply order is `api.kinds.WORKLOAD_KINDS`)."""

MemberKind = Literal["MCPServer", "MCPRemoteProxy"]
"""A member kind as a type (a catalogue entry becomes one of these)."""
