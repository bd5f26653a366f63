"""MCPServerEntry: a remote MCP endpoint that joins a group without running anything.

A VirtualMCPServer over the group connects to `remoteUrl` directly (no proxy pod), with the entry's
headers, its MCPExternalAuthConfig (token exchange, header injection, bearer token) and its CA bundle.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from mcpfleet.api.common import CABundleRef, HeaderForward, HttpTransport
from mcpfleet.api.meta import ApiModel, Condition, KindInfo, LocalObjectReference, PrinterColumn, RefersTo
from mcpfleet.api.resource import Resource


class GroupRef(ApiModel):
    """The MCPGroup an object belongs to."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the MCPGroup."""


class MCPServerEntrySpec(ApiModel):
    """Where the remote server is and how the gateway reaches it."""

    remote_url: str = Field(pattern=r"^https?://[^\s]+$", max_length=2048)
    """URL of the remote MCP endpoint."""
    transport: HttpTransport
    """streamable-http or sse; required, since the server is not ours to probe."""
    group_ref: Annotated[GroupRef, RefersTo("MCPGroup")]
    """The MCPGroup this entry joins (its gateways discover it)."""
    external_auth_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPExternalAuthConfig")] = None
    """MCPExternalAuthConfig the gateway applies toward the remote (token exchange, headers, bearer)."""
    header_forward: HeaderForward | None = None
    """Headers the gateway adds to every request to the remote."""
    ca_bundle_ref: CABundleRef | None = None
    """CA certificates that verify the remote's TLS certificate (ConfigMap key, `ca.crt` by default)."""
    allow_private_endpoint: bool = False
    """Allow a private / in-cluster `remoteUrl` (RFC 1918, unique-local, *.cluster.local); loopback and
    link-local stay refused on Kubernetes."""


class MCPServerEntryStatus(ApiModel):
    """Whether the entry is usable by its group's gateways."""

    phase: Literal["Valid", "Pending", "Failed"] | None = None
    """Valid (the gateway can use it), Pending or Failed (see message / conditions)."""
    message: str | None = None
    """Why the entry is in this phase."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status describes."""
    conditions: list[Condition] = Field(default_factory=list)
    """Conditions: Valid, GroupRefValidated, ExternalAuthConfigValidated, CABundleValidated."""


class MCPServerEntry(Resource):
    """A remote MCP server declared for gateway discovery."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPServerEntry",
        "mcpserverentries",
        ("mcpentry",),
        columns=(
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Transport", ".spec.transport"),
            PrinterColumn("Remote URL", ".spec.remoteUrl"),
            PrinterColumn("Group", ".spec.groupRef.name"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
        workload=False,
    )
    kind: Literal["MCPServerEntry"] = "MCPServerEntry"
    spec: MCPServerEntrySpec
    status: MCPServerEntryStatus = Field(default_factory=MCPServerEntryStatus)
