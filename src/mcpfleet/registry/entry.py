"""The unit the registry moves around: one server.json entry (name, version, document) and per-entry errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OFFICIAL_META = "io.modelcontextprotocol.registry/official"
PUBLISHER_META = "io.modelcontextprotocol.registry/publisher-provided"
TOOLHIVE_NAMESPACE = "io.github.stacklok"

PUBLISHED = "@published"
"""The source name of published entries (not a DNS label, so no configured source can collide)."""

STATUS_ACTIVE = "active"
STATUS_DEPRECATED = "deprecated"
STATUS_DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class Entry:
    """One version of one server, as a source yields it (a valid server.json document)."""

    name: str
    version: str
    server: dict[str, Any]
    status: str = STATUS_ACTIVE

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.version)

    def tags(self) -> list[str]:
        """Tags found under publisher-provided metadata (ToolHive's layout: namespace → identifier → tags)."""
        meta = self.server.get("_meta")
        provided = meta.get(PUBLISHER_META) if isinstance(meta, dict) else None
        if not isinstance(provided, dict):
            return []
        found: list[str] = []
        for namespace in provided.values():
            if not isinstance(namespace, dict):
                continue
            direct = namespace.get("tags")
            if isinstance(direct, list):
                found.extend(t for t in direct if isinstance(t, str))
            for ext in namespace.values():
                if isinstance(ext, dict) and isinstance(ext.get("tags"), list):
                    found.extend(t for t in ext["tags"] if isinstance(t, str))
        return found


@dataclass(frozen=True, slots=True)
class EntryError:
    """Why one entry of a source was not loaded; the other entries still load."""

    source: str
    index: int | None
    """Position of the entry in the source (None: the whole document)."""
    name: str | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "index": self.index, "name": self.name, "message": self.message}


@dataclass(slots=True)
class ParseResult:
    entries: list[Entry] = field(default_factory=list)
    errors: list[EntryError] = field(default_factory=list)
