"""The source kinds a registry reads, as both of their forms share them.

MCPRegistry's spec (`mcpfleet.api.mcpregistry`) and the registry server's own source model
(`mcpfleet.api.registrysource`, which configYAML parses too) both build on these: the git reference,
the upstream API and URL endpoints, kubernetes discovery, entry filters and the sync policy. They live
below both so that MCPRegistry can validate its configYAML with the server's model without the two
modules importing each other.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcpfleet.api.duration import Duration, parse_duration
from mcpfleet.api.meta import ApiModel, Rule, RuleModel

GIT_REPOSITORY_PATTERN = r"^(file:///|https?://|git@|ssh://|git://).*"
"""A repository URL (the server's own config also takes a local path: `registrysource.GitSource`)."""
SourceFormat = Literal["toolhive", "upstream"]
"""toolhive (legacy ToolHive registry file) or upstream (server.json)."""


class GitRef(RuleModel):
    """A file in a git repository, at a branch, tag or commit (the spec's and the server's git source)."""

    rules = (
        Rule(
            cel="(has(self.branch) ? 1 : 0) + (has(self.tag) ? 1 : 0) + (has(self.commit) ? 1 : 0) <= 1",
            message="set at most one of branch, tag and commit",
            field_path="",
            check=lambda s: sum(x is not None for x in (s.branch, s.tag, s.commit)) <= 1,
        ),
    )

    repository: str = Field(min_length=1, pattern=GIT_REPOSITORY_PATTERN)
    """Repository URL."""
    branch: str | None = Field(default=None, min_length=1)
    """Branch to follow (the default branch when none of branch/tag/commit is set)."""
    tag: str | None = Field(default=None, min_length=1)
    """Tag to check out."""
    commit: str | None = Field(default=None, min_length=1)
    """Commit to check out."""
    path: str = Field(default="registry.json", pattern=r"^.*\.json$")
    """Path of the registry file inside the repository."""


class APISource(ApiModel):
    """Another registry that speaks the upstream MCP registry API (federation)."""

    endpoint: str = Field(min_length=1, pattern=r"^https?://.*")
    """Base URL of the registry, e.g. https://registry.example.com."""


class URLSource(ApiModel):
    """A registry file fetched over HTTP(S)."""

    endpoint: str = Field(min_length=1, pattern=r"^https?://.*")
    """URL of the registry file."""


class KubernetesSource(ApiModel):
    """Discover MCPServer, VirtualMCPServer and MCPRemoteProxy objects labelled
    `mcpfleet.dev/registry: <registry name>`."""

    namespaces: list[str] = Field(default_factory=list)
    """Namespaces to look in; the registry's own namespace when unset."""


class GlobFilter(ApiModel):
    """Include / exclude glob patterns."""

    include: list[str] = Field(default_factory=list)
    """Keep only entries that match one of these globs."""
    exclude: list[str] = Field(default_factory=list)
    """Drop entries that match one of these globs."""


class RegistryFilter(ApiModel):
    """Which entries of a source are served."""

    names: GlobFilter = Field(default_factory=GlobFilter)
    """Globs on server names (the full name, or the part after the slash)."""
    tags: GlobFilter = Field(default_factory=GlobFilter)
    """Globs on tags."""


class SyncPolicy(RuleModel):
    """When a source is synced."""

    rules = (
        Rule(
            cel="duration(self.interval) >= duration('100ms')",
            message="interval must be at least 100ms",
            field_path=".interval",
            check=lambda s: parse_duration(s.interval) >= 0.1,
        ),
    )

    interval: Duration
    """How often to sync, e.g. 30m; at least 100ms."""

    @property
    def seconds(self) -> float:
        return parse_duration(self.interval)
