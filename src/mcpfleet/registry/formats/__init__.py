"""Registry file formats: upstream server.json documents and the legacy ToolHive registry file."""

from __future__ import annotations

from mcpfleet.registry.entry import ParseResult
from mcpfleet.registry.formats.toolhive import parse_toolhive
from mcpfleet.registry.formats.upstream import parse_upstream


def parse(fmt: str, source: str, content: bytes) -> ParseResult:
    """Parse `content` in format `fmt` ("upstream" or "toolhive") into entries and per-entry errors."""
    if fmt == "toolhive":
        return parse_toolhive(source, content)
    return parse_upstream(source, content)


__all__ = ["parse", "parse_toolhive", "parse_upstream"]
