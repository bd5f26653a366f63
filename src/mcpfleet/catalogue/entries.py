"""Catalogue entries: validated server.json documents with the names a person types to find them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from mcpfleet.registry.formats import parse
from mcpfleet.registry.formats.upstream import validation_error

BUNDLED = "bundled"
"""The source label of the offline catalogue shipped with mcpfleet."""
MAX_CATALOGUE_BYTES = 16 * 1024 * 1024
"""A catalogue file or registry answer larger than this is refused (the official registry's whole
catalogue of ~10,000 servers is about 7 MB)."""
_NOISE = re.compile(r"^(mcp-server-|server-|mcp-)|(-mcp-server|-mcp|-server)$")


class CatalogueError(ValueError):
    """A catalogue (file, registry answer) that cannot be read; the message names it."""


@dataclass(frozen=True)
class CatalogueEntry:
    """One server of a catalogue: its server.json document (schema-valid) and where it came from."""

    server: dict[str, Any]
    source: str

    @property
    def name(self) -> str:
        return str(self.server["name"])

    @property
    def version(self) -> str:
        return str(self.server["version"])

    @property
    def description(self) -> str:
        return str(self.server.get("description") or "")

    @property
    def short_name(self) -> str:
        """The name a person types (`time` for `io.github.modelcontextprotocol/time`), also the
        default name of the manifest `add` writes: lower case, `[a-z0-9-]`, registry noise removed."""
        last = self.name.rsplit("/", 1)[-1].lower()
        cleaned = re.sub(r"[^a-z0-9-]+", "-", last).strip("-")
        short = _NOISE.sub("", cleaned).strip("-") or cleaned
        return short[:63].strip("-") or "server"

    def packages(self) -> list[dict[str, Any]]:
        return [p for p in self.server.get("packages") or [] if isinstance(p, dict)]

    def remotes(self) -> list[dict[str, Any]]:
        return [r for r in self.server.get("remotes") or [] if isinstance(r, dict)]

    def package_label(self) -> str:
        """`pypi mcp-server-time`, `npm @scope/pkg`, `oci IMAGE` or `remote` — for a table."""
        for package in self.packages():
            return f"{package.get('registryType')} {package.get('identifier')}"
        return "remote" if self.remotes() else "-"

    def transport(self) -> str:
        for package in self.packages():
            return str((package.get("transport") or {}).get("type", "stdio"))
        for remote in self.remotes():
            return str(remote.get("type", "-"))
        return "-"


def _entries(source: str, documents: list[Any]) -> tuple[list[CatalogueEntry], list[str]]:
    entries: list[CatalogueEntry] = []
    problems: list[str] = []
    for index, server in enumerate(documents):
        error = validation_error(server)
        if error is not None:
            problems.append(f"{source}: entry {index}: {error}")
            continue
        entries.append(CatalogueEntry(server=server, source=source))
    return entries, problems


def bundled() -> list[CatalogueEntry]:
    """The offline catalogue shipped in this package (validated like any other)."""
    text = resources.files("mcpfleet.catalogue").joinpath("bundled.json").read_text()
    entries, problems = _entries(BUNDLED, json.loads(text))
    if problems:  # a packaging defect, caught by the tests
        raise CatalogueError("; ".join(problems))
    return entries


def detect_format(content: bytes) -> str:
    """`toolhive` for ToolHive's legacy registry file (`servers` is an object keyed by name), else
    `upstream` (server.json documents, alone, in a list, wrapped, or an API page)."""
    try:
        document = orjson.loads(content)  # bounded nesting (json.loads recurses until the stack ends)
    except orjson.JSONDecodeError:
        return "upstream"  # the parser reports the syntax error
    if isinstance(document, dict) and isinstance(document.get("servers"), dict):
        return "toolhive"
    if isinstance(document, dict) and isinstance(document.get("remote_servers"), dict):
        return "toolhive"
    return "upstream"


def from_content(source: str, content: bytes) -> tuple[list[CatalogueEntry], list[str]]:
    """Entries of a catalogue in either format, and one line per entry that was refused."""
    if len(content) > MAX_CATALOGUE_BYTES:
        raise CatalogueError(f"{source}: larger than {MAX_CATALOGUE_BYTES} bytes")
    result = parse(detect_format(content), source, content)
    problems = [f"{source}: {error.name or 'entry'}: {error.message}" for error in result.errors]
    return [CatalogueEntry(server=e.server, source=source) for e in result.entries], problems


def from_file(path: Path) -> tuple[list[CatalogueEntry], list[str]]:
    """A catalogue file (upstream or ToolHive format), size-bounded before it is read."""
    try:
        if not path.is_file():
            raise CatalogueError(f"{path}: not a file")
        if path.stat().st_size > MAX_CATALOGUE_BYTES:
            raise CatalogueError(f"{path}: larger than {MAX_CATALOGUE_BYTES} bytes")
        content = path.read_bytes()
    except OSError as exc:
        raise CatalogueError(f"{path}: {exc.strerror or exc}") from None
    return from_content(str(path), content)


def score(entry: CatalogueEntry, term: str) -> int:
    """How well `entry` matches a search term (0: not at all). Exact names first, then names that
    contain the term, then titles and descriptions."""
    term = term.strip().lower()
    if not term:
        return 1
    name = entry.name.lower()
    if term in (name, entry.short_name):
        return 100
    if term in name:
        return 50
    title = str(entry.server.get("title") or "").lower()
    if term in title:
        return 40
    packages = " ".join(str(p.get("identifier", "")) for p in entry.packages()).lower()
    if term in packages:
        return 30
    words = term.split()
    text = f"{name} {title} {entry.description.lower()} {packages}"
    if all(word in text for word in words):
        return 10
    return 0


def search(entries: list[CatalogueEntry], term: str) -> list[CatalogueEntry]:
    """Matching entries, best first; the newest version of each name only (first source wins)."""
    seen: set[str] = set()
    ranked: list[tuple[int, int, CatalogueEntry]] = []
    for position, entry in enumerate(entries):
        if entry.name in seen:
            continue
        points = score(entry, term)
        if points:
            seen.add(entry.name)
            ranked.append((-points, position, entry))
    return [entry for _, _, entry in sorted(ranked, key=lambda item: item[:2])]


def find(entries: list[CatalogueEntry], name: str, version: str | None) -> CatalogueEntry:
    """The entry a person named: its full name or its short name, at `version` or the first listed.

    Several entries with one short name from different publishers are ambiguous: the error lists
    their full names."""
    wanted = name.strip().lower()
    exact = [e for e in entries if e.name.lower() == wanted]
    candidates = exact or [e for e in entries if e.short_name == wanted]
    if version is not None:
        candidates = [e for e in candidates if e.version == version]
    if not candidates:
        at = f"@{version}" if version else ""
        raise LookupError(f"no catalogue entry named {name}{at}; try `mcpfleet search {name}`")
    names = sorted({e.name for e in candidates})
    if len(names) > 1:
        raise LookupError(f"{name} is ambiguous: {', '.join(names)} (give the full name)")
    return candidates[0]
